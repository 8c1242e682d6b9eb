"""Converters for torch ops that TVM 0.27's PyTorch importer gets wrong, passed to
``from_exported_program(custom_convert_map=...)`` (TVM's installed files stay untouched).

* ``index_put`` with fewer index tensors than data dimensions (``x.index_add(0, idx, v)``
  decomposes to ``index_put(x, [idx], v, accumulate=True)`` on 2-D ``x``; also
  ``x[idx] = v``). TVM requires one index tensor per dimension. The missing trailing
  dimensions get ``arange`` index tensors, broadcast against the given ones, and the values
  are broadcast to the full index shape: the same elements, written or accumulated once.
* ``scatter_add`` (no converter in TVM 0.27): ``scatter_elements`` with ``reduction="add"``.
* ``amax`` / ``amin`` (no converter in TVM 0.27): ``max`` / ``min`` over the given dims
  (all of them when none is given), ``keepdim`` kept.
* ``select`` with a negative index (``out[:, -1]``): TVM emits ``take(x, -1, mode="fast")``,
  which reads before the start of the axis (garbage in an RNN classifier's last step). The
  index is taken modulo the axis length.

"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R
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
    trailing = shape[k:]
    full = idx_shape + trailing
    m = len(trailing)
    new = [bb.emit(R.broadcast_to(R.reshape(i, _pad_left(_shape(i), len(idx_shape)) + [1] * m),
                                  full)) for i in indices]
    for j, d in enumerate(trailing):
        ar = R.arange(relax.prim_value(0), relax.prim_value(d), relax.prim_value(1), "int64")
        view = [1] * len(idx_shape) + [d if t == j else 1 for t in range(m)]
        new.append(bb.emit(R.broadcast_to(R.reshape(ar, view), full)))
    vals = values
    if _shape(vals) != full:
        vals = bb.emit(R.broadcast_to(vals, full))
    out = bb.emit(R.index_put(data, relax.Tuple(new), vals, accumulate))
    target = getattr(node.target, "__name__", str(node.target))
    if target.startswith("index_put_"):  # in place: later reads of the input see the result
        for env_node, expr in list(importer.env.items()):
            if expr is data:
                importer.env[env_node] = out
    return out


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


CONVERTERS = {"index_put.default": _index_put, "index_put_.default": _index_put,
              "select.int": _select, "scatter_add.default": _scatter_add,
              "amax.default": _reduce_extreme(R.max), "amin.default": _reduce_extreme(R.min)}
