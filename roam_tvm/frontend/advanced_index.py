"""``aten.index.Tensor`` (``x[I]``, ``x[I, J]``, ``x[:, I, J]``, ``x[I, :, J]``) with PyTorch's
semantics, and a gradient.

TVM 0.27's converter is wrong in three ways, all silent:

* negative indices are not wrapped: ``take`` / ``index_tensor`` read before the start of the
  axis (``x[:, [-1]]``, ``h[b, lengths - 1]`` with a zero length);
* two 1-D index tensors after a slice (``x[:, I, J]``) are applied one after the other, an
  outer product, where PyTorch pairs them up (``I`` and ``J`` zipped);
* ``relax.index_tensor`` had no gradient, so ``x[I, J]`` on an activation did not train.

Here every integer index is wrapped (``where(i < 0, i + n, i)``, an index-sized integer
kernel) unless it is known to be non-negative (an ``arange``, the indices of ``topk`` /
``argmax``, see ``is_nonnegative``). One index tensor stays a ``take`` along its axis; index
tensors for every axis indexed (no slice among them) stay TVM's ``index_tensor``, which
zips them as PyTorch does (its gradient, ``grad_index.py``, scatters into zeros in the
backward and keeps only the index tensors, as PyTorch). Index tensors after a slice become
one ``gather_nd`` over a stacked ``(..., m)`` int64 index: a slice that comes before the
last indexed axis joins the stack as an ``arange`` column, broadcast where PyTorch puts
that dimension (after the index dims when the indexed axes are not adjacent, before them
when they are), and slices after the last indexed axis are the trailing dims ``gather_nd``
keeps. Its gradient is ``scatter_nd(zeros, index, g, "add")`` (``grad_index.py``). Where an
indexed axis has a dynamic extent and the index may be negative, TVM's converter is kept
(no wrap, as before).
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R

from .errors import UnsupportedError
from .relax_shapes import known_shape, static_shape as _shape


def wrap_negative(bb: relax.BlockBuilder, index: relax.Expr, extent: int) -> relax.Expr:
    """``index`` as int64 with negative entries counted from the end of an ``extent`` axis."""
    if str(index.ty.dtype) != "int64":
        index = bb.emit(R.astype(index, "int64"))
    zero = relax.const(0, "int64")
    return bb.emit(R.where(R.less(index, zero), R.add(index, relax.const(extent, "int64")),
                           index))


# ops that keep an index tensor's values (only its layout changes)
_VALUE_PRESERVING = frozenset({"unsqueeze", "view", "reshape", "expand", "_unsafe_view",
                               "squeeze", "clone", "alias", "contiguous", "slice"})


# ops whose result is an index into some axis (never negative)
_INDEX_RESULTS = frozenset({"argmax", "argmin", "argsort", "nonzero", "bucketize",
                            "searchsorted"})
# ops returning (values, indices)
_WITH_INDICES = frozenset({"topk", "sort", "max", "min", "kthvalue", "mode", "median",
                           "cummax", "cummin"})


def is_nonnegative(fx_node) -> bool:
    """Whether the index ``fx_node`` is built from an ``arange`` with a non-negative start
    and step or the indices an op returns (``topk``, ``argmax``, ...), views of them and
    additions of non-negative integers (HF's mask positions ``arange(kv_len) + offset``):
    then wrapping is a no-op and is not emitted. That is the
    common batch index ``x[torch.arange(B), pos]``, and keeps a dynamic batch's step the
    same as the static one (wrapping needs the axis extent as a constant)."""
    if isinstance(fx_node, int):
        return fx_node >= 0
    if not hasattr(fx_node, "target"):
        return False
    name = getattr(fx_node.target, "__name__", str(fx_node.target))
    base, args = name.split(".")[0], list(fx_node.args)
    if base == "arange":
        start = args[0] if len(args) > 1 else 0
        step = args[2] if len(args) > 2 else 1
        return isinstance(start, int) and isinstance(step, int) and start >= 0 and step > 0
    if base in _INDEX_RESULTS:
        return True
    if base == "getitem" and len(args) == 2 and args[1] == 1 and hasattr(args[0], "target"):
        # the indices of topk / sort / max(dim) (MoE routing: x[idx], index_add(0, idx, ..))
        src = getattr(args[0].target, "__name__", str(args[0].target)).split(".")[0]
        return src in _WITH_INDICES
    if base in ("add", "mul") and len(args) == 2:
        return all(is_nonnegative(a) for a in args + [fx_node.kwargs.get("alpha", 1)])
    return base in _VALUE_PRESERVING and bool(args) and is_nonnegative(args[0])


def indexed_extents(data: relax.Expr, given: list) -> list | None:
    """The static extent of each indexed axis of ``data``, or None where one is symbolic."""
    dims = getattr(data.ty.shape, "values", None)
    if dims is None or not all(isinstance(dims[a], tvm.tirx.IntImm) for a, _ in given):
        return None
    return [int(dims[a]) for a, _ in given]


def wrapped(bb: relax.BlockBuilder, data: relax.Expr, given: list, fx_indices) -> list | None:
    """``given`` (``(axis, index)`` pairs) with each index wrapped unless it is known to be
    non-negative; None where an index needs wrapping along an axis of symbolic extent."""
    out = []
    for a, i in given:
        if is_nonnegative(fx_indices[a]):
            out.append((a, i))
            continue
        extent = indexed_extents(data, [(a, i)])
        if extent is None:
            return None
        out.append((a, wrap_negative(bb, i, extent[0])))
    return out


def _index_tensor(node, importer):
    args = importer.retrieve_args(node)
    data, indices = args[0], list(args[1])
    given = [(a, i) for a, i in enumerate(indices) if i is not None]
    if any(not str(i.ty.dtype).startswith(("int", "uint")) for _, i in given):
        return importer._index_tensor(node)  # boolean masks: TVM's converter
    given = wrapped(importer.block_builder, data, given, node.args[1])
    if given is None:
        return importer._index_tensor(node)  # a dynamic axis indexed by any integers: TVM's
    bb = importer.block_builder
    if len(given) == 1:
        axis, index = given[0]
        return bb.emit(R.take(data, index, axis=axis))
    if len(given) == len(indices):  # no slice: TVM's index_tensor zips them as PyTorch does
        return bb.emit(R.index_tensor(data, relax.Tuple([i for _, i in given])))
    if known_shape(data) is None or any(known_shape(i) is None for _, i in given):
        raise UnsupportedError(
            "x[:, I, J]-style indexing (index tensors after a slice) with a dynamic dim is not "
            "supported; way out: trace it at a fixed size, or move the indexed dims first "
            "(x.permute(...)[I, J])")
    return bb.emit(R.gather_nd(data, stacked_index(bb, _shape(data), given)[0]))


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
        i = i if str(i.ty.dtype) == "int64" else R.astype(i, "int64")
        col = R.reshape(i, view + [1])
        # a column already of the full shape is not copied (a lone x[idx] = v: no copy at all)
        cols[a] = bb.emit(col if view == out else R.broadcast_to(col, out + [1]))
    for a in sliced:
        pos = lead.index(a) if a in lead else index_at + len(bshape) + tail.index(a)
        view = [1] * len(out)
        view[pos] = shape[a]
        grid = R.reshape(R.arange(0, shape[a], 1, "int64"), view + [1])
        cols[a] = bb.emit(R.broadcast_to(grid, out + [1]))
    if last == 0:
        return cols[0], out
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
