"""Hugging Face dynamic-NTK RoPE (``rope_type="dynamic"``) in a form ``torch.export`` can trace.

``transformers``' ``dynamic_rope_update`` decorator recomputes a rotary embedding's inverse
frequencies in every forward: ``seq_len = position_ids.max() + 1``, then ``if seq_len >
max_seq_len_cached`` (grow) and ``if seq_len < original_max_seq_len and ...`` (reset). Both are
Python branches on tensor values, which ``torch.export`` (and the fake-tensor PyTorch simulation)
cannot take ("Could not guard on data-dependent expression").

The step is planned for static shapes, so the update's outcome is fixed by the example inputs:
:func:`settle_dynamic_rope` runs the model once eagerly on them (``no_grad``, eval mode, so no
running statistics move), which leaves every dynamic rotary module with the buffers and
attention scaling its first training forward would compute (the update depends only on the
positions, and running it again at the same length changes nothing). Within
:func:`static_rope_updates` those modules skip the update (their ``rope_type`` reads
``"default"``: the decorator's only switch; the forward itself uses the buffers), so the trace
sees the settled frequencies as constants.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from .module_modes import kept_modes


def _is_dynamic(rope_type) -> bool:
    if isinstance(rope_type, dict):
        return any(_is_dynamic(v) for v in rope_type.values())
    return isinstance(rope_type, str) and "dynamic" in rope_type


def _static(rope_type):
    """``rope_type`` with every dynamic entry read as ``"default"`` (no update in the decorator)."""
    if isinstance(rope_type, dict):
        return {k: _static(v) for k, v in rope_type.items()}
    return "default" if _is_dynamic(rope_type) else rope_type


def dynamic_rope_modules(model) -> list:
    """The rotary-embedding modules of ``model`` whose ``rope_type`` is dynamic (``max_seq_len_cached``
    marks transformers' rotary modules)."""
    return [m for m in model.modules()
            if hasattr(m, "max_seq_len_cached") and _is_dynamic(getattr(m, "rope_type", None))]


def settle_dynamic_rope(model, example_inputs: tuple) -> None:
    """Run ``model(*example_inputs)`` once eagerly if it has dynamic RoPE modules (see the module
    docstring); models without them are left untouched and not run."""
    import torch

    if not dynamic_rope_modules(model):
        return
    with kept_modes(model), torch.no_grad():
        model.eval()
        model(*example_inputs)


@contextlib.contextmanager
def static_rope_updates(model) -> Iterator[None]:
    """Within the block, dynamic RoPE modules of ``model`` keep their current frequencies (no
    data-dependent update); call :func:`settle_dynamic_rope` first so they are the right ones."""
    saved = [(m, m.rope_type) for m in dynamic_rope_modules(model)]
    for m, rope_type in saved:
        m.rope_type = _static(rope_type)
    try:
        yield
    finally:
        for m, rope_type in saved:
            m.rope_type = rope_type
