"""Shape helpers the gradient and converter modules share."""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R


def static_shape(expr: relax.Expr) -> list[int]:
    """The static shape of a tensor expression whose type is already known."""
    return [int(s) for s in expr.ty.shape.values]


def known_shape(expr: relax.Expr) -> list[int] | None:
    """The static shape of a tensor expression, or None where a dimension is symbolic (a
    ``dynamic_shapes`` dim before ``bind_upper_bounds``)."""
    dims = getattr(expr.ty.shape, "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return [int(d) for d in dims]


def scalar_value(const) -> float | None:
    """The value of a one-element constant, or None (what the pattern folds compare against)."""
    value = getattr(const, "value", None)  # TVM 0.27: a constant's tensor is .value
    if value is None or not hasattr(value, "numpy"):
        return None
    arr = value.numpy()
    return float(arr.reshape(-1)[0]) if arr.size == 1 else None


def fit_to(ctx, grad: relax.Expr, like: relax.Expr) -> relax.Expr:
    """``grad`` summed back to ``like``'s shape (what every broadcasting op's gradient needs)."""
    grad = ctx.normalize(grad)
    if static_shape(grad) == static_shape(like):
        return grad
    return R.collapse_sum_to(grad, like.ty.shape)


def shape_tuple(expr) -> tuple[int, ...] | None:
    """The static shape of ``expr``; None when it has no tensor shape or a dimension is symbolic."""
    values = getattr(getattr(getattr(expr, "ty", None), "shape", None), "values", None)
    if values is None:
        return None
    try:
        return tuple(int(v) for v in values)
    except TypeError:  # a symbolic dimension
        return None
