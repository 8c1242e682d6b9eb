"""The backward casts again instead of keeping a forward cast's copy alive.

Under autocast, an op that computes in float32 from a bfloat16 activation (torch's
decomposition of ``silu`` does ``x.float()``) gets ``y = astype(x, "float32")``. When the
op's gradient reads ``y``, the float32 copy (twice the bytes of ``x``) stays alive from the
forward to the backward; PyTorch's autograd saves the bfloat16 ``x`` and casts again when
the backward runs. ``recompute_upcasts_in_backward`` does the same: every backward binding
that reads such a ``y`` reads a fresh ``astype(x, "float32")`` emitted just before it, which
FuseOps folds into that binding's kernel, so the forward's copy dies with its last forward
reader. The values are identical (the cast is exact and deterministic).

A downcast is redone the same way when the backward reads its float32 source anyway: HF's
eager attention keeps the float32 softmax for the softmax's backward and a bfloat16 copy of
it for the next matmul's; PyTorch's autograd keeps both, the step here keeps the float32 one.

The backward is the part of ``Gradient``'s output from its first adjoint binding on
(``*_adjoint``); a forward binding taken for a backward one would only cast once more.
"""
from __future__ import annotations

import re
from typing import Set

import tvm
from tvm import relax

from .backward_redo import backward_vars, reads, redo_in_backward
from .relax_walk import bindings


def _float_bits(dtype: str) -> int:
    """Bits of a float dtype (``float32`` -> 32, ``bfloat16`` -> 16), 0 for any other."""
    m = re.match(r"b?float(\d+)", dtype)
    return int(m.group(1)) if m else 0


def _recastable(func: relax.Function, backward: Set[relax.Var]) -> Set[relax.Var]:
    """Forward float casts ``y = astype(x, dtype)`` (and reshapes of them) the backward redoes.

    An upcast always (``x`` is the smaller); a downcast when the backward reads ``x`` itself
    too, so ``x`` is kept anyway (softmax in float32, its bfloat16 copy for the next matmul).
    A reshape of such a cast is redone as the cast and the reshape (the backward often reads
    the reshaped view).
    """
    read_in_backward: Set[relax.Var] = set()
    for b in bindings(func):
        if b.var in backward:
            read_in_backward |= reads(b.value)
    out: Set[relax.Var] = set()
    for b in bindings(func):
        value = b.value
        if b.var in backward or not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            continue
        arg = value.args[0] if value.args else None
        if not isinstance(arg, relax.Var):
            continue
        if value.op.name == "relax.reshape" and arg in out:
            out.add(b.var)
            continue
        if value.op.name != "relax.astype":
            continue
        if not isinstance(arg.ty, relax.TensorType) or not isinstance(b.var.ty, relax.TensorType):
            continue
        to, frm = str(b.var.ty.dtype), str(arg.ty.dtype)
        if not (_float_bits(frm) and _float_bits(to)) or frm == to:
            continue
        if _float_bits(frm) < _float_bits(to) or arg in read_in_backward:
            out.add(b.var)
    return out


def recompute_upcasts_in_backward(func: relax.Function) -> relax.Function:
    """``func`` with every backward read of a forward upcast replaced by a fresh cast."""
    backward = backward_vars(func)
    upcasts = _recastable(func, backward)
    if not backward or not upcasts:
        return func
    # one copy per reading binding: FuseOps folds the cast into the reader's kernel
    return redo_in_backward(func, upcasts, upcasts, shared=False, backward=backward)
