"""Read adjoint tuples field by field, so no kernel takes a tuple.

``Gradient`` builds the adjoint of a ``split`` (``torch.chunk``) output as a tuple var, and
in RNN steps a tuple nested in a tuple. When such a var is an argument of a call (the
``concat`` of ``split``'s gradient), ``FuseOps`` makes it a tuple parameter of a fused
function, which ``FuseTIR`` cannot map to buffers (GRU: ``buffer_idx == buffers.size()``).
This pass replaces every use of a var bound to a tuple literal, as a call argument or under
``TupleGetItem``, by the literal (recursively); ``DeadCodeElimination`` then drops the
tuple bindings. Nothing else changes (TVM's ``CanonicalizeBindings`` does this too, but
also rewrites other bindings, which later broke the optimizer kernels' fusion).
"""

from __future__ import annotations

import tvm
from tvm import relax


@relax.expr_functor.mutator
class _TupleInliner(relax.PyExprMutator):
    def __init__(self, mod=None):
        super().__init__(mod)
        self.literal: dict = {}

    def visit_var_binding_(self, binding):
        value = self.visit_expr(binding.value)
        if isinstance(value, relax.Tuple):
            self.literal[binding.var] = value
        self.builder_.emit_normalized(relax.VarBinding(binding.var, value))

    def _inline(self, expr):
        if isinstance(expr, relax.Var) and expr in self.literal:
            return self.literal[expr]
        return expr

    def visit_call_(self, call):
        call = super().visit_call_(call)
        args = [self._inline(a) for a in call.args]
        if all(a.same_as(b) for a, b in zip(args, call.args)):
            return call
        return relax.Call(call.op, args, call.attrs, call.ty_args)

    def visit_tuple_getitem_(self, op):
        op = super().visit_tuple_getitem_(op)
        tup = self._inline(op.tuple_value)
        if isinstance(tup, relax.Tuple):
            return tup.fields[op.index]
        return op

    def visit_tuple_(self, op):
        op = super().visit_tuple_(op)
        fields = [self._inline(f) for f in op.fields]
        if all(a.same_as(b) for a, b in zip(fields, op.fields)):
            return op
        return relax.Tuple(fields)


def inline_tuple_vars(func: relax.Function) -> relax.Function:
    """``func`` whose uses of tuple-literal vars read the literal (the pass below, on one
    function; the tuple bindings stay until dead-code elimination)."""
    return _TupleInliner().visit_expr(func)


@tvm.transform.module_pass(opt_level=0, name="InlineTupleVars")
class InlineTupleVars:
    """Uses of a var bound to a tuple literal read the literal (see the module docstring)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        inliner = _TupleInliner(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                inliner.builder_.update_func(gv, inliner.visit_expr(func))
        return inliner.builder_.get()
