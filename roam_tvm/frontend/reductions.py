"""Precise float reductions: a multi-axis ``sum``/``mean`` as a chain of one-axis ones."""

from __future__ import annotations

from tvm import relax

from .relax_walk import op_name


def _split_axes(x: relax.Expr, axes) -> list[int]:
    nd = x.ty.ndim
    return sorted({int(a) % nd for a in axes}, reverse=True)


def blocked_reduction(bb: relax.BlockBuilder, value: relax.Expr,
                      var: relax.Var) -> relax.Expr | None:
    """Rewrite a float multi-axis ``sum``/``mean``/``collapse_sum_to`` as a chain of one-axis
    reductions (``keepdims=True``), then a reshape to the original output shape.

    TVM's llvm legalization accumulates a reduction sequentially in the output dtype: summing
    n fp32 terms has an error ~ n * eps. BatchNorm backward sums over N*H*W (50k terms for a
    ResNet-18 stem at 224x224), which made fp32 gradients ~1e-3..1e-2 off (docs/tvm-notes'
    "ResNet-18 gap"). Reducing one axis at a time bounds the error by (sum of extents) * eps
    at the cost of small intermediates (|x| / extent of the first axis reduced). Returns the
    replacement expression, or None to keep the binding.
    """
    name = op_name(value)
    if name not in ("relax.sum", "relax.mean", "relax.collapse_sum_to"):
        return None
    x = value.args[0]
    ty = x.ty
    if not isinstance(ty, relax.TensorType) or not str(ty.dtype).startswith(("float", "bfloat")):
        return None
    if ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    try:
        shape = [int(s) for s in ty.shape.values]
    except TypeError:
        return None
    if name == "relax.collapse_sum_to":
        tgt = [int(s) for s in var.ty.shape.values]
        lead = len(shape) - len(tgt)
        axes = list(range(lead)) + [lead + i for i, t in enumerate(tgt)
                                    if t == 1 and shape[lead + i] != 1]
        op = "sum"
    else:
        if value.attrs.axis is None:
            axes = list(range(len(shape)))
        else:
            axes = [int(a) for a in value.attrs.axis]
        op = "sum" if name == "relax.sum" else "mean"
    axes = [a for a in _split_axes(x, axes) if shape[a] != 1]
    if len(axes) < 2:
        return None
    y = x
    for a in axes:
        f = relax.op.sum if op == "sum" else relax.op.mean
        y = bb.emit(f(y, axis=[a], keepdims=True))
    out_shape = [int(s) for s in var.ty.shape.values]
    return relax.op.reshape(y, out_shape)
