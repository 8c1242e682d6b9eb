"""``torch.histc``, which TVM 0.27's importer lacks, as a static count over ``bins`` bins.

Hugging Face's MoE load-balancing loss (``output_router_logits=True``: Mixtral, Qwen-MoE, DBRX, Jamba,
OLMoE and some thirty more) counts the tokens each expert got with
``torch.histc(selected_experts.float(), bins=num_experts, min=0, max=num_experts)``; the importer stopped on
it ("Unsupported function types ['histc.default']"). The count is a constant-size reduction: each element's
bin is ``floor((x - min) * bins / (max - min))`` (an element equal to ``max`` goes to the last bin, elements
outside ``[min, max]`` and NaNs are not counted, as in PyTorch), compared with every bin index and summed.
With ``min == max`` PyTorch takes the data's own range (widened by 1 each side if it is a single value); so
does this. The result carries no gradient (PyTorch's histc has none).
"""
from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

__all__ = ["CONVERTERS", "convert_histc"]


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


CONVERTERS = {"histc.default": convert_histc}
