"""Redo chosen forward values in the backward, right before the backward bindings that read them.

Four rewrites keep fewer tensors from the forward to the backward by recomputing values
there instead (:mod:`.backward_casts`: float casts; :mod:`.backward_elementwise`: cheap
elementwise chains; :mod:`.backward_attention`: attention probabilities;
:mod:`.backward_input_slices`: an RNN step's slice of the input sequence). Each decides *what* to redo; this module does the rewriting for all of them:

* ``targets``: forward values whose backward reads are replaced by a recomputed copy;
* ``recipe``: forward values recomputed (not read) while building a copy, ``targets``
  included; any other operand is read as it is (kept from the forward, or a parameter);
* ``shared``: one copy per value, emitted before the first backward binding that reads it
  and read by every later one (worth it when the copy is a big tensor, an attention's
  probabilities); otherwise a fresh copy per reading binding, which FuseOps folds into that
  binding's kernel (a cast, an elementwise chain), so no copy outlives its reader.

A copy is the same op with the same attributes on the same (or identically recomputed)
operands: the values are bit-identical to the forward's.

The backward is the part of ``Gradient``'s output from its first ``*_adjoint`` binding on
(:func:`backward_vars`).
"""
from __future__ import annotations

from typing import Dict, List, Set

from tvm import relax

from .relax_walk import bindings

__all__ = ["backward_vars", "reads", "redo_in_backward"]


def backward_vars(func: relax.Function) -> Set[relax.Var]:
    """Binding vars from the first ``*_adjoint`` binding on."""
    out: Set[relax.Var] = set()
    seen = False
    for b in bindings(func):
        seen = seen or b.var.name.endswith("_adjoint")
        if seen:
            out.add(b.var)
    return out


def _reads_in_order(expr: relax.Expr) -> List[relax.Var]:
    """The vars ``expr`` reads, each once, in the order a post-order walk meets them."""
    found: Dict[relax.Var, None] = {}
    relax.analysis.post_order_visit(expr, lambda n: found.setdefault(n) if isinstance(n, relax.Var) else None)
    return list(found)


def reads(expr: relax.Expr) -> Set[relax.Var]:
    """The vars ``expr`` reads."""
    return set(_reads_in_order(expr))


@relax.expr_functor.mutator
class _RedoInBackward(relax.PyExprMutator):
    """Emits the copies (see the module docstring); analysis happens before, in the callers."""

    def __init__(self, defs: Dict[relax.Var, relax.Call], targets: Set[relax.Var],
                 backward: Set[relax.Var], shared: bool):
        super().__init__()
        self.defs = defs
        self.targets = targets
        self.backward = backward
        self.shared = shared
        self.copies: Dict[relax.Var, relax.Expr] = {}  # shared copies made so far

    def _copy(self, v: relax.Var, made: Dict[relax.Var, relax.Expr]) -> relax.Expr:
        if v not in made:
            call = self.defs[v]
            args = [self._operand(a, made) for a in call.args]
            made[v] = self.builder_.emit(relax.Call(call.op, args, call.attrs, call.ty_args),
                                         name_hint=v.name + "_bwd")
            if self.shared:  # every later backward read of v, not only this one, uses the copy
                self.set_var_remap(v, made[v])
        return made[v]

    def _operand(self, a: relax.Expr, made: Dict[relax.Var, relax.Expr]) -> relax.Expr:
        if isinstance(a, relax.Tuple):  # concat's operands (index grids)
            return relax.Tuple([self._operand(f, made) for f in a.fields])
        if isinstance(a, relax.Var) and a in self.defs:
            return self._copy(a, made)
        return self.visit_expr(a)

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        used = [v for v in _reads_in_order(binding.value) if v in self.targets] \
            if binding.var in self.backward else []
        if not used:
            super().visit_var_binding_(binding)
            return
        if self.shared:
            for v in used:
                self._copy(v, self.copies)
            super().visit_var_binding_(binding)
            return
        made: Dict[relax.Var, relax.Expr] = {}
        saved = {v: self.get_var_remap(v) for v in used}
        for v in used:
            self.set_var_remap(v, self._copy(v, made))
        super().visit_var_binding_(binding)
        for v, old in saved.items():  # the next reader gets its own copy
            self.set_var_remap(v, old if old is not None else v)


def redo_in_backward(func: relax.Function, targets: Set[relax.Var], recipe: Set[relax.Var],
                     shared: bool, backward: Set[relax.Var] | None = None) -> relax.Function:
    """``func`` whose backward reads of ``targets`` read values recomputed there.

    Parameters
    ----------
    func : relax.Function
        A function with a backward (``Gradient``'s output).
    targets : set of relax.Var
        Forward values whose backward reads are redirected to a recomputed copy.
    recipe : set of relax.Var
        Forward values recomputed while building a copy; must contain ``targets``, and each
        must be bound to an op call.
    shared : bool
        One copy per value for all its backward readers (True), or one per reading binding.
    backward : set of relax.Var, optional
        The backward bindings (default :func:`backward_vars`).

    Returns
    -------
    relax.Function
    """
    if not targets:
        return func
    missing = set(targets) - set(recipe)
    if missing:
        raise ValueError(f"internal: redo targets without a recipe: {sorted(v.name for v in missing)}")
    backward = backward_vars(func) if backward is None else backward
    defs = {b.var: b.value for b in bindings(func) if b.var in recipe}
    not_calls = [v.name for v, value in defs.items() if not isinstance(value, relax.Call)]
    if not_calls or len(defs) != len(recipe):
        raise ValueError(f"internal: redo recipe values not bound to an op call: {not_calls}")
    return _RedoInBackward(defs, set(targets), backward, shared).visit_expr(func)
