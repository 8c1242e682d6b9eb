"""``aten._embedding_bag`` (``nn.EmbeddingBag``, ``F.embedding_bag``), which TVM 0.27 cannot
import, in Relax ops whose gradients are PyTorch's.

Bag ``b`` holds the indices ``offsets[b] <= i < offsets[b + 1]`` (the last bag runs to the
end; ``include_last_offset`` drops the final offset). Entries equal to ``padding_idx`` are
left out: they add nothing, are not counted by ``mean`` and get no gradient. An empty bag
(or one of padding only) is zeros in every mode, as in PyTorch.

* 2-D input (``EmbeddingBag(x)`` with ``x`` of shape ``(B, L)``, exported with the offsets
  ``arange(0, B * L, L)``), modes ``sum`` / ``mean``: the rows are looked up as ``(B, L, D)``
  and reduced over ``L``; ``take`` fuses into the reduction, so no ``(B * L, D)`` copy is
  made.
* Otherwise each index's bag number (``#{b : offsets[b] <= i} - 1``, one fused reduction)
  addresses a ``scatter_nd`` add of the looked-up rows into ``(B, D)`` zeros, whose gradient
  is a gather of the bag gradient (``grad_index.py``), as PyTorch's.
* ``max``: the first position holding each bag's maximum (PyTorch's ``max_indices``) is
  found on the detached rows (``scatter_nd`` max, then min over the positions equal to it),
  and the output adds up the rows at those positions only, so the gradient reaches exactly
  one row per bag and column, ties included.
* ``per_sample_weights`` (``sum`` only, as in PyTorch) scale each row before the sum.

``scale_grad_by_freq`` is refused with a clear error.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R
from tvm.relax.op.grad import no_grad

from .embedding import pad_mask
from .errors import UnsupportedError
from .relax_shapes import known_shape

_MODES = {0: "sum", 1: "mean", 2: "max"}


def _embedding_bag(node, importer):
    args = importer.retrieve_args(node)

    def arg(i, name, default):
        return args[i] if len(args) > i else node.kwargs.get(name, default)

    weight, indices, offsets = args[0], args[1], args[2]
    if any(known_shape(e) is None for e in (weight, indices, offsets)):
        raise UnsupportedError(
            "nn.EmbeddingBag with a dynamic dim (dynamic_shapes) is not supported; way out: "
            "trace it at a fixed batch (pad the indices and offsets to the largest batch)")
    if arg(3, "scale_grad_by_freq", False):
        raise UnsupportedError(
            "nn.EmbeddingBag(scale_grad_by_freq=True) is not supported (its gradient depends "
            "on each index's count in the batch); way out: construct it without "
            "scale_grad_by_freq")
    mode = _MODES[int(arg(4, "mode", 0))]
    psw = arg(6, "per_sample_weights", None)
    last = bool(arg(7, "include_last_offset", False))
    padding_idx = arg(8, "padding_idx", -1)
    pad = None if padding_idx is None or int(padding_idx) < 0 else int(padding_idx)
    bb = importer.block_builder
    n = int(indices.ty.shape.values[0])
    bags = int(offsets.ty.shape.values[0]) - (1 if last else 0)
    width = _fixed_width(node.args[2], n)
    if width is not None and mode != "max" and psw is None and bags * width == n:
        out = _fixed_bags(bb, weight, indices, pad, mode, bags, width)
    else:
        out = _ragged_bags(bb, weight, indices, offsets, pad, mode, psw, bags)
    return (out, None, None, None)  # only the bags are read (offset2bag etc. are internal)


def _fixed_width(offsets_node, n: int) -> int | None:
    """``L`` where the offsets are the ``arange(0, n, L)`` of a 2-D input, else ``None``."""
    target = getattr(offsets_node, "target", None)
    if "arange" not in str(target):
        return None
    a = list(offsets_node.args)
    if len(a) == 3 and all(isinstance(v, int) for v in a) and a[0] == 0 and a[1] == n:
        return a[2]
    return None


def _rows(bb, weight, indices, pad):
    """The looked-up ``(N, D)`` rows with padding entries zeroed, and the ``(N, 1)`` keep mask."""
    rows = bb.emit(R.take(weight, indices, axis=0))
    if pad is None:
        return rows, None
    keep = bb.emit(R.logical_not(pad_mask(bb, weight, indices, pad)))
    return bb.emit(R.where(keep, rows, relax.const(0, str(rows.ty.dtype)))), keep


def _fixed_bags(bb, weight, indices, pad, mode, bags, width):
    dim = int(weight.ty.shape.values[-1])
    rows, keep = _rows(bb, weight, indices, pad)
    total = bb.emit(R.sum(R.reshape(rows, [bags, width, dim]), axis=[1]))
    if mode == "sum":
        return total
    if keep is None:
        return bb.emit(R.divide(total, relax.const(float(width), str(total.ty.dtype))))
    count = R.sum(R.reshape(R.astype(keep, str(total.ty.dtype)), [bags, width, 1]), axis=[1])
    return _divide_by_count(bb, total, count)


def _divide_by_count(bb, total, count):
    one = relax.const(1.0, str(total.ty.dtype))
    return bb.emit(R.divide(total, R.maximum(bb.emit(count), one)))  # empty bag: 0 / 1


def _bag_of(bb, offsets, n, bags):
    """``(N, 1)`` int64: the bag of each index position."""
    starts = offsets if int(offsets.ty.shape.values[0]) == bags else bb.emit(
        R.strided_slice(offsets, axes=[0], begin=[0], end=[bags]))
    if str(starts.ty.dtype) != "int64":
        starts = bb.emit(R.astype(starts, "int64"))
    pos = R.reshape(R.arange(0, n, 1, "int64"), [n, 1])
    opened = R.astype(R.less_equal(R.reshape(starts, [1, bags]), pos), "int64")
    bag = R.subtract(R.sum(opened, axis=[1], keepdims=True), relax.const(1, "int64"))
    return bb.emit(bag)


def _ragged_bags(bb, weight, indices, offsets, pad, mode, psw, bags):
    n = int(indices.ty.shape.values[0])
    dim = int(weight.ty.shape.values[-1])
    dtype = str(weight.ty.dtype)
    bag = _bag_of(bb, offsets, n, bags)
    rows, keep = _rows(bb, weight, indices, pad)
    if psw is not None:
        if mode != "sum":
            raise UnsupportedError("EmbeddingBag per_sample_weights need mode='sum' (PyTorch's "
                                   f"rule), got mode='{mode}'")
        rows = bb.emit(R.multiply(rows, R.reshape(psw, [n, 1])))
    if mode == "max":
        rows = bb.emit(R.where(_first_max(bb, rows, keep, bag, bags), rows,
                               relax.const(0, dtype)))
    total = bb.emit(R.scatter_nd(R.zeros([bags, dim], dtype), bag, rows, "add"))
    if mode != "mean":
        return total
    ones = R.ones([n, 1], dtype) if keep is None else R.astype(keep, dtype)
    count = R.scatter_nd(R.zeros([bags, 1], dtype), bag, bb.emit(ones), "add")
    return _divide_by_count(bb, total, count)


def _first_max(bb, rows, keep, bag, bags):
    """``(N, D)`` bool: is this position its bag's first maximum in that column (detached)."""
    n, dim = (int(d) for d in rows.ty.shape.values)
    plain = bb.emit(no_grad(rows))
    # the smallest row value stands for "nothing" (padding, and the start of every bag):
    # an infinite constant would be folded into a splat fill TVM 0.27 cannot legalize
    low = bb.emit(R.min(plain))
    if keep is not None:
        plain = bb.emit(R.where(keep, plain, low))
    best = bb.emit(R.scatter_nd(R.broadcast_to(low, [bags, dim]), bag, plain, "max"))
    at_best = R.equal(plain, R.take(best, R.reshape(bag, [n]), axis=0))
    if keep is not None:  # padding never wins, even where it ties a bag's maximum
        at_best = R.logical_and(at_best, keep)
    pos = R.broadcast_to(R.reshape(R.arange(0, n, 1, "int64"), [n, 1]), [n, dim])
    none = relax.const(n, "int64")
    first = bb.emit(R.scatter_nd(R.broadcast_to(none, [bags, dim]), bag,
                                 bb.emit(R.where(at_best, pos, none)), "min"))
    return bb.emit(R.equal(pos, R.take(first, R.reshape(bag, [n]), axis=0)))


CONVERTERS = {"_embedding_bag.default": _embedding_bag,
              "_embedding_bag_forward_only.default": _embedding_bag}
