"""A weight gradient summed over batch dimensions, computed as one 2-D product.

``x @ W`` with a 3-D ``x`` (an RNN's input projection over all time steps, ``(T, B, F)``)
has the weight gradient ``collapse_sum_to(permute_dims(x) @ g, W.shape)`` in Relax
``Gradient``: a batched product with one weight-sized matrix per leading index (``T`` copies
of the weight), then summed. Merging the leading dimensions into the summed one gives the
same sum as a single 2-D product, ``reshape(x, (-1, F))^T @ reshape(g, (-1, N))``, with no
batched temporary; the reshapes of these contiguous tensors are views.

``MergeBatchedWeightGrads`` rewrites ``collapse_sum_to(matmul(permute_dims(x), g), (M, N))``
when ``x`` is ``(..., K, M)`` and ``g`` is ``(..., K, N)`` with the same static leading
dimensions, the transpose swaps the last two axes, and every leading dimension is summed;
also through ``astype`` casts between the product and the sum (AMP rounds the batched product to
bf16 and back: a ``T``-fold float32 temporary), which are then applied to the one 2-D product.
The sum is associated differently (within float rounding). It runs before ``FuseNTMatmul``,
which turns the 2-D product into one TN kernel; run ``DeadCodeElimination`` after it.
"""
from __future__ import annotations

import tvm
from tvm import relax

from .relax_shapes import shape_tuple


def _op(value, name: str) -> bool:
    return isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == name


@relax.expr_functor.mutator
class _Merger(relax.PyExprMutator):
    def _swapped_source(self, var):
        """``x`` when ``var = permute_dims(x)`` swaps the last two of at least three axes."""
        if not isinstance(var, relax.Var):
            return None
        value = self.lookup_binding(var)
        if not _op(value, "relax.permute_dims"):
            return None
        x = value.args[0]
        nd = x.ty.ndim if isinstance(x.ty, relax.TensorType) else -1
        if nd < 3:
            return None
        axes = list(range(nd))
        axes[-1], axes[-2] = axes[-2], axes[-1]
        if value.attrs.axes is None or [int(a) for a in value.attrs.axes] != axes:
            return None
        return x

    def _through_casts(self, var) -> tuple[object, list]:
        """The value under a chain of ``astype`` bindings from ``var``, and the chain's dtypes (outermost
        last): under AMP the batched product is rounded to bf16 and back before the sum."""
        casts = []
        value = self.lookup_binding(var)
        while _op(value, "relax.astype") and isinstance(value.args[0], relax.Var):
            casts.append(str(value.attrs.dtype))
            value = self.lookup_binding(value.args[0])
        return value, casts[::-1]

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        if not _op(call, "relax.collapse_sum_to") or not isinstance(call.args[0], relax.Var):
            return super().visit_call_(call)
        product, casts = self._through_casts(call.args[0])
        target = shape_tuple(call)
        if not _op(product, "relax.matmul") or target is None or len(target) != 2:
            return super().visit_call_(call)
        x = self._swapped_source(product.args[0])
        g = product.args[1]
        xs, gs = (shape_tuple(x) if x is not None else None), shape_tuple(g)
        if xs is None or gs is None or len(xs) != len(gs) or xs[:-1] != gs[:-1]:
            return super().visit_call_(call)
        if (xs[-1], gs[-1]) != target or str(x.ty.dtype) != str(g.ty.dtype):
            return super().visit_call_(call)
        rows = 1
        for d in xs[:-1]:
            rows *= d
        x2 = self.builder_.emit(relax.op.reshape(self.visit_expr(x), (rows, xs[-1])))
        g2 = self.builder_.emit(relax.op.reshape(self.visit_expr(g), (rows, gs[-1])))
        xt = self.builder_.emit(relax.op.permute_dims(x2))
        out = relax.op.matmul(xt, g2, out_dtype=product.attrs.out_dtype)
        for dtype in casts:  # the same roundings, once on the sum (as PyTorch's one product rounds)
            out = relax.op.astype(self.builder_.emit(out), dtype)
        return out


@tvm.transform.module_pass(opt_level=0, name="MergeBatchedWeightGrads")
class MergeBatchedWeightGrads:
    """``collapse_sum_to(x^T @ g)`` over leading dims becomes one 2-D product (module docstring)."""

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        merger = _Merger(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                merger.builder_.update_func(gv, merger.visit_expr(func))
        return merger.builder_.get()
