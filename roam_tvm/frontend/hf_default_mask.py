"""The all-ones attention mask Hugging Face T5-style encoder stacks build eagerly, also while tracing.

LongT5's and Switch Transformers' stacks (``LongT5Stack``, ``SwitchTransformersStack``) start with
``if attention_mask is None and not is_torchdynamo_compiling(): attention_mask = torch.ones(...)``
and then, in an encoder stack, read ``attention_mask`` unconditionally (``attention_mask[:, None,
None, :]``, LongT5's local blocks). Under ``torch.export`` the default is skipped, so a model called
without a mask -- as users call them for training on unpadded batches -- fails to trace
("'NoneType' object is not subscriptable"), or traces a different (batch-1 broadcast) bias.

Within :func:`default_encoder_masks`, such an encoder stack (``is_decoder`` False, its class's
``forward`` holding that line) called without ``attention_mask`` and without a cache gets the mask
its eager forward would make: ``ones(batch, seq)``. The traced step is then the eager one.
Decoder stacks build their causal mask from ``None`` correctly and are left alone.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Iterator

_PATTERN = "attention_mask is None and not is_torchdynamo_compiling()"


def _skips_default_mask(module) -> bool:
    """An encoder stack whose forward builds its default mask only outside tracing."""
    if getattr(module, "is_decoder", None) is not False:
        return False
    try:
        return _PATTERN in inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return False


def _fill_mask(module, args, kwargs):
    """Forward pre-hook: ``attention_mask = ones(batch, seq)`` when the call gave none (and no cache)."""
    import torch

    bound = inspect.signature(module.forward).bind_partial(*args, **kwargs)
    given = bound.arguments
    if given.get("attention_mask") is not None or given.get("past_key_values") is not None:
        return None
    ref = given.get("input_ids")
    ref = ref if ref is not None else given.get("inputs_embeds")
    if ref is None or ref.dim() < 2:
        return None
    given["attention_mask"] = torch.ones(ref.shape[0], ref.shape[1], device=ref.device)
    return bound.args, bound.kwargs


@contextlib.contextmanager
def default_encoder_masks(model) -> Iterator[None]:
    """While active, the encoder stacks of ``model`` that skip their default mask under tracing get
    it (see the module docstring); other modules are untouched."""
    handles = [m.register_forward_pre_hook(_fill_mask, with_kwargs=True)
               for m in model.modules() if _skips_default_mask(m)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
