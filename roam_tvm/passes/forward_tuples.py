"""ForwardTupleItems: a tuple that is only taken apart is not kept.

After ``CallTIRRewrite`` a ``call_tir`` with several outputs is
``alloc0, alloc1 = ...; f(args, alloc0, alloc1); t = (alloc0, alloc1); y = t[0]``.
The VM keeps ``t`` in a register until the function ends, and with it every
tensor it holds, though no plan counts them live after their last use (and
``KillAfterLastUse`` kills tensors and storages, not tuples). This pass replaces
each ``t[i]`` of such a tuple by the element itself and drops the tuple when
nothing else uses it, so a kernel's extra outputs (``LiftKernelScratch``) die
right after the call, as planned.
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

__all__ = ["ForwardTupleItems"]


def _tuple_uses(func: relax.Function) -> tuple[dict, set]:
    """Tuple-literal bindings (var -> Tuple) and the vars among them used other than by ``t[i]``."""
    tuples = {}
    counts: dict = {}
    gets: dict = {}

    def count(node):
        if isinstance(node, relax.Var):
            counts[node] = counts.get(node, 0) + 1
        elif isinstance(node, relax.TupleGetItem) and isinstance(node.tuple_value, relax.Var):
            gets[node.tuple_value] = gets.get(node.tuple_value, 0) + 1

    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b, relax.VarBinding) and isinstance(b.value, relax.Tuple):
                tuples[b.var] = b.value
            relax.analysis.post_order_visit(b.value, count)
    relax.analysis.post_order_visit(func.body.body, count)
    kept = {v for v in tuples if counts.get(v, 0) != gets.get(v, 0)}
    return tuples, kept


@mutator
class _Forward(PyExprMutator):
    def __init__(self, mod: tvm.IRModule, tuples: dict, kept: set) -> None:
        super().__init__(mod)
        self.tuples = tuples
        self.kept = kept

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        value = binding.value
        if binding.var in self.tuples and binding.var not in self.kept:
            return  # only taken apart: its items are forwarded below
        if isinstance(value, relax.TupleGetItem) and value.tuple_value in self.tuples:
            item = self.visit_expr(self.tuples[value.tuple_value].fields[value.index])
            self.builder_.emit_normalized(relax.VarBinding(binding.var, item))
            return
        super().visit_var_binding_(binding)


@tvm.transform.module_pass(opt_level=0, name="ForwardTupleItems")
class ForwardTupleItems:
    """Forward ``t[i]`` of tuple literals to their items; drop tuples nothing else uses."""

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
                continue
            tuples, kept = _tuple_uses(func)
            if not tuples:
                continue
            mutator_ = _Forward(mod, tuples, kept)
            updates[gv] = mutator_.visit_expr(func)
        if not updates:
            return mod
        out = mod.clone()
        for gv, func in updates.items():
            out[gv] = func
        return out
