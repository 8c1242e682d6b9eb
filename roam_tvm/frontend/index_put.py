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

A boolean mask with a value broadcast to every selected row (``x[ids == pad] = 0.0``, ``x[mask] = p``
with ``p`` one row) is ``where(mask, v, x)``: TVM's converter refuses boolean indices.
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
    bb = importer.block_builder
    if not isinstance(indices, (list, tuple)) or not indices:
        return importer._index_put(node)
    if any(i is not None and str(i.ty.dtype) == "bool" for i in indices):
        out = _masked_put(bb, data, indices, values, accumulate)
        if out is None:
            return importer._index_put(node)  # TVM's converter says what it cannot do
    elif any(i is not None and not str(i.ty.dtype).startswith(("int", "uint")) for i in indices):
        return importer._index_put(node)
    else:
        out = _integer_put(bb, data, indices, values, accumulate, node)
        if out is None:
            return importer._index_put(node)  # a dynamic axis indexed by any integers: TVM's
    target = getattr(node.target, "__name__", str(node.target))
    if target.startswith("index_put_"):  # in place: later reads of the input see the result
        for env_node, expr in list(importer.env.items()):
            if expr is data:
                importer.env[env_node] = out
    return out


def _masked_put(bb, data, indices, values, accumulate: bool):
    """``x[mask] = v`` / ``x[:, mask] += v`` with ``v`` broadcast to every selected row (a scalar, or one
    row: ``x[ids == pad] = 0.0``, ``emb[ids == tok] = special``): ``where(mask, v, x)`` (``x + where(mask,
    v, 0)`` when accumulating), static-shaped and differentiable in ``x`` and ``v``. None for a ``v``
    with one row per selected entry (its size is the number of true entries) or a mask among integer
    indices."""
    lead = 0
    while lead < len(indices) and indices[lead] is None:
        lead += 1
    mask = indices[lead] if lead < len(indices) else None
    if mask is None or any(i is not None for i in indices[lead + 1:]):
        return None
    if not isinstance(values, relax.Expr):
        values = relax.const(values, str(data.ty.dtype))
    shape, mshape, vshape = known_shape(data), known_shape(mask), known_shape(values)
    if shape is None or mshape is None or vshape is None:
        return None
    end = lead + len(mshape)
    rest = shape[end:]
    if list(shape[lead:end]) != list(mshape) or len(vshape) > len(rest) + 1 or (
            len(vshape) == len(rest) + 1 and vshape[0] != 1):
        return None
    keep = bb.emit(R.reshape(mask, [1] * lead + list(mshape) + [1] * len(rest)))
    vals = values if str(values.ty.dtype) == str(data.ty.dtype) else bb.emit(R.astype(values, data.ty.dtype))
    if len(vshape) == len(rest) + 1:  # [1, *rest]: the selected-rows dim of size 1
        vals = bb.emit(R.reshape(vals, vshape[1:]))
    if accumulate:
        zero = relax.const(0, str(data.ty.dtype))
        return bb.emit(R.add(data, bb.emit(R.where(keep, vals, zero))))
    return bb.emit(R.where(keep, vals, data))


def _integer_put(bb, data, indices, values, accumulate: bool, node):
    """``x[I] = v`` with integer index tensors (wrapped); None where TVM's converter should decide."""
    given = wrapped(bb, data, [(a, i) for a, i in enumerate(indices) if i is not None],
                    node.args[1])
    if given is None:
        return None
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
    return out


CONVERTERS = {"index_put.default": _index_put, "index_put_.default": _index_put}
