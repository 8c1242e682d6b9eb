"""``matmul(x, permute_dims(w))`` into one NT-matmul kernel, operands kept in their places;
``matmul(permute_dims(g), x)`` (every linear layer's weight gradient) into one TN kernel.

TVM 0.27's ``FuseTransposeMatmul`` outlines each match with ``FuseOpsByPattern`` and then
assumes the outlined function takes ``(w, x)``. That holds when the transpose feeds one
matmul; when one transposed weight feeds several (the RNN importer transposes ``W_hh`` once
for every time step) the order comes out as ``(x, w)`` and the pass builds
``matmul(w, x^T)``, which fails shape inference. This pass reads the operands from the
matmul binding itself, so there is nothing to mix up: the result is the same kernel
(``out[..., m, n] = sum_k x[..., m, k] * w[..., n, k]``) without the transposed copy.

Relax ``Gradient`` writes a weight gradient as ``matmul(permute_dims(g), x)``: the transposed
copy of the output gradient is a kernel of its own, live beside ``g`` until the matmul runs
(PyTorch's ``mm`` reads ``g.t()`` as a view). The TN kernel
(``out[..., m, n] = sum_k g[..., k, m] * x[..., k, n]``) reads ``g`` in place.
"""

from __future__ import annotations

import tvm
from tvm import relax, te

#: PrimFunc attribute naming the operand layout of the kernels made here ("NT" or "TN"), so
#: that later passes (:mod:`.accumulate`) can recognise them without reading their TIR.
MATMUL_LAYOUT_ATTR = "roam.matmul_layout"


def _swaps_last_two(call) -> bool:
    nd = call.args[0].ty.ndim
    if nd < 2:
        return False
    if call.attrs.axes is None:
        return nd == 2
    axes = list(range(nd))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return [int(a) for a in call.attrs.axes] == axes


def _is_op(expr, name) -> bool:
    return isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == name


def _nt_matmul(out_shape, out_dtype, left_transposed: bool = False):
    """``a @ w^T`` (NT), or ``a^T @ w`` (TN) with ``left_transposed``."""
    def compute(a: te.Tensor, w: te.Tensor) -> te.Tensor:
        k = te.reduce_axis((0, a.shape[-2] if left_transposed else a.shape[-1]), name="k")
        nb = len(out_shape) - 2

        def batch_index(t, idx):
            tb = len(t.shape) - 2
            out = []
            for j in range(tb):  # right-aligned against the output's batch dims
                d = t.shape[j]
                i = idx[nb - tb + j]
                out.append(0 if isinstance(d, tvm.tirx.IntImm) and int(d) == 1 else i)
            return out

        def body(*idx):
            m, n = idx[-2], idx[-1]
            if left_transposed:
                x = a(*(batch_index(a, idx) + [k, m]))
                y = w(*(batch_index(w, idx) + [k, n]))
            else:
                x = a(*(batch_index(a, idx) + [m, k]))
                y = w(*(batch_index(w, idx) + [n, k]))
            if str(a.dtype) != out_dtype or str(w.dtype) != out_dtype:
                x, y = x.astype(out_dtype), y.astype(out_dtype)
            return te.sum(x * y, axis=k)

        return te.compute(out_shape, body, name="TN_matmul" if left_transposed else "NT_matmul")

    return compute


@relax.expr_functor.mutator
class _Fuser(relax.PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not _is_op(call, "relax.matmul") or len(call.args) != 2:
            return call
        x, wt = call.args
        if x.ty.ndim < 2 or wt.ty.ndim < 2:
            return call
        out_ty = self.builder_.normalize(call).ty
        shape = list(out_ty.shape.values)
        src = self._transposed(wt)
        if src is not None:
            return self.builder_.call_te(_nt_matmul(shape, str(out_ty.dtype)), x, src,
                                         primfunc_name_hint="NT_matmul",
                                         primfunc_attrs={MATMUL_LAYOUT_ATTR: "NT"})
        src = self._transposed(x)
        if src is not None:
            return self.builder_.call_te(_nt_matmul(shape, str(out_ty.dtype), True), src, wt,
                                         primfunc_name_hint="TN_matmul",
                                         primfunc_attrs={MATMUL_LAYOUT_ATTR: "TN"})
        return call

    def _transposed(self, var):
        """What ``var`` is the last-two-axes transpose of, or None."""
        if not isinstance(var, relax.Var):
            return None
        src = self.lookup_binding(var)
        if src is None or not _is_op(src, "relax.permute_dims") or not _swaps_last_two(src):
            return None
        return src.args[0]


@tvm.transform.module_pass(opt_level=0, name="FuseNTMatmul")
class FuseNTMatmul:
    """Every ``matmul(x, permute_dims(w))`` (last two axes swapped) becomes one TIR kernel
    reading ``x`` and ``w``, and every ``matmul(permute_dims(g), x)`` one reading ``g`` and
    ``x``; run ``DeadCodeElimination`` after it to drop unused
    transposes."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        fuser = _Fuser(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                fuser.builder_.update_func(gv, fuser.visit_expr(func))
        return fuser.builder_.get()
