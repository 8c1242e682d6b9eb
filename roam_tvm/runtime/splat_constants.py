"""Fill uniform tensors at run time instead of storing them as constants.

``FoldConstant`` (run after ``LegalizeOps``) evaluates every ``call_tir`` whose inputs are
all constant, and a legalized ``zeros`` / ``full_like`` / ``broadcast_to(scalar)`` has no
tensor input at all. Each one becomes a constant, which the built module holds on the
device for as long as it is loaded: a ``zeros_like(x)`` in a model, or the zeros a
scatter-shaped gradient starts from, then costs its size for the whole training step,
where PyTorch allocates it, uses it and frees it.

``SplatConstants`` turns every constant whose elements are all equal (and which has at
least ``min_elements`` of them) back into ``R.full`` (``broadcast_to`` of the scalar for an
infinite fill, a causal mask's ``-inf``), legalized on the spot. The fill is
then an ordinary intermediate with a lifetime (and ``FuseOps`` may fuse it into its
reader, so it is never stored). Other constants (weights, ``arange`` tables) are left
alone. (``arange`` tables filled by a kernel of their own made FuseTIR fail on the tiny
LLaMA step, ``func_info_.global_name != "fused"``; they are small: one row of indices.)
"""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator


def splat_value(const: tvm.ir.Constant, min_elements: int = 2):
    """The common value of a uniform constant tensor with at least ``min_elements``
    elements, or None."""
    data = const.value.numpy()  # TVM 0.27: a constant's tensor is .value
    if data.size < max(min_elements, 2) or data.dtype == object:
        return None
    flat = data.reshape(-1)
    first = flat[0]
    if not np.all(flat == first) or (np.issubdtype(flat.dtype, np.floating) and np.isnan(first)):
        return None
    return first


@mutator
class _Splatter(PyExprMutator):
    def __init__(self, mod: tvm.IRModule, min_elements: int):
        super().__init__(mod)
        self.min_elements = min_elements
        self.changed = 0

    def visit_tuple_getitem_(self, op: relax.TupleGetItem) -> relax.Expr:
        # ``(c0, c1)[1]`` (FoldConstant's folded index pair, a top-1 router's all-zero slot index):
        # the item alone, else the other member's fill stays in the tuple, dead, and FuseOps
        # fuses it into a function that returns its parameter (FuseTIR: global_name != "fused")
        if isinstance(op.tuple_value, relax.Tuple):
            return self.visit_expr(op.tuple_value.fields[op.index])
        return super().visit_tuple_getitem_(op)

    def visit_generic_const_(self, op: tvm.ir.Constant) -> relax.Expr:
        value = splat_value(op, self.min_elements)
        if value is None:
            return op
        self.changed += 1
        dtype = str(op.value.dtype)
        fill = relax.const(value.item(), dtype)
        shape = relax.ShapeExpr(list(op.value.shape))
        if np.issubdtype(type(value), np.floating) and not np.isfinite(value):
            # TVM 0.27's topi.full fails on an infinite fill ("argument of type 'PrimType' is
            # not iterable"); broadcasting the scalar is the same tensor
            return relax.op.broadcast_to(fill, shape)
        return relax.op.full(shape, fill, dtype)


@tvm.transform.module_pass(opt_level=0, name="SplatConstants")
class SplatConstants:
    """Replace uniform constant tensors by ``R.full`` (legalized), see the module docstring.

    Parameters
    ----------
    min_elements : int
        Smaller constants stay constants (a handful of bytes each).
    """

    def __init__(self, min_elements: int = 2):
        self.min_elements = int(min_elements)

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        out = mod
        changed = False
        for gv, func in mod.functions_items():
            if not isinstance(func, relax.Function):
                continue
            splatter = _Splatter(out, self.min_elements)
            new = splatter.visit_expr(func)
            if splatter.changed:
                out = splatter.builder_.get()
                out[gv] = new
                changed = True
        if not changed:
            return mod
        return tvm.transform.Sequential([relax.transform.LegalizeOps(),
                                         relax.transform.AnnotateTIROpPattern()])(out)
