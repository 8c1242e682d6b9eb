"""Hugging Face mixture-of-experts layers in a form ``torch.export`` and TVM can take.

``transformers`` >= 5 dispatches a MoE layer's experts (Mixtral, Qwen2-MoE, ...) through
``config._experts_implementation``. Its default, ``"grouped_mm"``, counts tokens per expert
with ``histc`` and runs ``torch._grouped_mm`` over ragged groups: TVM's importer has neither
op, and the groups' sizes depend on the data. ``"eager"`` loops over the experts that
``nonzero`` finds, which ``torch.export`` cannot trace with static shapes. ``"batched_mm"``
gathers each (token, expert) pair's weights and runs one batched matmul: static shapes, the
same function, exportable. :func:`exportable_experts` switches a model to it for the export
and restores the user's choice afterwards.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

STATIC_IMPLEMENTATION = "batched_mm"


def _experts_models(model) -> list:
    """The Hugging Face models inside ``model`` whose config picks an experts implementation."""
    found = []
    for module in model.modules():
        config = getattr(module, "config", None)
        if (hasattr(module, "set_experts_implementation") and config is not None
                and getattr(config, "_experts_implementation", None) is not None):
            found.append(module)
    return found


@contextlib.contextmanager
def exportable_experts(model) -> Iterator[None]:
    """Within the block, every HF MoE layer of ``model`` uses ``"batched_mm"`` experts.

    Parameters
    ----------
    model : torch.nn.Module
        Any module; models without HF experts are left untouched.
    """
    saved = []
    for hf in _experts_models(model):
        current = hf.config._experts_implementation
        if current != STATIC_IMPLEMENTATION:
            saved.append((hf, current))
            hf.set_experts_implementation(STATIC_IMPLEMENTATION)
    try:
        yield
    finally:
        for hf, current in reversed(saved):
            hf.set_experts_implementation(current)
