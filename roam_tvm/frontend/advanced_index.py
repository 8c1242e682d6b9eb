"""``aten.index.Tensor`` (``x[I]``, ``x[I, J]``, ``x[:, I, J]``, ``x[I, :, J]``) with PyTorch's
semantics, and a gradient.

TVM 0.27's converter is wrong in three ways, all silent:

* negative indices are not wrapped: ``take`` / ``index_tensor`` read before the start of the
  axis (``x[:, [-1]]``, ``h[b, lengths - 1]`` with a zero length);
* two 1-D index tensors after a slice (``x[:, I, J]``) are applied one after the other, an
  outer product, where PyTorch pairs them up (``I`` and ``J`` zipped);
* ``relax.index_tensor`` has no gradient, so ``x[I, J]`` on an activation did not train.

Here every integer index is wrapped (``where(i < 0, i + n, i)``, an index-sized integer
kernel). One index tensor stays a ``take`` along its axis. Several become one ``gather_nd``
over a stacked ``(..., m)`` int64 index: a slice that comes before the last indexed axis
joins the stack as an ``arange`` column, broadcast where PyTorch puts that dimension
(after the index dims when the indexed axes are not adjacent, before them when they are),
and slices after the last indexed axis are the trailing dims ``gather_nd`` keeps. The
gradient of ``gather_nd`` is ``scatter_nd(zeros, index, g, "add")`` (``grad_index.py``),
as PyTorch's ``index_put_(accumulate=True)`` backward; the stacked index is what the
backward keeps (PyTorch keeps the index tensors).
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

from .relax_shapes import known_shape, static_shape as _shape


def wrap_negative(bb: relax.BlockBuilder, index: relax.Expr, extent: int) -> relax.Expr:
    """``index`` as int64 with negative entries counted from the end of an ``extent`` axis."""
    if str(index.ty.dtype) != "int64":
        index = bb.emit(R.astype(index, "int64"))
    zero = relax.const(0, "int64")
    return bb.emit(R.where(R.less(index, zero), R.add(index, relax.const(extent, "int64")),
                           index))


def _index_tensor(node, importer):
    args = importer.retrieve_args(node)
    data, indices = args[0], list(args[1])
    given = [(a, i) for a, i in enumerate(indices) if i is not None]
    if any(not str(i.ty.dtype).startswith(("int", "uint")) for _, i in given) or not all(
            known_shape(e) is not None for e in [data] + [i for _, i in given]):
        return importer._index_tensor(node)  # boolean masks, dynamic dims: TVM's converter
    bb = importer.block_builder
    shape = _shape(data)
    given = [(a, wrap_negative(bb, i, shape[a])) for a, i in given]
    if len(given) == 1:
        axis, index = given[0]
        return bb.emit(R.take(data, index, axis=axis))
    return bb.emit(R.gather_nd(data, stacked_index(bb, shape, given)[0]))


def stacked_index(bb: relax.BlockBuilder, shape: list, given: list) -> tuple:
    """The ``(..., m)`` int64 ``gather_nd`` / ``scatter_nd`` index of ``data[indices]``.

    Parameters
    ----------
    bb : relax.BlockBuilder
        Where the bindings are emitted.
    shape : list of int
        ``data``'s shape.
    given : list of (int, relax.Expr)
        ``(axis, int64 index)`` for each index tensor, by axis, negatives already wrapped.

    Returns
    -------
    (relax.Expr, list of int)
        The index, and its shape without the last axis (the result's leading dims; the
        dims after the last indexed axis follow them, see the module docstring).
    """
    last = given[-1][0]
    axes = [a for a, _ in given]
    adjacent = axes == list(range(axes[0], last + 1))
    sliced = [a for a in range(last + 1) if a not in axes]  # arange columns
    bshape = _broadcast([_shape(i) for _, i in given])
    # result dims (before gather_nd's trailing ones): where PyTorch puts them
    lead = [a for a in sliced if a < axes[0]] if adjacent else []
    tail = [] if adjacent else sliced
    out = [shape[a] for a in lead] + bshape + [shape[a] for a in tail]
    index_at = len(lead)  # where the broadcast index dims start in ``out``
    cols = {}
    for a, i in given:
        dims = _shape(i)
        view = [1] * index_at + [1] * (len(bshape) - len(dims)) + dims
        view += [1] * (len(out) - len(view))
        cols[a] = bb.emit(R.broadcast_to(R.reshape(i, view + [1]), out + [1]))
    for a in sliced:
        pos = lead.index(a) if a in lead else index_at + len(bshape) + tail.index(a)
        view = [1] * len(out)
        view[pos] = shape[a]
        grid = R.reshape(R.arange(0, shape[a], 1, "int64"), view + [1])
        cols[a] = bb.emit(R.broadcast_to(grid, out + [1]))
    return bb.emit(R.concat([cols[a] for a in range(last + 1)], axis=-1)), out


def _broadcast(shapes: list) -> list:
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        for k, d in enumerate([1] * (n - len(s)) + list(s)):
            if d != 1:
                out[k] = d
    return out


CONVERTERS = {"index.Tensor": _index_tensor}
