"""Matrix products added into a gradient accumulator in place: ``acc += x @ y``.

A weight used at many time steps (an RNN's ``W_hh``) gets one weight-sized product per
step, each added into the weight's gradient sum (:mod:`.accumulate`). Computing the product
into a tensor of its own and then adding it keeps two weight-sized tensors live at every
step; a kernel that adds each product term straight into the accumulator keeps one, as
cuBLAS's ``beta=1`` GEMM does for PyTorch's fused RNN kernels.

:func:`matmul_operands` recognises a product of two matrices: a ``relax.matmul`` of two
2-D tensors (``NN``), or a kernel that :mod:`.nt_matmul` made and tagged with its layout
(``NT``: ``x @ y^T``; ``TN``: ``x^T @ y``). :func:`matmul_accumulate_kernel` writes the
in-place kernel. The products are added into the accumulator term by term, so the sum is
associated differently from ``acc + (x @ y)`` (within float rounding of it, as PyTorch's
own fused kernels are).
"""
from __future__ import annotations

from typing import Optional, Tuple

import tvm
from tvm import relax

from .nt_matmul import MATMUL_LAYOUT_ATTR

#: Element of output (i, j), for summation index k, per operand layout.
_TERMS = {"NN": ("x[vi, vk]", "y[vk, vj]"), "NT": ("x[vi, vk]", "y[vj, vk]"),
          "TN": ("x[vk, vi]", "y[vk, vj]")}


def _static_2d(expr) -> Optional[Tuple[Tuple[int, int], str]]:
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, relax.TensorType) or ty.ndim != 2 or ty.shape is None:
        return None
    dims = getattr(ty.shape, "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return (int(dims[0]), int(dims[1])), str(ty.dtype)


def matmul_operands(value, mod: tvm.IRModule) -> Optional[Tuple[str, relax.Expr, relax.Expr]]:
    """``(layout, x, y)`` when ``value`` is a product of two static 2-D matrices, else None."""
    if not isinstance(value, relax.Call) or len(value.args) < 2:
        return None
    if isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.matmul" and len(value.args) == 2:
        layout, (x, y) = "NN", value.args
        if getattr(value.attrs, "out_dtype", None) not in (None, "", "void"):
            return None  # a cast inside the product: left as it is
    elif isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
        callee, args = value.args[0], value.args[1]
        if not isinstance(callee, tvm.ir.GlobalVar) or callee not in mod.functions:
            return None
        attrs = mod[callee].attrs
        layout = str(attrs[MATMUL_LAYOUT_ATTR]) if attrs is not None and MATMUL_LAYOUT_ATTR in attrs else None
        if layout not in ("NT", "TN") or not isinstance(args, relax.Tuple) or len(args.fields) != 2:
            return None
        x, y = args.fields
    else:
        return None
    if _static_2d(x) is None or _static_2d(y) is None or _static_2d(value) is None:
        return None
    return layout, x, y


def matmul_accumulate_kernel(layout: str, x_ty: Tuple[Tuple[int, int], str],
                             y_ty: Tuple[Tuple[int, int], str],
                             acc_ty: Tuple[Tuple[int, int], str]) -> Tuple[str, tvm.tirx.PrimFunc]:
    """TIR of ``acc[i, j] += sum_k x' [i, k] * y'[k, j]`` in place (``'``: per ``layout``)."""
    from tvm.script import tirx as T
    from tvm.script.parser import parse

    (xs, xdt), (ys, ydt), (acc_shape, dt) = x_ty, y_ty, acc_ty
    m, n = acc_shape
    k = xs[0] if layout == "TN" else xs[1]
    xterm, yterm = _TERMS[layout]
    if xdt != dt:
        xterm = f"T.Cast(\"{dt}\", {xterm})"
    if ydt != dt:
        yterm = f"T.Cast(\"{dt}\", {yterm})"
    name = f"{layout}_matmul_accumulate_{dt}_{m}x{n}_k{k}"
    src = "\n".join([
        "@T.prim_func(private=True, s_tir=True)",
        f"def {name}(x: T.Buffer({tuple(xs)}, \"{xdt}\"), y: T.Buffer({tuple(ys)}, \"{ydt}\"), "
        f"acc: T.Buffer({tuple(acc_shape)}, \"{dt}\")):",
        '    T.func_attr({"tirx.noalias": True})',
        f"    for i, j, k in T.grid({m}, {n}, {k}):",
        f"        with T.sblock(\"{name}\"):",
        "            vi, vj, vk = T.axis.remap(\"SSR\", [i, j, k])",
        f"            acc[vi, vj] = acc[vi, vj] + {xterm} * {yterm}",
    ]) + "\n"
    return name, parse(src, extra_vars={"T": T})
