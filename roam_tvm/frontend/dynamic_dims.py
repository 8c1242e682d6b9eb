"""Dynamic dimensions: every symbolic dim needs an upper bound, and the step is built for it."""

from __future__ import annotations

import tvm
from tvm import relax

from .errors import DynamicShapeError


def _upper_bounds(func: relax.Function) -> dict:
    if func.attrs is None or "tir_var_upper_bound" not in func.attrs:
        return {}
    return {str(k): v for k, v in func.attrs["tir_var_upper_bound"].items()}


def check_static_shapes(func: relax.Function) -> None:
    """Raise DynamicShapeError for a parameter's symbolic dim with no upper bound.

    Parameters
    ----------
    func : relax.Function
        A forward; its ``tir_var_upper_bound`` attribute gives the bounds.
    """
    bounds = _upper_bounds(func)
    for p in func.params:
        ty = p.ty
        if not isinstance(ty, relax.TensorType):
            continue
        if ty.shape is None or not hasattr(ty.shape, "values"):
            raise DynamicShapeError(
                f"input '{p.name}' has an unknown rank/shape; give every input a static "
                "shape (or a symbolic dim with an upper bound).")
        for i, d in enumerate(ty.shape.values):
            if isinstance(d, tvm.tirx.IntImm):
                continue
            names = [str(v) for v in tvm.tirx.analysis.undefined_vars(d)]
            if not all(n in bounds for n in names):
                raise DynamicShapeError(
                    f"dim {i} of input '{p.name}' is dynamic ({d}) with no upper bound. "
                    "Export with static example shapes, or give the dim an upper bound "
                    "(torch.export.Dim(name, max=...)), which becomes the function attr "
                    "'tir_var_upper_bound'.")
