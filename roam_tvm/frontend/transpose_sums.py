"""The transpose of a sum of matrix products, computed as the sum of the transposed products.

The RNN importer transposes a weight once (``wt = permute_dims(W)``) and multiplies by
``wt`` at every time step, so Relax ``Gradient`` sums the steps' products into the gradient
of ``wt`` and then transposes that sum into ``W``'s gradient: a weight-sized copy, live
beside the sum, made only to swap two axes. Swapping the operands of each product gives the
transposed sum directly, ``(x^T y)^T = y^T x`` and ``(x y^T)^T = y x^T``, so
``TransposeProductSums`` rewrites ``permute_dims(p1 + p2 + ...)`` of such products (each
read once) into ``p1' + p2' + ...`` in the same association. The products are the tagged
kernels of :mod:`.nt_matmul`, so this runs after ``FuseNTMatmul`` and before
``AccumulateInPlace``; run ``DeadCodeElimination`` after it.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import tvm
from tvm import relax

from .accumulate import _use_counts
from .matmul_accumulate import matmul_operands
from .nt_matmul import MATMUL_LAYOUT_ATTR, _nt_matmul

#: How each product layout reads once transposed (operands swapped).
_TRANSPOSED = {"TN": "TN", "NT": "NT"}


def _is_2d_transpose(value) -> bool:
    if not (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
            and value.op.name == "relax.permute_dims"):
        return False
    ty = value.args[0].ty
    if not isinstance(ty, relax.TensorType) or ty.ndim != 2:
        return False
    axes = value.attrs.axes
    return axes is None or [int(a) for a in axes] == [1, 0]


@relax.expr_functor.mutator
class _Rewriter(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, counts: Dict[relax.Var, int]):
        super().__init__(mod)
        self.mod = mod
        self.counts = counts

    def _leaves(self, var) -> Optional[list]:
        """The sum tree under ``var`` as nested lists of product leaves, or None."""
        if not isinstance(var, relax.Var) or self.counts.get(var, 0) != 1:
            return None
        value = self.lookup_binding(var)
        if value is None:
            return None
        product = matmul_operands(value, self.mod)
        if product is not None:
            return product if product[0] in _TRANSPOSED else None
        if (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
                and value.op.name == "relax.add" and len(value.args) == 2
                and not value.args[0].same_as(value.args[1])  # x + x: read twice
                and value.args[0].ty.shape is not None):
            parts = [self._leaves(a) for a in value.args]
            if all(p is not None for p in parts) and all(
                    tuple(a.ty.shape.values) == tuple(var.ty.shape.values) for a in value.args):
                return parts
        return None

    def _emit(self, tree, shape: List[int], dtype: str):
        if isinstance(tree, tuple):
            layout, x, y = tree
            return self.builder_.call_te(
                _nt_matmul(shape, dtype, layout == "TN"), self.visit_expr(y), self.visit_expr(x),
                primfunc_name_hint=f"{layout}_matmul", primfunc_attrs={MATMUL_LAYOUT_ATTR: layout})
        a, b = (self._emit(t, shape, dtype) for t in tree)
        return self.builder_.emit(relax.op.add(a, b))

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        if _is_2d_transpose(call):
            tree = self._leaves(call.args[0])
            if tree is not None:
                ty = call.ty
                return self._emit(tree, [int(d) for d in ty.shape.values], str(ty.dtype))
        return super().visit_call_(call)


@tvm.transform.module_pass(opt_level=0, name="TransposeProductSums")
class TransposeProductSums:
    """``permute_dims(sum of NT/TN products)`` becomes the sum of the operand-swapped products.

    See the module docstring: no weight-sized transposed copy of a weight's gradient.
    """

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        out = mod
        for gv, func in mod.functions_items():
            if not isinstance(func, relax.Function):
                continue
            rewriter = _Rewriter(out, _use_counts(func))
            new = rewriter.visit_expr(func)
            out = rewriter.builder_.get()
            out[gv] = new
        return out
