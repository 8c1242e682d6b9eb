"""Converters for torch ops that TVM 0.27's PyTorch importer gets wrong, passed to
``from_exported_program(custom_convert_map=...)`` (TVM's installed files stay untouched).

* ``index_put`` with fewer index tensors than data dimensions (``x.index_add(0, idx, v)``
  decomposes to ``index_put(x, [idx], v, accumulate=True)`` on 2-D ``x``; also
  ``x[idx] = v``). TVM's ``index_put`` requires one index tensor per dimension. It becomes
  ``scatter_nd``: the given index tensors, broadcast together and stacked on a last axis of
  length ``k``, address whole slices of the trailing dimensions, and the values are
  broadcast to ``index shape + trailing shape``. Full-size ``arange`` index grids (one int64
  per element of ``v``, for each dimension) would do the same, but are kept for the backward
  and folded into constants that live for the whole step.
* ``scatter_add`` (no converter in TVM 0.27): ``scatter_elements`` with ``reduction="add"``.
* ``amax`` / ``amin`` (no converter in TVM 0.27): ``max`` / ``min`` over the given dims
  (all of them when none is given), ``keepdim`` kept.
* Integer operands of float arithmetic (``int_tensor / 2``, ``torch.log(int_tensor)``):
  cast to the float result first (see ``float_promotion``).
* ``clamp`` of an integer tensor with one bound: only that bound (TVM fills the other with an
  infinity that cannot be cast to an integer).
* ``topk`` with ``sorted=False``: the sorted result (a valid unsorted one).
* ``select`` with a negative index (``out[:, -1]``): TVM emits ``take(x, -1, mode="fast")``,
  which reads before the start of the axis (garbage in an RNN classifier's last step). The
  index is taken modulo the axis length.
* ``embedding`` with ``padding_idx``: TVM drops it, so the padding row was trained
  (``embedding.py``).
* ``_embedding_bag`` (``nn.EmbeddingBag``; no converter in TVM 0.27): ``embedding_bag.py``.
* ``index.Tensor`` (``x[I, J]``, ``x[:, I, J]``): negative indices wrapped, index tensors
  zipped as in PyTorch, and a gradient (``advanced_index.py``).

"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R
from .advanced_index import CONVERTERS as INDEX_CONVERTERS
from .embedding import CONVERTERS as EMBEDDING_CONVERTERS
from .embedding_bag import CONVERTERS as BAG_CONVERTERS
from .float_promotion import PROMOTING_CONVERTERS
from .relax_shapes import static_shape as _shape



def _index_put(node, importer):
    args = importer.retrieve_args(node)
    data, indices, values = args[0], args[1], args[2]
    accumulate = bool(args[3]) if len(args) > 3 else bool(node.kwargs.get("accumulate", False))
    short = (isinstance(indices, (list, tuple)) and indices
             and all(i is not None for i in indices) and len(indices) < data.ty.ndim)
    if not short:
        return importer._index_put(node)
    bb = importer.block_builder
    shape = _shape(data)
    k = len(indices)
    idx_shape = _broadcast([_shape(i) for i in indices])
    full = idx_shape + shape[k:]
    # (..., k) int64: the positions of the slices written, one row per index tuple
    cols = [_index_column(i, idx_shape) for i in indices]
    nd_index = bb.emit(cols[0] if k == 1 else R.concat(cols, axis=-1))
    vals = values
    if _shape(vals) != full:
        vals = bb.emit(R.broadcast_to(vals, full))
    out = bb.emit(R.scatter_nd(data, nd_index, vals, "add" if accumulate else "update"))
    target = getattr(node.target, "__name__", str(node.target))
    if target.startswith("index_put_"):  # in place: later reads of the input see the result
        for env_node, expr in list(importer.env.items()):
            if expr is data:
                importer.env[env_node] = out
    return out


def _index_column(index, idx_shape):
    """``index`` as an int64 ``idx_shape + [1]`` column of a ``scatter_nd`` index."""
    if index.ty.dtype != "int64":
        index = R.astype(index, "int64")
    col = R.reshape(index, _pad_left(_shape(index), len(idx_shape)) + [1])
    if _shape(index) != idx_shape:
        col = R.broadcast_to(col, idx_shape + [1])
    return col


def _pad_left(shape, n):
    return [1] * (n - len(shape)) + list(shape)


def _broadcast(shapes):
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(_pad_left(s, n)):
            if d != 1:
                out[i] = d
    return out


def _select(node, importer):
    x = importer.env[node.args[0]]
    dim, index = int(node.args[1]), int(node.args[2])
    if index < 0:
        extent = x.ty.shape.values[dim % x.ty.ndim]
        if isinstance(extent, tvm.tirx.IntImm):
            index += int(extent)
    return importer.block_builder.emit(R.take(x, relax.const(index, "int64"), dim))


def _scatter_add(node, importer):
    x, dim, index, src = (importer.env[a] if not isinstance(a, int) else a
                          for a in node.args[:4])
    return importer.block_builder.emit(
        R.scatter_elements(x, index, src, axis=int(dim), reduction="add"))


def _reduce_extreme(reduce):
    def convert(node, importer):
        x = importer.env[node.args[0]]
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", [])
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        axis = [int(d) for d in dims] if dims else None  # amax(x) / amax(x, []): every dim
        return importer.block_builder.emit(reduce(x, axis=axis, keepdims=bool(keep)))

    return convert


def _integer_clamp(kind):
    """``clamp`` / ``clamp_min`` / ``clamp_max`` of an integer tensor by integer bounds.

    TVM's converter fills a missing bound with ``-inf`` / ``inf`` and emits ``clip``, whose
    legalization casts the infinity to the integer dtype and aborts ("Cannot convert
    infinity to BigInt"): here only the given bounds are applied, as ``maximum`` /
    ``minimum`` with integer constants. Float tensors, and tensor or float bounds, go to
    TVM's own converter.
    """
    def convert(node, importer):
        args = importer.retrieve_args(node)
        x = args[0]
        if kind == "clamp":
            lo = args[1] if len(args) > 1 else node.kwargs.get("min")
            hi = args[2] if len(args) > 2 else node.kwargs.get("max")
        else:
            bound = args[1] if len(args) > 1 else node.kwargs.get(kind[len("clamp_"):])
            lo, hi = (bound, None) if kind == "clamp_min" else (None, bound)
        dtype = str(x.ty.dtype)
        integer = dtype.startswith(("int", "uint"))
        if not integer or not all(b is None or isinstance(b, int) for b in (lo, hi)):
            return getattr(importer, "_" + kind)(node)
        bb = importer.block_builder
        if lo is not None:
            x = bb.emit(R.maximum(x, relax.const(lo, dtype)))
        if hi is not None:
            x = bb.emit(R.minimum(x, relax.const(hi, dtype)))
        return x

    return convert


def _topk(node, importer):
    """``topk(..., sorted=False)`` (DeepSeek-V3's router) as the sorted ``topk``: PyTorch leaves
    the order of an unsorted result unspecified, so the sorted one is one of its valid results
    (TVM's converter refuses ``sorted=False``)."""
    args = importer.retrieve_args(node)
    x = args[0]
    k = args[1] if len(args) > 1 else node.kwargs.get("k", 1)
    dim = args[2] if len(args) > 2 else node.kwargs.get("dim", -1)
    largest = args[3] if len(args) > 3 else node.kwargs.get("largest", True)
    return importer.block_builder.emit(
        R.topk(x, k=k, axis=dim, largest=largest, ret_type="both", dtype="int64"))


CONVERTERS = {"index_put.default": _index_put, "index_put_.default": _index_put,
              "select.int": _select, "scatter_add.default": _scatter_add,
              "amax.default": _reduce_extreme(R.max), "amin.default": _reduce_extreme(R.min),
              "topk.default": _topk,
              "clamp.default": _integer_clamp("clamp"),
              "clamp_min.default": _integer_clamp("clamp_min"),
              "clamp_max.default": _integer_clamp("clamp_max"),
              **EMBEDDING_CONVERTERS, **BAG_CONVERTERS,
              **INDEX_CONVERTERS, **PROMOTING_CONVERTERS}
