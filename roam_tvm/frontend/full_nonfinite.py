"""``torch.full(shape, -inf)`` (``nn.Transformer.generate_square_subsequent_mask``) and
``torch.full_like(x, inf)`` that TVM can build.

TVM 0.27 legalizes ``R.full`` with ``topi.full``, which checks ``"float" in dtype`` for an
infinite or NaN fill value while being handed a dtype object, not a string: building any
step that holds ``R.full(shape, -inf)`` fails ("argument of type 'PrimType' is not
iterable"). The same tensor is ``broadcast_to`` of a scalar constant, which legalizes
without that check; finite fills keep TVM's own converters.
"""
from __future__ import annotations

import math

from tvm import relax
from tvm.relax import op as R


def convert_full(node, importer) -> relax.Var:
    """Converter for ``aten.full.default``: a non-finite fill becomes ``broadcast_to``."""
    args = importer.retrieve_args(node)
    value = args[1]
    if not isinstance(value, float) or math.isfinite(value):
        return importer._full(node)
    shape = list(args[0]) if isinstance(args[0], (list, tuple)) else [args[0]]
    return _filled(node, importer, value, shape)


def convert_full_like(node, importer) -> relax.Var:
    """Converter for ``aten.full_like.default``: a non-finite fill becomes ``broadcast_to``."""
    args = importer.retrieve_args(node)
    value = args[1]
    if not isinstance(value, float) or math.isfinite(value):
        return importer._full_like(node)
    return _filled(node, importer, value, list(args[0].ty.shape.values))


def _filled(node, importer, value: float, shape) -> relax.Var:
    val = node.meta.get("val")  # the output's dtype, as torch traced it
    dtype = str(val.dtype).replace("torch.", "") if val is not None else "float32"
    return importer.block_builder.emit(R.broadcast_to(relax.const(value, dtype), shape))
