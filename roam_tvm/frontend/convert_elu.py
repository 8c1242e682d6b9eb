"""``aten.elu`` with its ``scale`` and ``input_scale``: SELU and CELU come to it that way.

``torch.export`` decomposes ``F.selu`` to ``elu(x, alpha=1.6733, scale=1.0507)`` and
``F.celu`` to ``elu(x, alpha, scale=1, input_scale=1/alpha)``. TVM 0.27's converter reads
only ``alpha`` and emits ``relu(x) - alpha * relu(1 - exp(x))``: SELU comes out without its
``1.0507`` (a wrong forward and gradient). This converter computes what PyTorch's kernel
does, ``where(x > 0, x * scale, (exp(x * input_scale) - 1) * (alpha * scale))``; the
backward then keeps only ``x``, the rest redone from it (backward_elementwise.py), where
PyTorch's ``elu_backward`` keeps ``x`` too.
"""
from __future__ import annotations

from tvm import relax
from tvm.relax import op as R


def _arg(node, args, i: int, name: str, default: float) -> float:
    value = args[i] if len(args) > i else node.kwargs.get(name, default)
    if not isinstance(value, (int, float)):
        raise NotImplementedError(
            f"aten.elu with a tensor {name} ({value!r}) is not supported: pass a Python "
            "number, as nn.ELU / nn.SELU / nn.CELU do")
    return float(value)


def convert_elu(node, importer) -> relax.Expr:
    """The Relax expression of one ``aten.elu.default`` node (see the module docstring)."""
    args = importer.retrieve_args(node)
    x = args[0]
    alpha = _arg(node, args, 1, "alpha", 1.0)
    scale = _arg(node, args, 2, "scale", 1.0)
    input_scale = _arg(node, args, 3, "input_scale", 1.0)
    dtype = str(x.ty.dtype)

    def c(v: float) -> relax.Expr:
        return relax.const(v, dtype)

    inner = x if input_scale == 1.0 else R.multiply(x, c(input_scale))
    negative = R.multiply(R.subtract(R.exp(inner), c(1.0)), c(alpha * scale))
    positive = x if scale == 1.0 else R.multiply(x, c(scale))
    return importer.block_builder.emit(R.where(R.greater(x, c(0.0)), positive, negative))
