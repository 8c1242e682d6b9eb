"""``aten.scatter_reduce.two`` (``Tensor.scatter_reduce`` / ``scatter_reduce_``), which TVM 0.27's
importer lacks ("Unsupported function types"; TAPAS's per-cell segment reductions, GNN segment
means / maxima), as ``relax.scatter_elements`` with PyTorch's semantics.

TVM's ``scatter_elements`` reduces with ``add`` / ``mul`` / ``max`` / ``min`` one update at a time
(a serial loop along the axis on CPU); its ``mean`` is a running pairwise mean
(``(out + u) / 2``), not PyTorch's, so it is never used.

* ``sum`` / ``prod`` / ``amax`` / ``amin``: ``add`` / ``mul`` / ``max`` / ``min``.
* ``mean``: the ``add`` result divided by the number of values that met at each position, the
  position's own value counted when ``include_self``; a position nothing is scattered to keeps
  its value (count 1). Integer tensors are divided with floor, as in PyTorch.
* ``include_self=False``: the scattered positions are first overwritten with the reduction's
  identity (0, 1, -inf / the dtype's lowest, +inf / its largest), as PyTorch's kernel does; the
  ``update`` scatter's gradient then zeroes ``self``'s gradient there, as PyTorch's backward.

``src`` larger than ``index`` (PyTorch reads only its leading ``index.shape`` block) is sliced
first. An ``index`` smaller than ``self`` along another axis than ``dim`` is refused: TVM's kernel
maps it onto ``self``'s strides.

The gradients are ``grad_index._scatter_elements_grad`` (``add``, ``mul``, ``max``, ``min``).
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax import op as R

from .errors import UnsupportedError
from .relax_shapes import known_shape

__all__ = ["CONVERTERS", "convert_scatter_reduce"]

_REDUCTION = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}


def _identity(reduce: str, dtype: str) -> float | int:
    """The value a position holds before anything is scattered to it when ``include_self=False``."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return int(info.min) if reduce == "amax" else int(info.max)
    if dtype == "bool":
        return reduce == "amin"
    return float("-inf") if reduce == "amax" else float("inf")


def _arg(node, args: list, i: int, name: str, default):
    return args[i] if len(args) > i else node.kwargs.get(name, default)


def convert_scatter_reduce(node, importer) -> relax.Var:
    """Converter for ``aten.scatter_reduce.two(self, dim, index, src, reduce, *, include_self=True)``."""
    bb = importer.block_builder
    args = importer.retrieve_args(node)
    data, dim, index, src = args[0], int(args[1]), args[2], args[3]
    reduce = str(_arg(node, args, 4, "reduce", None))
    include_self = bool(_arg(node, args, 5, "include_self", True))
    if reduce not in _REDUCTION:
        raise UnsupportedError(f"scatter_reduce: unknown reduce '{reduce}' (PyTorch knows "
                               "'sum', 'prod', 'mean', 'amax', 'amin')")
    shape, idx_shape, src_shape = known_shape(data), known_shape(index), known_shape(src)
    if shape is None or idx_shape is None or src_shape is None:
        raise UnsupportedError("scatter_reduce with a dynamic dim is not supported; way out: "
                               "trace it at a fixed size")
    dtype = str(data.ty.dtype)
    if str(index.ty.dtype) != "int64":
        index = bb.emit(R.astype(index, "int64"))
    if not shape:  # a 0-d self: scatter over a 1-element vector
        data, index, src = (bb.emit(R.reshape(t, (1,))) for t in (data, index, src))
        shape, idx_shape, src_shape = [1], [1], [1]
        out = _scatter_reduce(bb, data, 0, index, src, reduce, include_self, dtype)
        return bb.emit(R.reshape(out, ()))
    dim %= len(shape)
    if any(i != s for d, (i, s) in enumerate(zip(idx_shape, shape)) if d != dim):
        raise UnsupportedError(
            f"scatter_reduce: index {idx_shape} smaller than self {shape} along a dim other than "
            f"dim={dim} is not supported (TVM's scatter_elements reads it with self's strides); "
            "way out: expand the index (and src) to self's size on the other dims")
    if src_shape != idx_shape:  # PyTorch reads src's leading index-shaped block only
        src = bb.emit(R.strided_slice(src, list(range(len(idx_shape))), [0] * len(idx_shape),
                                      idx_shape))
    return _scatter_reduce(bb, data, dim, index, src, reduce, include_self, dtype)


def _scatter_reduce(bb, data, dim, index, src, reduce, include_self, dtype) -> relax.Var:
    if not include_self:  # PyTorch's kernel: the scattered positions start at the identity
        # broadcast_to, not R.full: TVM's full does not build with an infinite fill
        fill = R.broadcast_to(relax.const(_identity(reduce, dtype), dtype), index.ty.shape)
        data = bb.emit(R.scatter_elements(data, index, fill, axis=dim))
    out = bb.emit(R.scatter_elements(data, index, src, axis=dim, reduction=_REDUCTION[reduce]))
    if reduce != "mean":
        return out
    # the count of values met at each position; 0 (nothing scattered, self excluded) -> 1
    start = R.ones(data.ty.shape, dtype) if include_self else R.zeros(data.ty.shape, dtype)
    count = bb.emit(R.scatter_elements(start, index, R.ones(index.ty.shape, dtype), axis=dim,
                                       reduction="add"))
    zero, one = relax.const(0, dtype), relax.const(1, dtype)
    count = bb.emit(R.where(R.equal(count, zero), one, count))
    if dtype.startswith(("int", "uint")):
        return bb.emit(R.floor_divide(out, count))
    return bb.emit(R.divide(out, count))


CONVERTERS = {"scatter_reduce.two": convert_scatter_reduce}
