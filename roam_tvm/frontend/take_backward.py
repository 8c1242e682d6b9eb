"""``take_backward`` along a later axis as a loop program indexed per dimension.

TVM legalizes ``relax.grad.take_backward(g, x, idx, axis)`` into a loop program over
*flattened* addresses: each update's output coordinates are decoded from
``outer * K * inner + idx[l] * inner + col``, so the loaded index enters every coordinate.
With ``axis > 0`` the GPU loop binder (:mod:`roam_tvm.runtime.loop_schedule`) can then not
prove that two threads never write the same output element, and a CUDA build of any step
that reads ``out[:, -1]`` (an RNN classifier, last-token pooling, a per-expert column)
failed at real sizes with "no GPU schedule for take_backward" (at tiny sizes the loop ran
in one thread). This pass replaces such calls by::

    out[...] = 0
    for pre..., post..., l:                      # pre/post: the axes before/after `axis`
        out[pre, idx[l], post] += g[pre, l, post]

The leading loops index ``out`` directly, so each thread owns one ``(pre, post)`` column and
walks ``l`` serially: the same sums in the same order as TVM's kernel (bit-identical
results), race-free on a GPU. The input ``x`` is not an operand (only its shape is used),
so nothing keeps it alive. ``axis == 0`` (an embedding table's gradient) keeps TVM's
kernel, which the binder already proves.
"""
from __future__ import annotations

from typing import Dict, Tuple

import tvm
from tvm import relax

__all__ = ["TakeBackwardKernels", "take_backward_kernel"]

_OPAQUE = 8  # TVM's kOpaque op pattern: never fused with neighbours


def take_backward_kernel(x_shape: Tuple[int, ...], axis: int, n_idx: int, dtype: str,
                         idx_dtype: str) -> Tuple[str, tvm.tirx.PrimFunc]:
    """The loop program above for static shapes; returns ``(name, PrimFunc)``.

    Parameters
    ----------
    x_shape : tuple of int
        Shape of the gradient (the shape of ``take``'s input).
    axis : int
        The take axis, ``0 < axis < len(x_shape)``.
    n_idx : int
        Number of indices (``g`` has ``n_idx`` at ``axis``).
    dtype, idx_dtype : str
        Dtypes of the gradient and of the indices.
    """
    from tvm.script import tirx as T
    from tvm.script.parser import parse

    ndim = len(x_shape)
    if not 0 < axis < ndim:
        raise ValueError(f"take_backward_kernel: axis {axis} must be in (0, {ndim})")
    g_shape = tuple(x_shape[:axis]) + (n_idx,) + tuple(x_shape[axis + 1:])
    k = x_shape[axis]
    name = (f"take_backward_{dtype}_{'x'.join(map(str, g_shape))}_into_"
            f"{'x'.join(map(str, x_shape))}_axis{axis}")
    zi = [f"z{i}" for i in range(ndim)]
    cols = [f"c{i}" for i in range(ndim) if i != axis]
    col_extents = [x_shape[i] for i in range(ndim) if i != axis]
    pre, post = cols[:axis], cols[axis:]
    picked = f"T.if_then_else(idx[l] < 0, idx[l] + T.{idx_dtype}({k}), idx[l])"
    out_at = ", ".join(pre + [picked] + post)
    g_at = ", ".join(pre + ["l"] + post)
    src = "\n".join([
        "@T.prim_func(private=True, s_tir=True)",
        f"def {name}(g: T.Buffer({g_shape}, \"{dtype}\"), idx: T.Buffer(({n_idx},), \"{idx_dtype}\"), "
        f"out: T.Buffer({tuple(x_shape)}, \"{dtype}\")):",
        '    T.func_attr({"tirx.noalias": True})',
        '    with T.sblock("take_backward"):',
        "        T.reads()",
        "        T.writes()",
        '        T.attr({"pragma_scope": "seq"})',
        f"        for {', '.join(zi)} in T.grid({', '.join(map(str, x_shape))}):",
        f"            out[{', '.join(zi)}] = T.{dtype}(0)",
        f"        for {', '.join(cols + ['l'])} in T.grid({', '.join(map(str, col_extents + [n_idx]))}):",
        f"            out[{out_at}] = out[{out_at}] + g[{g_at}]",
    ]) + "\n"
    return name, parse(src, extra_vars={"T": T})


def _static(sinfo) -> Tuple[int, ...] | None:
    if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
        return None
    dims = getattr(sinfo.shape, "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return tuple(int(d) for d in dims)


@relax.expr_functor.mutator
class _TakeBackwardMutator(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule):
        super().__init__(mod)
        self.kernels: Dict[tuple, tvm.ir.GlobalVar] = {}
        self.op = tvm.ir.Op.get("relax.grad.take_backward")

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if not (isinstance(call, relax.Call) and call.op.same_as(self.op)):
            return call
        g, x, idx = call.args[0], call.args[1], call.args[2]
        x_shape, g_shape, i_shape = _static(x.ty), _static(g.ty), _static(idx.ty)
        if call.attrs.axis is None or x_shape is None or g_shape is None or i_shape is None \
                or len(i_shape) != 1:
            return call
        axis = int(call.attrs.axis) % len(x_shape)
        if axis == 0:
            return call
        dtype, idx_dtype = str(x.ty.dtype), str(idx.ty.dtype)
        key = (x_shape, axis, i_shape[0], dtype, idx_dtype)
        if key not in self.kernels:
            name, func = take_backward_kernel(x_shape, axis, i_shape[0], dtype, idx_dtype)
            self.kernels[key] = self.builder_.add_func(func.with_attr("op_pattern", _OPAQUE), name)
        return relax.call_tir(self.kernels[key], [g, idx],
                              relax.TensorType(list(x_shape), dtype))


@tvm.transform.module_pass(opt_level=0, name="TakeBackwardKernels")
class TakeBackwardKernels:
    """Rewrite ``take_backward`` with ``axis > 0`` into the per-dimension loop program above."""

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        op = tvm.ir.Op.get("relax.grad.take_backward")
        found = []
        for f in mod.functions.values():
            if isinstance(f, relax.Function):
                relax.analysis.post_order_visit(
                    f, lambda e: found.append(e) if isinstance(e, relax.Call) and e.op.same_as(op) else None)
        if not found:
            return mod
        out = mod
        for gv in [gv for gv, f in mod.functions.items() if isinstance(f, relax.Function)]:
            mutator = _TakeBackwardMutator(out)
            func = mutator.visit_expr(out[gv])
            out = mutator.builder_.get()
            out[gv] = func
        return out
