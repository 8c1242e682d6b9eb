"""The backward slices a step's input out of the sequence again instead of keeping the slice.

An RNN cell's input projection reads its time step of the input sequence, ``x_t = x[:, t]``
(``rnn_step_projection.py``). In Relax that slice is a copy, and the weight gradient
``dW_ih += dP_t^T x_t`` reads it in the backward, so every step's copy is kept from the forward
to the backward: together a second copy of ``x``. PyTorch's autograd saves ``x[:, t]`` as a view
of ``x``, which is alive for the whole step anyway.

``recompute_input_slices_in_backward`` does the same: every backward binding that reads a
forward ``strided_slice`` of a function parameter (an input or a weight: alive throughout),
or a ``reshape`` of one, reads a fresh slice emitted just before it. The forward's copy dies
with its forward reader; the fresh one with its backward reader. Values are identical (the
same elements of the same tensor).
"""
from __future__ import annotations

from typing import Dict, Set, Tuple

import tvm
from tvm import relax

from .backward_casts import backward_vars, reads
from .relax_walk import bindings

#: a forward value redone as ``(parameter, ((op name, call), ...))``, the calls applied in turn
Recipe = Tuple[relax.Var, tuple]


def _op(value) -> str | None:
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return None


def _slices_of_params(func: relax.Function, backward: Set[relax.Var]) -> Dict[relax.Var, Recipe]:
    """Forward ``strided_slice(p, ...)`` of a parameter ``p`` of ``func``, and reshapes of them."""
    params = set(func.params)
    out: Dict[relax.Var, Recipe] = {}
    for b in bindings(func):
        if b.var in backward:
            continue
        value, name = b.value, _op(b.value)
        arg = value.args[0] if name else None
        if name == "relax.strided_slice" and arg in params:
            out[b.var] = (arg, ((name, value),))
        elif name == "relax.reshape" and arg in out:
            src, steps = out[arg]
            out[b.var] = (src, steps + ((name, value),))
    return out


@relax.expr_functor.mutator
class _FreshSlices(relax.PyExprMutator):
    def __init__(self, recipes: Dict[relax.Var, Recipe], backward: Set[relax.Var]):
        super().__init__()
        self.recipes = recipes
        self.backward = backward

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        used = [v for v in reads(binding.value) if v in self.recipes] \
            if binding.var in self.backward else []
        if not used:
            super().visit_var_binding_(binding)
            return
        saved = {v: self.get_var_remap(v) for v in used}
        for v in used:
            src, steps = self.recipes[v]
            fresh = self.visit_expr(src)
            for _, call in steps:  # the same call on the fresh operand
                new = relax.Call(call.op, [fresh] + list(call.args[1:]), call.attrs, call.ty_args)
                fresh = self.builder_.emit(new, name_hint=v.name + "_bwd")
            self.set_var_remap(v, fresh)
        super().visit_var_binding_(binding)
        for v, old in saved.items():
            self.set_var_remap(v, old if old is not None else v)


def recompute_input_slices_in_backward(func: relax.Function) -> relax.Function:
    """``func`` (an adjoint) with every backward read of a forward slice of one of its
    parameters replaced by a fresh slice emitted just before the reader.

    Parameters
    ----------
    func : relax.Function
        The adjoint from ``Gradient`` (forward bindings, then ``*_adjoint`` ones).

    Returns
    -------
    relax.Function
    """
    backward = backward_vars(func)
    recipes = _slices_of_params(func, backward)
    if not backward or not recipes:
        return func
    read_later = set()
    for b in bindings(func):
        if b.var in backward:
            read_later |= reads(b.value)
    recipes = {v: r for v, r in recipes.items() if v in read_later}
    return _FreshSlices(recipes, backward).visit_expr(func) if recipes else func
