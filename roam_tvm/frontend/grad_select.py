"""The gradient of a ``take`` of one constant index (``x[:, :, i]``) as a zero pad, not a scatter.

``x.select(axis, i)`` (``x[:, :, i, :]`` with a Python int, PyTorch's ``select``) is imported as
``relax.take(x, const(i), axis)``. Its gradient through ``take_backward`` is a scatter into a
fresh zero tensor of ``x``'s full shape. Where a loop reads every step of a sequence this way (a
selective scan reading ``A[:, :, t]`` at each of ``T`` steps), the ``T`` full-size gradients are
added up, and each sum link holds the accumulator, the new full-size contribution and the sum.

The same gradient written as ``pad(expand_dims(g, axis))`` with widths ``(i, K - 1 - i)`` on
``axis`` is what a slice's gradient is, and :mod:`.accumulate` adds such a zero pad into its
slice of the accumulator in place: the full-size copies are never built. The values are the
same (zeros everywhere but position ``i``).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tvm
from tvm import relax
from tvm.relax import op as R

from .relax_shapes import static_shape


def constant_index(idx, ctx=None) -> Optional[int]:
    """The index of a 0-d (or one-element) integer constant, else None; a variable bound to
    one is followed through ``ctx`` (the gradient's block builder)."""
    if isinstance(idx, relax.Var) and ctx is not None:
        bound = ctx.lookup_binding(idx)
        idx = bound if bound is not None else idx
    if not isinstance(idx, tvm.ir.Constant) or not hasattr(idx.value, "numpy"):
        return None
    value = idx.value.numpy()
    if value.size != 1 or not np.issubdtype(value.dtype, np.integer):
        return None
    return int(value.reshape(-1)[0])


def select_grad_as_pad(x, idx, axis, output_grad, ctx=None) -> Optional[relax.Expr]:
    """``x``'s gradient of ``take(x, idx, axis)`` as a zero pad when ``idx`` is one constant
    index on a static axis, else None (the caller's ``take_backward`` applies)."""
    i = constant_index(idx, ctx)
    if i is None or axis is None:
        return None
    try:
        shape = static_shape(x)
    except (TypeError, ValueError):  # a symbolic dim
        return None
    ax = int(axis) % len(shape)
    k = shape[ax]
    if not -k <= i < k:
        return None
    i %= k
    g = output_grad if idx.ty.ndim == 1 else R.expand_dims(output_grad, ax)
    widths = [0] * (2 * len(shape))
    widths[2 * ax], widths[2 * ax + 1] = i, k - 1 - i
    return R.nn.pad(g, widths, pad_mode="constant", pad_value=0.0)
