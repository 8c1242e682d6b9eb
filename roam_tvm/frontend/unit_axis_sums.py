"""Sums over size-1 axes and chains of reshapes become one reshape (a view), after autodiff.

``Gradient`` gives a broadcasting op's operand ``collapse_sum_to(g, operand_shape)``. When the
operand differs from ``g`` only by size-1 axes (an RNN cell's ``(B, G)`` step projection added
to a ``(1, B, G)`` gate sum), the sum adds nothing up: it is a reshape. Relax keeps
``collapse_sum_to`` as a computation, so after ``FuseOps`` it is a kernel that *copies* ``g``,
and the copy is what the weight gradient reads, kept until that gradient runs; a reshape of a
reshape of it becomes a second copy kernel. PyTorch's autograd passes the same gradient on as a
view. ``sums_over_unit_axes_as_reshapes`` replaces each such ``collapse_sum_to`` by
``reshape`` and each ``reshape(reshape(x, s1), s2)`` by ``reshape(x, s2)``: same elements in
the same order, exact.

TVM's ``rewrite_call`` would do this, but once it rewrites anything it also merges every pair
of structurally equal bindings (a common-subexpression pass): the norms' gradients spell
``gamma * dy`` and ``x - mean`` once per use on purpose, so that ``FuseOps`` fuses each copy
into its one consumer instead of keeping a full-size tensor (``norm_grad.py``). A plain mutator
changes the matched calls and nothing else.
"""

from __future__ import annotations

from math import prod

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from .relax_shapes import shape_tuple


def _sums_nothing(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """``collapse_sum_to`` from ``src`` to ``dst`` sums only over size-1 axes."""
    return prod(src) == prod(dst) and [d for d in src if d != 1] == [d for d in dst if d != 1]


def _op(expr) -> str | None:
    if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
        return expr.op.name
    return None


@mutator
class _UnitSumsAsReshapes(PyExprMutator):
    """Rewrites the two patterns of the module docstring; every other binding is kept as is."""

    def __init__(self):
        super().__init__()
        self.reshape_of: dict = {}  # var bound to reshape(x, s) -> x

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:  # noqa: N802 (TVM's names)
        value = self.visit_expr(binding.value)
        name = _op(value)
        if name == "relax.collapse_sum_to":
            src, dst = shape_tuple(value.args[0]), shape_tuple(binding.var)
            if src is not None and dst is not None and _sums_nothing(src, dst):
                value = self.builder_.normalize(relax.op.reshape(value.args[0], dst))
                name = "relax.reshape"
        if name == "relax.reshape":
            inner = self.reshape_of.get(value.args[0])
            dst = shape_tuple(binding.var)
            if inner is not None and dst is not None:
                value = self.builder_.normalize(relax.op.reshape(inner, dst))
            self.reshape_of[binding.var] = value.args[0]
        self.builder_.emit_normalized(relax.VarBinding(binding.var, value))


def sums_over_unit_axes_as_reshapes(func: relax.Function) -> relax.Function:
    """``func`` with no-op ``collapse_sum_to`` calls and reshape chains as single reshapes."""
    return _UnitSumsAsReshapes().visit_expr(func)
