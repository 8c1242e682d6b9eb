"""``permute_dims(permute_dims(w))`` that composes to the identity is ``w`` itself.

Relax ``Gradient`` writes the input gradient of ``matmul(x, wt)`` as
``matmul(dy, permute_dims(wt))``. When ``wt = permute_dims(W)`` is the transposed weight of
a linear layer whose weight is *trained*, TVM's pass folds the two transposes and reads
``W``. When the weight is *frozen* (``requires_grad=False``: a fine-tuned model's backbone,
a LoRA base layer) ``wt`` gets no adjoint, the fold does not happen, and the backward
multiplies by the transpose of ``wt``: ``FuseNTMatmul`` then keeps ``wt``, a transposed copy
of the frozen weight materialised for every linear layer the backward passes through, where
PyTorch's ``mm(dy, W)`` reads the weight in place. Replacing the outer transpose by ``W``
is exact (same values, shape and dtype); ``DeadCodeElimination`` later drops ``wt`` where
the forward's matmul no longer reads it.
"""
from __future__ import annotations

import tvm
from tvm import relax


def _axes(call) -> list[int]:
    """The permutation of a ``permute_dims`` call (``None`` axes: reverse all)."""
    nd = call.args[0].ty.ndim
    if call.attrs.axes is None:
        return list(range(nd - 1, -1, -1))
    return [int(a) for a in call.attrs.axes]


def _is_permute(expr) -> bool:
    return (isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op)
            and expr.op.name == "relax.permute_dims")


@relax.expr_functor.mutator
class _Canceller(relax.PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not _is_permute(call) or not isinstance(call.args[0], relax.Var):
            return call
        inner = self.lookup_binding(call.args[0])
        if not _is_permute(inner) or inner.args[0].ty.ndim < 0:
            return call
        outer_axes, inner_axes = _axes(call), _axes(inner)
        # out[i] = mid[outer[i]] = src[inner[outer[i]]]: identity when inner[outer[i]] == i
        if all(inner_axes[o] == i for i, o in enumerate(outer_axes)):
            return inner.args[0]
        return call


def cancel_double_transposes(func: relax.Function) -> relax.Function:
    """``func`` with every ``permute_dims(v)``, ``v = permute_dims(w)``, that composes to the
    identity replaced by ``w``.

    Parameters
    ----------
    func : relax.Function
        Typically the adjoint of a step with frozen parameters.

    Returns
    -------
    relax.Function
        The same computation; the inner transposes are left for ``DeadCodeElimination``.
    """
    return _Canceller().visit_expr(func)
