"""Fold the spelled-out RMSNorm back into one ``relax.nn.rms_norm`` op before autodiff.

LLaMA, Qwen2 and Mistral write RMSNorm as
``w * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps))`` and ``torch.export`` keeps the
six ops. Relax ``Gradient`` then keeps, besides ``x`` and the small ``rsqrt`` vector, the
normalised ``x * rsqrt(...)`` for the weight multiply's gradient: one more activation-sized
tensor per norm, as PyTorch's autograd keeps for the same code. As one op, the norm's
gradient (:func:`.norm_grad.rms_norm_grad`) reads only ``x`` and ``w`` and recomputes the
rest, as this project's ``layer_norm`` gradient does. Same function; the fused op rounds
once, so results agree with PyTorch to float32 rounding.

Only float32 norms are folded: TVM's ``rms_norm`` kernel computes in float32 whatever its
dtype (a float64 norm would lose precision), and a bf16/fp16 model's explicit upcast to
float32 puts casts in the middle of the pattern, which is then left as it is.
"""
from __future__ import annotations

from tvm import relax
from tvm.relax.dpl import is_const, is_op, rewrite_call, wildcard

from .relax_shapes import scalar_value, static_shape


def _mul(a, b):
    return is_op("relax.multiply")(a, b) | is_op("relax.multiply")(b, a)


def _trailing_axes(mean_call: relax.Call, ndim: int) -> list[int] | None:
    """The mean's axes if they are the last ones of ``x`` and it keeps its dims, else None."""
    attrs = mean_call.attrs
    if attrs.axis is None or not bool(attrs.keepdims):
        return None
    axes = sorted(int(a) % ndim for a in attrs.axis)
    return axes if axes == list(range(ndim - len(axes), ndim)) else None


def fuse_rms_norm(func: relax.Function) -> relax.Function:
    """``func`` with every spelled-out RMSNorm replaced by ``R.nn.rms_norm`` (others untouched)."""
    x, w, two, eps = wildcard(), wildcard(), is_const(), is_const()
    square = is_op("relax.power")(x, two) | is_op("relax.multiply")(x, x)
    mean = is_op("relax.mean")(square)
    rstd = is_op("relax.rsqrt")(is_op("relax.add")(mean, eps) | is_op("relax.add")(eps, mean))
    out = _mul(w, _mul(x, rstd))

    def rewrite(expr, matches):
        src, weight = matches[x], matches[w]
        if (two in matches and scalar_value(matches[two]) != 2.0) or scalar_value(matches[eps]) is None:
            return expr
        shape, w_shape = static_shape(src), static_shape(weight)
        axes = _trailing_axes(matches[mean], len(shape))
        same_dtype = src.ty.dtype == weight.ty.dtype == expr.ty.dtype == "float32"
        if axes is None or not same_dtype or w_shape != [shape[a] for a in axes] or \
                static_shape(expr) != shape:
            return expr
        return relax.op.nn.rms_norm(src, weight, axes=axes, epsilon=scalar_value(matches[eps]))

    return rewrite_call(out, rewrite, func)
