"""Drop ``broadcast_to`` calls that broadcast nothing, before autodiff.

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
"""
from __future__ import annotations

from tvm import relax
from tvm.relax.dpl import is_op, rewrite_call, wildcard


def _static_shape(expr) -> tuple[int, ...] | None:
    ty = getattr(expr, "ty", None)
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None:
        return None
    try:
        return tuple(int(v) for v in values)
    except TypeError:  # a symbolic dimension: leave the call alone
        return None


def drop_noop_broadcasts(func: relax.Function) -> relax.Function:
    """``func`` with every ``R.broadcast_to(x, shape)`` whose ``shape`` is ``x``'s own replaced by ``x``."""
    x = wildcard()
    pattern = is_op("relax.broadcast_to")(x, wildcard())

    def rewrite(expr, matches):
        src = matches[x]
        same = _static_shape(src) is not None and _static_shape(src) == _static_shape(expr)
        return src if same and src.ty.dtype == expr.ty.dtype else expr

    return rewrite_call(pattern, rewrite, func)
