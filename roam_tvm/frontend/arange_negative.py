"""``torch.arange(start, end, step)`` with a negative step, imported with its true length.

TVM 0.27 infers ``arange(12, -12, -1)`` as 26 elements where PyTorch makes 24 (its length
rule rounds the wrong way for a negative step), so the next op that meets PyTorch's shape
fails in the importer: Funnel Transformer's relative positions (``arange(max_dist,
min_dist - 1, -stride)`` then ``expand(rel_pos.size(0), d_model)``) stopped with
"broadcast_to expects the input tensor shape is broadcastable". With constant bounds the
length is PyTorch's, ``ceil((end - start) / step)``, and the values are
``start + step * arange(n)`` (how PyTorch computes them). Other aranges go to TVM's converter.
"""
from __future__ import annotations

import math
from numbers import Number

from tvm import relax
from tvm.relax import op as R

__all__ = ["CONVERTERS", "convert_arange"]


def _bounds(node):
    """``(start, end, step)`` of an ``arange.start_step`` node (positional or keyword)."""
    names = ("start", "end", "step")
    vals = list(node.args[:3]) + [node.kwargs.get(k) for k in names[len(node.args):]]
    return vals[0], vals[1], (1 if vals[2] is None else vals[2])


def convert_arange(node, importer) -> relax.Var:
    """Converter for ``aten.arange.start_step``: a negative constant step at PyTorch's length."""
    start, end, step = _bounds(node)
    if not all(isinstance(v, Number) and not isinstance(v, bool) for v in (start, end, step)) or step >= 0:
        return importer._arange(node)
    if "dtype" in node.kwargs:
        dtype = importer._convert_data_type(str(node.kwargs["dtype"]), importer.env)
    elif any(isinstance(v, float) for v in (start, end, step)):
        import torch

        dtype = importer._convert_data_type(torch.get_default_dtype())
    else:
        dtype = "int64"
    n = max(0, math.ceil((end - start) / step))
    bb = importer.block_builder
    # indices in the accumulation type, then start + step * i (a float step stays a float)
    acc = "float64" if isinstance(step, float) or isinstance(start, float) else "int64"
    ramp = bb.emit(R.arange(0, n, 1, dtype=acc))
    vals = bb.emit(R.add(R.multiply(ramp, relax.const(step, acc)), relax.const(start, acc)))
    return vals if acc == dtype else bb.emit(R.astype(vals, dtype))


CONVERTERS = {"arange.start_step": convert_arange}
