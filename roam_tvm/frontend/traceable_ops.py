"""Functional ops that ``torch.export`` or TVM's importer cannot take, swapped for traceable
equivalents while the model and its loss are traced.

Each replacement is written in torch ops the importer and the frontend's gradients handle,
in its own module: ``F.unfold`` / ``F.fold`` (``unfold_conv``), ``F.grid_sample``
(``grid_sample``), ``F.ctc_loss`` (``ctc_loss``). The swap is scoped to the
trace: :func:`traceable_functionals` restores PyTorch's functions on exit. Modules
(``nn.Unfold``, ...) call the functional form, so they are covered too.
"""
from __future__ import annotations

import contextlib


def _replacements() -> dict:
    from . import ctc_loss, grid_sample, unfold_conv

    return {"unfold": unfold_conv.unfold, "fold": unfold_conv.fold,
            "grid_sample": grid_sample.grid_sample, "ctc_loss": ctc_loss.ctc_loss}


@contextlib.contextmanager
def traceable_functionals():
    """While active, ``torch.nn.functional``'s listed ops run their traceable forms."""
    import torch.nn.functional as F

    from .ctc_loss import recorded_selections

    saved = {}
    try:
        for name, fn in _replacements().items():
            saved[name] = getattr(F, name)
            setattr(F, name, fn)
        with recorded_selections():  # CTC targets concatenated by masked_select (ctc_loss.py)
            yield
    finally:
        for name, fn in saved.items():
            setattr(F, name, fn)
