"""Drop zero-size operands of ``concat`` before autodiff.

Partial rotary embeddings (Phi-3, GPT-NeoX, StableLM, Phi) split each head as
``x[..., :rot]`` and ``x[..., rot:]`` and concatenate them back; with ``rot`` equal to the
head size (Phi-3's default) the second part is an empty tensor. ``Gradient`` then builds a
``split`` adjoint with an empty field and pads zero-size adjoints back, and legalization
fails on a broadcast of ``8`` with ``0``. An empty operand adds nothing to a ``concat``, so
dropping it is exact; ``DeadCodeElimination`` then removes the empty slice.
"""
from __future__ import annotations

import tvm
from tvm import relax



def _is_empty(expr) -> bool:
    """A tensor with a static zero-length dimension (symbolic dims are never empty here)."""
    values = getattr(getattr(getattr(expr, "ty", None), "shape", None), "values", None)
    if values is None:
        return False
    return any(getattr(v, "value", None) == 0 for v in values)  # IntImm zeros only


@relax.expr_functor.mutator
class _EmptyConcatDropper(relax.PyExprMutator):
    def __init__(self, mod=None):
        super().__init__(mod)
        self.literal: dict = {}

    def visit_var_binding_(self, binding):
        value = self.visit_expr(binding.value)
        if isinstance(value, relax.Tuple):
            self.literal[binding.var] = value
        self.builder_.emit_normalized(relax.VarBinding(binding.var, value))

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name != "relax.concat":
            return call
        tup = self.literal.get(call.args[0], call.args[0])
        if not isinstance(tup, relax.Tuple):
            return call
        kept = [f for f in tup.fields if not _is_empty(f)]
        if len(kept) == len(tup.fields) or not kept:
            return call
        if len(kept) == 1:
            return kept[0]
        return relax.Call(call.op, [relax.Tuple(kept)], call.attrs, call.ty_args)


def drop_empty_concat_operands(func: relax.Function) -> relax.Function:
    """``func`` with every zero-size operand of a ``concat`` removed (a ``concat`` left
    with one operand becomes that operand)."""
    return _EmptyConcatDropper().visit_expr(func)
