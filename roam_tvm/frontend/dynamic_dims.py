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


_LARGEST = 2**31  # torch.export's default max is infinite; anything this large is no bound


def _dim_entries(spec, rank: int, where: str) -> list:
    """``(dim, Dim)`` pairs of one tensor's spec: ``None``, ``{dim: Dim}`` or one entry per dim."""
    if spec is None:
        return []
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        if len(spec) != rank:
            raise DynamicShapeError(f"dynamic_shapes for {where} gives {len(spec)} dims for a "
                                    f"tensor of rank {rank}; give one entry per dim")
        items = list(enumerate(spec))
    else:
        raise DynamicShapeError(f"dynamic_shapes for {where} must be None, {{dim: Dim}} or a "
                                f"list with one entry per dim, got {type(spec).__name__}")
    out = []
    for dim, d in items:
        if not isinstance(dim, int) or not -rank <= dim < rank:
            raise DynamicShapeError(f"dynamic_shapes for {where} names dim {dim!r} of a tensor "
                                    f"of rank {rank}")
        if d is not None:
            out.append((dim % rank, d))
    return out


def check_dynamic_spec(dynamic_shapes, tensors: list, where: list) -> None:
    """Refuse, before tracing, a ``dynamic_shapes`` spec with a dynamic dim that has no max.

    The step's memory is planned for the largest shape, so every dynamic dim needs a
    finite upper bound (``torch.export.Dim(name, max=N)``).

    Parameters
    ----------
    dynamic_shapes : sequence
        One ``torch.export`` spec per input, then per target.
    tensors : list of torch.Tensor
        The example inputs, then the targets.
    where : list of str
        A name for each tensor, for messages.
    """
    import torch

    if not isinstance(dynamic_shapes, (list, tuple)) or len(dynamic_shapes) != len(tensors):
        got = (len(dynamic_shapes) if isinstance(dynamic_shapes, (list, tuple))
               else type(dynamic_shapes).__name__)
        raise DynamicShapeError(f"dynamic_shapes must give one spec per input then per target "
                                f"({len(tensors)} in all: {', '.join(where)}), got {got}")
    for t, spec, name in zip(tensors, dynamic_shapes, where):
        for dim, d in _dim_entries(spec, t.dim(), name):
            if d is torch.export.Dim.STATIC:
                continue
            bound = getattr(d, "max", None) if isinstance(d, torch.export.Dim) else None
            if not isinstance(bound, int) or isinstance(bound, bool) or not 0 < bound < _LARGEST:
                label = getattr(d, "__name__", repr(d))
                raise DynamicShapeError(
                    f"dynamic_shapes for {name}, dim {dim}: {label} has no upper bound. The "
                    "step's memory is planned for the largest shape, so give the dim one: "
                    f"torch.export.Dim({label!r}, max=N), or export with static shapes.")


def bind_upper_bounds(func: relax.Function, dynamic_shapes=None) -> tuple[relax.Function, dict]:
    """``func`` with every symbolic dim of its parameters set to its upper bound.

    The gradients and the planners work on static shapes; a plan made for the largest
    shape holds for every smaller one (each buffer only shrinks inside its slot), but the
    step built here runs on tensors of exactly the upper-bound size.

    Parameters
    ----------
    func : relax.Function
        The imported forward; ``tir_var_upper_bound`` gives each symbolic var's bound.
    dynamic_shapes : sequence, optional
        The ``torch.export`` spec, one per leading parameter of ``func``; used to report the
        bounds under the ``Dim`` names the user gave.

    Returns
    -------
    (relax.Function, dict)
        The static forward and ``{dim name: bound}`` (empty when nothing was dynamic).
    """
    check_static_shapes(func)
    sym = _symbolic_vars(func)
    if not sym:
        return func, {}
    bounds = _upper_bounds(func)
    label = _dim_labels(func, dynamic_shapes)
    func = _fold_prim_exprs(func.bind_symbolic_vars({v: int(bounds[n]) for n, v in sym.items()}))
    for key in ("tir_var_upper_bound", "tir_var_lower_bound"):
        if func.attrs is not None and key in func.attrs:
            func = func.without_attr(key)
    return func, {label.get(n, n): int(bounds[n]) for n in sorted(sym)}


def _symbolic_vars(func: relax.Function) -> dict:
    """The symbolic vars in ``func``'s parameter shapes, by name."""
    sym = {}
    for p in func.params:
        if isinstance(p.ty, relax.TensorType):
            for d in p.ty.shape.values:
                for v in tvm.tirx.analysis.undefined_vars(d):
                    sym[str(v)] = v
    return sym


def _dim_labels(func: relax.Function, dynamic_shapes) -> dict:
    """Symbolic var name -> the ``Dim`` name the user gave it (where a dim is that var)."""
    label = {}
    for p, spec in zip(func.params, dynamic_shapes or ()):
        items = spec.items() if isinstance(spec, dict) else enumerate(spec or ())
        for dim, d in items:
            expr = p.ty.shape.values[dim % p.ty.ndim] if d is not None else None
            if isinstance(expr, tvm.tirx.Var) and hasattr(d, "__name__"):
                label.setdefault(str(expr), d.__name__)
    return label


def _fold(expr: relax.Expr, analyzer) -> relax.Expr:
    """``expr`` with its integer expressions simplified (``1 + 32`` -> ``33``)."""
    if isinstance(getattr(expr, "ty", None), tvm.ir.PrimType) and not isinstance(
            expr, (relax.Var, relax.Call)):  # an integer expression, not a Relax value
        return analyzer.simplify(expr)
    if isinstance(expr, relax.ShapeExpr):
        return relax.ShapeExpr([analyzer.simplify(v) for v in expr.values])
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_fold(f, analyzer) for f in expr.fields])
    return expr


@relax.expr_functor.mutator
class _FoldArgs(relax.PyExprMutator):
    """Simplify the integer arguments of every call (slice bounds, reshape targets): once a
    symbolic dim is bound they read ``1 + 32``, which legalization treats as dynamic."""

    def __init__(self, mod=None):
        super().__init__(mod)
        self.analyzer = tvm.sym.Analyzer()

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        args = [_fold(self.visit_expr(a), self.analyzer) for a in call.args]
        return relax.Call(call.op, args, call.attrs, call.ty_args, call.span)


def _fold_prim_exprs(func: relax.Function) -> relax.Function:
    return _FoldArgs().visit_expr(func)
