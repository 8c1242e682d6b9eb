"""Fold the explicit tanh-GELU formula back into one ``relax.nn.gelu_tanh`` op before autodiff.

Models written against older PyTorch (HuggingFace GPT-2's ``gelu_new``, many
others) spell GELU out: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``.
``torch.export`` keeps the eight elementwise ops, and Relax ``Gradient`` then
saves the inputs of each one for the backward pass: five hidden-sized tensors
per MLP where ``gelu_tanh``'s gradient (registered in :mod:`.gradients`) needs
only ``x``. Same function; the fused op rounds once instead of eight times, so
results agree with PyTorch to float32 rounding, not bit for bit.
"""
from __future__ import annotations

import math

from tvm import relax
from tvm.relax.dpl import is_const, is_op, rewrite_call, wildcard

from .relax_shapes import scalar_value

_CONSTS = {"half": 0.5, "three": 3.0, "k": 0.044715, "s": math.sqrt(2.0 / math.pi), "one": 1.0}


def _mul(a, b):
    return is_op("relax.multiply")(a, b) | is_op("relax.multiply")(b, a)


def _add(a, b):
    return is_op("relax.add")(a, b) | is_op("relax.add")(b, a)


def _pattern():
    x = wildcard()
    c = {name: is_const() for name in _CONSTS}
    inner = _add(x, _mul(is_op("relax.power")(x, c["three"]), c["k"]))
    t = is_op("relax.tanh")(_mul(inner, c["s"]))
    one_plus = _add(t, c["one"])
    out = _mul(_mul(x, c["half"]), one_plus) | _mul(x, _mul(c["half"], one_plus)) | \
        _mul(_mul(x, one_plus), c["half"])
    return out, x, c


def fuse_tanh_gelu(func: relax.Function) -> relax.Function:
    """``func`` with every explicit tanh-GELU replaced by ``R.nn.gelu_tanh`` (others untouched)."""
    out, x, consts = _pattern()

    def rewrite(expr, matches):
        for name, want in _CONSTS.items():
            got = scalar_value(matches[consts[name]])
            if got is None or abs(got - want) > 1e-6 * max(1.0, abs(want)):
                return expr
        return relax.op.nn.gelu_tanh(matches[x])

    return rewrite_call(out, rewrite, func)
