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
from typing import Dict, Set, Tuple

import tvm
from tvm import relax

from .relax_walk import bindings


def _float_bits(dtype: str) -> int:
    """Bits of a float dtype (``float32`` -> 32, ``bfloat16`` -> 16), 0 for any other."""
    m = re.match(r"b?float(\d+)", dtype)
    return int(m.group(1)) if m else 0


#: How the backward redoes a forward value: its source and the ops applied to it in turn,
#: ``("astype", dtype)`` then any ``("reshape", shape)``.
Recipe = Tuple[relax.Var, Tuple[Tuple[str, object], ...]]


def _recastable(func: relax.Function, backward: Set[relax.Var]) -> Dict[relax.Var, Recipe]:
    """Forward float casts ``y = astype(x, dtype)`` (and reshapes of them) the backward may redo.

    An upcast always (``x`` is the smaller); a downcast when the backward reads ``x`` itself
    too, so ``x`` is kept anyway (softmax in float32, its bfloat16 copy for the next matmul).
    A reshape of such a cast is redone as the cast and the reshape (the backward often reads
    the reshaped view).
    """
    read_in_backward: Set[relax.Var] = set()
    for b in bindings(func):
        if b.var in backward:
            read_in_backward |= reads(b.value)
    out: Dict[relax.Var, Recipe] = {}
    for b in bindings(func):
        value = b.value
        if b.var in backward or not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            continue
        arg = value.args[0] if value.args else None
        if not isinstance(arg, relax.Var):
            continue
        if value.op.name == "relax.reshape" and arg in out:
            src, steps = out[arg]
            out[b.var] = (src, steps + (("reshape", value.args[1]),))
            continue
        if value.op.name != "relax.astype":
            continue
        if not isinstance(arg.ty, relax.TensorType) or not isinstance(b.var.ty, relax.TensorType):
            continue
        to, frm = str(b.var.ty.dtype), str(arg.ty.dtype)
        if not (_float_bits(frm) and _float_bits(to)) or frm == to:
            continue
        if _float_bits(frm) < _float_bits(to) or arg in read_in_backward:
            out[b.var] = (arg, (("astype", to),))
    return out


def backward_vars(func: relax.Function) -> Set[relax.Var]:
    """Binding vars from the first ``*_adjoint`` binding on."""
    out: Set[relax.Var] = set()
    seen = False
    for b in bindings(func):
        seen = seen or b.var.name.endswith("_adjoint")
        if seen:
            out.add(b.var)
    return out


def reads(expr) -> Set[relax.Var]:
    found: Set[relax.Var] = set()
    relax.analysis.post_order_visit(expr, lambda n: found.add(n) if isinstance(n, relax.Var) else None)
    return found


@relax.expr_functor.mutator
class _BackwardCasts(relax.PyExprMutator):
    def __init__(self, upcasts, backward):
        super().__init__()
        self.upcasts = upcasts
        self.backward = backward

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        used = [v for v in reads(binding.value) if v in self.upcasts] \
            if binding.var in self.backward else []
        if not used:
            super().visit_var_binding_(binding)
            return
        saved = {v: self.get_var_remap(v) for v in used}
        for v in used:
            src, steps = self.upcasts[v]
            fresh = self.visit_expr(src)
            for kind, arg in steps:
                op = relax.op.astype(fresh, arg) if kind == "astype" else relax.op.reshape(fresh, arg)
                fresh = self.builder_.emit(op, name_hint=v.name + "_bwd")
            self.set_var_remap(v, fresh)
        super().visit_var_binding_(binding)
        for v, old in saved.items():
            self.set_var_remap(v, old if old is not None else v)


def recompute_upcasts_in_backward(func: relax.Function) -> relax.Function:
    """``func`` with every backward read of a forward upcast replaced by a fresh cast."""
    backward = backward_vars(func)
    upcasts = _recastable(func, backward)
    if not backward or not upcasts:
        return func
    return _BackwardCasts(upcasts, backward).visit_expr(func)
