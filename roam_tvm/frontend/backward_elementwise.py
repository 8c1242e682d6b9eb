"""The backward redoes cheap elementwise steps from their source instead of keeping their results.

``torch.export`` spells ``hardswish`` as ``x * clip(x + 3, 0, 6) / 6`` (two clips, one per
bound) and ``hardsigmoid`` as ``clip(x + 3, 0, 6) / 6``. Relax ``Gradient`` keeps every
operand its gradients read: ``x`` and the product's other factor for the multiply, and each
clip's output for that clip's mask. PyTorch's ``hardswish_backward`` keeps only ``x``.
Likewise ``weight_norm``'s ``||v||`` is ``sum(abs(v) ** 2) ** 0.5`` once exported, and the
power's gradient keeps ``abs(v)``, a weight-sized copy of the parameter ``v``.

``recompute_elementwise_in_backward`` follows each forward value back through a *chain* of
shape- and dtype-preserving elementwise steps that read one tensor (a clip, a negation, an
absolute value, an add / subtract / multiply / divide / maximum / minimum by a one-element constant) to the
chain's *root*. A backward binding that reads a chain member reads a fresh copy instead,
recomputed from the root just before it (FuseOps folds it into that binding's kernel), when
that costs no extra tensor:

* the root is kept for the backward anyway (read by it directly, or a parameter), or
* two or more members of the root's chains are read by the backward: one root kept instead.

The forward's copies then die with their last forward reader. Values are identical: the
same ops on the same input, in the same order.
"""
from __future__ import annotations

from typing import Dict, List, Set

import tvm
import tvm_ffi
from tvm import relax

from .backward_casts import backward_vars, reads
from .relax_shapes import scalar_value
from .relax_walk import bindings

#: one tensor argument, the rest PrimValues (clip's bounds)
_UNARY = frozenset({"relax.clip", "relax.negative", "relax.abs"})
#: a tensor and a one-element constant
_WITH_SCALAR = frozenset({"relax.add", "relax.subtract", "relax.multiply", "relax.divide",
                          "relax.maximum", "relax.minimum"})


def _same_tensor_type(a: relax.Expr, b: relax.Expr) -> bool:
    ta, tb = a.ty, b.ty
    if not isinstance(ta, relax.TensorType) or not isinstance(tb, relax.TensorType):
        return False
    if ta.dtype != tb.dtype or ta.shape is None or tb.shape is None:
        return False
    return tvm_ffi.structural_equal(ta.shape, tb.shape)


def _step_source(var: relax.Var, value: relax.Expr) -> relax.Var | None:
    """The one tensor ``value`` reads if it is a cheap elementwise step, else None."""
    if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
        return None
    name = value.op.name
    tensors = [a for a in value.args if isinstance(a, relax.Var)]
    if len(tensors) != 1:
        return None
    if name in _WITH_SCALAR:
        others = [a for a in value.args if not a.same_as(tensors[0])]
        if len(value.args) != 2 or not all(scalar_value(o) is not None for o in others):
            return None
    elif name not in _UNARY:
        return None
    # no broadcast, no cast: the fresh copy is the same tensor as the forward's
    return tensors[0] if _same_tensor_type(tensors[0], var) else None


def _chains(func: relax.Function, backward: Set[relax.Var]) -> Dict[relax.Var, List[relax.Var]]:
    """Forward var -> its chain: the root first, then each step up to the var itself."""
    out: Dict[relax.Var, List[relax.Var]] = {}
    for b in bindings(func):
        if b.var in backward:
            break
        src = _step_source(b.var, b.value)
        if src is not None:
            out[b.var] = out.get(src, [src]) + [b.var]
    return out


def _to_redo(func: relax.Function, backward: Set[relax.Var],
             chains: Dict[relax.Var, List[relax.Var]]) -> Set[relax.Var]:
    """The chain members whose backward reads are worth redoing (see the module docstring)."""
    read_back: Set[relax.Var] = set()
    for b in bindings(func):
        if b.var in backward:
            read_back |= reads(b.value)
    by_root: Dict[relax.Var, Set[relax.Var]] = {}
    for v, chain in chains.items():
        if v in read_back:
            by_root.setdefault(chain[0], set()).add(v)
    params = set(func.params)
    out: Set[relax.Var] = set()
    for root, members in by_root.items():
        if root in read_back or root in params or len(members) >= 2:
            out |= members
    return out


@relax.expr_functor.mutator
class _Redo(relax.PyExprMutator):
    def __init__(self, chains, redo, defs, backward):
        super().__init__()
        self.chains, self.redo, self.defs, self.backward = chains, redo, defs, backward

    def _fresh(self, v: relax.Var, made: Dict[relax.Var, relax.Expr]) -> relax.Expr:
        chain = self.chains[v]
        prev = self.visit_expr(chain[0])
        for m in chain[1:]:
            if m not in made:
                value = self.defs[m]
                args = [prev if isinstance(a, relax.Var) else a for a in value.args]
                made[m] = self.builder_.emit(relax.Call(value.op, args, value.attrs,
                                                        value.ty_args),
                                             name_hint=m.name + "_bwd")
            prev = made[m]
        return prev

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        used = [v for v in reads(binding.value) if v in self.redo] \
            if binding.var in self.backward else []
        if not used:
            super().visit_var_binding_(binding)
            return
        made: Dict[relax.Var, relax.Expr] = {}
        saved = {v: self.get_var_remap(v) for v in used}
        for v in used:
            self.set_var_remap(v, self._fresh(v, made))
        super().visit_var_binding_(binding)
        for v, old in saved.items():
            self.set_var_remap(v, old if old is not None else v)


def recompute_elementwise_in_backward(func: relax.Function) -> relax.Function:
    """``func`` (an adjoint) with backward reads of cheap elementwise chains redone from
    their root where that keeps fewer tensors (see the module docstring)."""
    backward = backward_vars(func)
    if not backward:
        return func
    chains = _chains(func, backward)
    redo = _to_redo(func, backward, chains)
    if not redo:
        return func
    defs = {b.var: b.value for b in bindings(func)}
    return _Redo(chains, redo, defs, backward).visit_expr(func)
