"""``torch.histc`` and ``torch.bincount``, which TVM 0.27's importer lacks, as static counts.

Hugging Face's MoE load-balancing loss (``output_router_logits=True``: Mixtral, Qwen-MoE, DBRX, OLMoE, Jamba
and some thirty more) counts the tokens each expert got with
``torch.histc(selected_experts.float(), bins=num_experts, min=0, max=num_experts)``, and hand-written routers
with ``torch.bincount(indices, minlength=num_experts)``; the importer stopped on both ("Unsupported function
types"). Each is a constant-size reduction: every element is compared with every bin index and the matches
are summed.

* ``histc``: an element's bin is ``floor((x - min) * bins / (max - min))`` (an element equal to ``max`` goes
  to the last bin, elements outside ``[min, max]`` and NaNs are not counted, as in PyTorch). With
  ``min == max`` PyTorch takes the data's own range (widened by 1 each side if it is a single value); so
  does this.
* ``bincount``: its length is the one ``torch.export`` recorded from the example data (``max(minlength,
  max + 1)``; export asserts it at run time, and the step is planned for static shapes). With a router's
  indices and ``minlength`` = the number of experts it is always that. ``weights`` are summed per bin.

Neither carries a gradient (PyTorch's have none).
"""
from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

__all__ = ["CONVERTERS", "convert_bincount", "convert_histc"]


def _arg(node, importer, i: int, name: str, default):
    args = importer.retrieve_args(node)
    if len(args) > i:
        return args[i]
    return node.kwargs.get(name, default)


def convert_histc(node, importer) -> relax.Var:
    """Converter for ``aten.histc.default``: ``(input, bins=100, min=0, max=0)`` -> ``[bins]`` counts."""
    bb = importer.block_builder
    x = importer.retrieve_args(node)[0]
    bins = int(_arg(node, importer, 1, "bins", 100))
    lo, hi = float(_arg(node, importer, 2, "min", 0)), float(_arg(node, importer, 3, "max", 0))
    dtype = str(x.ty.dtype)
    flat = bb.emit(R.reshape(x, (-1,)))
    if lo == hi:  # the data's range; a single value v counts over [v - 1, v + 1]
        dmin, dmax = bb.emit(R.min(flat)), bb.emit(R.max(flat))
        same = bb.emit(R.equal(dmin, dmax))
        one = relax.const(1.0, dtype)
        low = bb.emit(R.where(same, R.subtract(dmin, one), dmin))
        high = bb.emit(R.where(same, R.add(dmax, one), dmax))
    else:
        low, high = relax.const(lo, dtype), relax.const(hi, dtype)
    # PyTorch's order of operations: (x - min) * bins / (max - min)
    scaled = bb.emit(R.divide(R.multiply(R.subtract(flat, low), relax.const(float(bins), dtype)),
                              R.subtract(high, low)))
    index = bb.emit(R.minimum(R.astype(R.floor(scaled), "int64"), relax.const(bins - 1, "int64")))
    inside = bb.emit(R.logical_and(R.greater_equal(flat, low), R.less_equal(flat, high)))  # NaN: false
    hits = bb.emit(R.equal(R.expand_dims(index, 1), R.arange(0, bins, 1, dtype="int64")))
    counted = bb.emit(R.logical_and(hits, R.expand_dims(inside, 1)))
    return bb.emit(R.sum(R.astype(counted, dtype), axis=[0]))


def convert_bincount(node, importer) -> relax.Var:
    """Converter for ``aten.bincount.default``: ``(input, weights=None, minlength=0)`` at the traced length."""
    bb = importer.block_builder
    x = importer.retrieve_args(node)[0]
    weights = _arg(node, importer, 1, "weights", None)
    val = node.meta["val"]
    length = int(val.shape[0])
    dtype = importer._convert_data_type(val.dtype)
    hits = bb.emit(R.equal(R.expand_dims(R.astype(x, "int64"), 1), R.arange(0, length, 1, dtype="int64")))
    if weights is None:
        return bb.emit(R.sum(R.astype(hits, dtype), axis=[0]))
    per = bb.emit(R.multiply(R.astype(hits, dtype), R.expand_dims(R.astype(weights, dtype), 1)))
    return bb.emit(R.sum(per, axis=[0]))


CONVERTERS = {"histc.default": convert_histc, "bincount.default": convert_bincount}
