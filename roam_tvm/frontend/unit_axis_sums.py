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
"""
from __future__ import annotations

from math import prod

from tvm import relax
from tvm.relax.dpl import is_op, rewrite_call, wildcard

from .relax_shapes import shape_tuple


def _sums_nothing(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """``collapse_sum_to`` from ``src`` to ``dst`` sums only over size-1 axes."""
    return prod(src) == prod(dst) and [d for d in src if d != 1] == [d for d in dst if d != 1]


def sums_over_unit_axes_as_reshapes(func: relax.Function) -> relax.Function:
    """``func`` with no-op ``collapse_sum_to`` calls and reshape chains as single reshapes."""
    x, shape = wildcard(), wildcard()
    collapse = is_op("relax.collapse_sum_to")(x, shape)

    def to_reshape(expr, matches):
        src, dst = shape_tuple(matches[x]), shape_tuple(expr)
        if src is None or dst is None or not _sums_nothing(src, dst):
            return expr
        return relax.op.reshape(matches[x], dst)

    func = rewrite_call(collapse, to_reshape, func)
    inner = is_op("relax.reshape")(x, wildcard())
    chain = is_op("relax.reshape")(inner, shape)

    def one_reshape(expr, matches):
        dst = shape_tuple(expr)
        return expr if dst is None else relax.op.reshape(matches[x], dst)

    return rewrite_call(chain, one_reshape, func)
