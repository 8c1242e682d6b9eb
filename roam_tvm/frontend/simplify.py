"""Drop ``broadcast_to`` calls that broadcast nothing, before autodiff, and reshapes that
reshape nothing, after it.

``torch.export`` spells a batched ``torch.matmul`` as ``expand`` + ``view`` +
``bmm``; the importer turns ``expand`` into ``R.broadcast_to`` even when the
target shape is the input's own shape (attention's ``probs @ v``:
``broadcast_to(softmax(s), (1, H, T, T))``). Unlike ``reshape``, Relax treats
``broadcast_to`` as a computation, so after ``FuseOps`` it becomes a kernel
that *copies* the tensor, and ``Gradient`` keeps that copy for the matmul's
backward beside the softmax output it copies (kept for the softmax's own
backward): two ``H x T x T`` tensors per attention layer where PyTorch keeps
one (its ``expand`` and ``view`` are views). Replacing the no-op call by its
input is exact: same values, same shape, same dtype.

The same expansion of a *weight* (an RNN's input projection over all time steps:
``matmul(x, broadcast_to(W^T, (T, K, N)))``) makes ``T`` copies of it, kept until the
backward. ``drop_matmul_weight_broadcasts`` multiplies by the 2-D weight itself, which Relax's
``matmul`` broadcasts over the batch dims without a copy; same values and shape.
"""
from __future__ import annotations

import math

import tvm
from tvm import relax
from tvm.relax.dpl import is_op, rewrite_call, wildcard

from .relax_shapes import shape_tuple


def drop_noop_broadcasts(func: relax.Function) -> relax.Function:
    """``func`` with every ``R.broadcast_to(x, shape)`` whose ``shape`` is ``x``'s own replaced by ``x``."""
    x = wildcard()
    pattern = is_op("relax.broadcast_to")(x, wildcard())

    def rewrite(expr, matches):
        src = matches[x]
        same = shape_tuple(src) is not None and shape_tuple(src) == shape_tuple(expr)
        return src if same and src.ty.dtype == expr.ty.dtype else expr

    return rewrite_call(pattern, rewrite, func)


def drop_matmul_weight_broadcasts(func: relax.Function) -> relax.Function:
    """``matmul(a, broadcast_to(w, (*batch, K, N)))`` with a 2-D ``w`` of shape ``(K, N)`` and
    ``a`` of batch dims ``batch`` becomes ``matmul(a, w)`` (same result, no broadcast copy).

    Also through a reshape that flattens the batch dims, ``matmul(a, reshape(broadcast_to(w,
    (*batch, K, N)), (P, K, N)))`` with ``a`` of shape ``(P, T, K)``: torch's ``matmul`` of a
    non-contiguous N-D activation by a weight (ProphetNet's ``lm_head`` on a 4-D view of a slice) runs
    ``bmm`` on the weight expanded to every batch index, a stride-0 view in eager and ``P`` copies here.
    """
    a, w = wildcard(), wildcard()
    bcast = is_op("relax.broadcast_to")(w, wildcard())
    flat = is_op("relax.reshape")(bcast, wildcard())
    pattern = is_op("relax.matmul")(a, bcast) | is_op("relax.matmul")(a, flat)

    def rewrite(expr, matches):
        a_shape, w_shape = shape_tuple(matches[a]), shape_tuple(matches[w])
        b_shape = shape_tuple(matches[bcast])
        if None in (a_shape, w_shape, b_shape) or len(w_shape) != 2 or len(a_shape) < 3:
            return expr
        if b_shape[-2:] != w_shape or matches[w].ty.dtype != matches[bcast].ty.dtype:
            return expr
        if flat in matches:  # the batch dims flattened into one, as a's
            if shape_tuple(matches[flat]) != (math.prod(b_shape[:-2]), *w_shape) or len(a_shape) != 3 \
                    or a_shape[0] != math.prod(b_shape[:-2]):
                return expr
        elif a_shape[:-2] != b_shape[:-2]:
            return expr
        return relax.op.matmul(matches[a], matches[w], out_dtype=expr.attrs.out_dtype)

    return rewrite_call(pattern, rewrite, func)


def _noop_reshape_of(value, kernel_outputs: set):
    """The reshaped kernel output when ``value`` reshapes it onto its own static shape, else None."""
    if not (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
            and value.op.name == "relax.reshape" and value.args[0] in kernel_outputs):
        return None
    src = value.args[0]
    same = shape_tuple(src) is not None and shape_tuple(src) == shape_tuple(value)
    return src if same and src.ty.dtype == value.ty.dtype else None


@relax.expr_functor.mutator
class _DropNoopReshapes(relax.PyExprMutator):
    def __init__(self, kernel_outputs: set):
        super().__init__()
        self.kernel_outputs = kernel_outputs

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        src = _noop_reshape_of(binding.value, self.kernel_outputs)
        # a dataflow var may stand for the reshape's result only inside the dataflow block
        if src is None or (isinstance(src, relax.DataflowVar)
                           and not isinstance(binding.var, relax.DataflowVar)):
            super().visit_var_binding_(binding)
            return
        self.set_var_remap(binding.var, self.visit_expr(src))


def drop_noop_reshapes(func: relax.Function) -> relax.Function:
    """``func`` with every ``R.reshape(x, shape)`` whose ``shape`` is ``x``'s own (static) replaced
    by ``x``, where ``x`` is the result of a ``call_tir`` (a kernel's fresh output)."""
    kernel_outputs = set()
    for block in func.body.blocks:
        for b in block.bindings:
            v = getattr(b, "value", None)
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_tir":
                kernel_outputs.add(b.var)
    if not any(_noop_reshape_of(getattr(b, "value", None), kernel_outputs) is not None
               for block in func.body.blocks for b in block.bindings):
        return func
    return _DropNoopReshapes(kernel_outputs).visit_expr(func)
