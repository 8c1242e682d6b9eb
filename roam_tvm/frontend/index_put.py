"""``aten.index_put`` / ``index_put_`` (``x[I] = v``, ``x[:, I] = v``, ``x.index_add(0, I, v)``,
``x.index_put((I,), v, accumulate=True)``) with PyTorch's semantics.

TVM 0.27's ``index_put`` needs one index tensor per dimension, does not wrap negative
indices (``x[I] = v`` with ``I = [-1]`` wrote before the start of ``x``: a crash or a
corrupted neighbour) and fills a slice (``None``) with an ``arange`` shaped for a leading
slice only. Here every integer index is wrapped (``advanced_index.wrap_negative``); a full
set of index tensors stays TVM's ``index_put`` (its gradient is in ``grad_index.py``);
anything else becomes one ``scatter_nd`` over the same stacked ``(..., m)`` index as the
read ``x[I, J]`` uses (``advanced_index.stacked_index``), with the values broadcast to
``index dims + trailing dims``. Full-size ``arange`` grids per element of ``v`` would do the
same, but are kept for the backward and folded into constants that live for the whole step.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

from .advanced_index import stacked_index, wrapped
from .errors import UnsupportedError
from .relax_shapes import known_shape, static_shape as _shape


def _index_put(node, importer):
    args = importer.retrieve_args(node)
    data, indices, values = args[0], args[1], args[2]
    accumulate = bool(args[3]) if len(args) > 3 else bool(node.kwargs.get("accumulate", False))
    if not isinstance(indices, (list, tuple)) or not indices or any(
            i is not None and not str(i.ty.dtype).startswith(("int", "uint")) for i in indices):
        return importer._index_put(node)  # boolean masks: TVM's converter
    bb = importer.block_builder
    given = wrapped(bb, data, [(a, i) for a, i in enumerate(indices) if i is not None],
                    node.args[1])
    if given is None:
        return importer._index_put(node)  # a dynamic axis indexed by any integers: TVM's
    if len(given) == data.ty.ndim:
        out = bb.emit(R.index_put(data, relax.Tuple([i for _, i in given]), values, accumulate))
    elif known_shape(data) is None or known_shape(values) is None or any(
            known_shape(i) is None for _, i in given):
        raise UnsupportedError(
            "x[I] = v / index_add with fewer index tensors than dims and a dynamic dim is not "
            "supported; way out: trace it at a fixed size")
    else:
        shape = _shape(data)
        index, index_shape = stacked_index(bb, shape, given)
        full = index_shape + shape[given[-1][0] + 1:]
        vals = values if _shape(values) == full else bb.emit(R.broadcast_to(values, full))
        out = bb.emit(R.scatter_nd(data, index, vals, "add" if accumulate else "update"))
    target = getattr(node.target, "__name__", str(node.target))
    if target.startswith("index_put_"):  # in place: later reads of the input see the result
        for env_node, expr in list(importer.env.items()):
            if expr is data:
                importer.env[env_node] = out
    return out


CONVERTERS = {"index_put.default": _index_put, "index_put_.default": _index_put}
