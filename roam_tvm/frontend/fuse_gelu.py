"""Fold the explicit tanh-GELU formula back into one ``relax.nn.gelu_tanh`` op before autodiff.

Models written against older PyTorch (HuggingFace GPT-2's ``gelu_new``, many
others) spell GELU out: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``.
``torch.export`` keeps the eight elementwise ops, and Relax ``Gradient`` then
saves the inputs of each one for the backward pass: five hidden-sized tensors
per MLP where ``gelu_tanh``'s gradient (registered in :mod:`.gradients`) needs
only ``x``. Same function; the fused op rounds once instead of eight times, so
results agree with PyTorch to float32 rounding, not bit for bit.

BLOOM factors the polynomial: ``x * 0.5 * (1 + tanh(0.79788456 * x * (1 + 0.044715 * x * x)))``
(its ``GeLUFunction`` saves only ``x`` for a hand-written backward, which ``torch.export``
does not see); that spelling folds too.
"""
from __future__ import annotations

import math

from tvm import relax
from tvm.relax.dpl import is_const, is_op, rewrite_call, wildcard

from .relax_shapes import scalar_value

_CONSTS = {"half": 0.5, "three": 3.0, "k": 0.044715, "s": math.sqrt(2.0 / math.pi), "one": 1.0}
# BLOOM writes sqrt(2/pi) as 0.79788456 (within the 1e-6 the fold allows)
_BLOOM_CONSTS = {"half": 0.5, "k": 0.044715, "s": math.sqrt(2.0 / math.pi), "one": 1.0,
                 "one_in": 1.0}


def _mul(a, b):
    return is_op("relax.multiply")(a, b) | is_op("relax.multiply")(b, a)


def _add(a, b):
    return is_op("relax.add")(a, b) | is_op("relax.add")(b, a)


def _gpt2_pattern():
    """``0.5 x (1 + tanh(s (x + k x**3))))``"""
    x = wildcard()
    c = {name: is_const() for name in _CONSTS}
    inner = _add(x, _mul(is_op("relax.power")(x, c["three"]), c["k"]))
    return _outer(x, c, is_op("relax.tanh")(_mul(inner, c["s"])))


def _bloom_pattern():
    """``0.5 x (1 + tanh(s x (1 + k x x)))``, BLOOM's ``bloom_gelu_forward``."""
    x = wildcard()
    c = {name: is_const() for name in _BLOOM_CONSTS}
    kxx = _mul(_mul(x, c["k"]), x) | _mul(x, _mul(x, c["k"])) | _mul(c["k"], _mul(x, x))
    inner = _mul(_mul(x, c["s"]), _add(kxx, c["one_in"]))
    return _outer(x, c, is_op("relax.tanh")(inner))


def _outer(x, c, t):
    """``0.5 * x * (1 + t)``, its products in any association."""
    one_plus = _add(t, c["one"])
    out = _mul(_mul(x, c["half"]), one_plus) | _mul(x, _mul(c["half"], one_plus)) | \
        _mul(_mul(x, one_plus), c["half"])
    return out, x, c


def fuse_tanh_gelu(func: relax.Function) -> relax.Function:
    """``func`` with every explicit tanh-GELU replaced by ``R.nn.gelu_tanh`` (others untouched)."""
    func = _fold(func, _gpt2_pattern(), _CONSTS, lambda dtype: 1e-6)
    return _fold(func, _bloom_pattern(), _BLOOM_CONSTS, _dtype_eps)


def _dtype_eps(dtype: str) -> float:
    """Relative spacing of ``dtype``'s floats: BLOOM's 0.79788456 is sqrt(2/pi) only to that
    (in float32 the two round to the same constant; in float64 they differ by 3e-8)."""
    return {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23}.get(
        dtype, 2.0 ** -52)


def _fold(func: relax.Function, pattern, expected: dict, tol) -> relax.Function:
    """``func`` with each match of ``pattern`` whose constants are ``expected`` (relative
    error at most ``tol(dtype)``) folded."""
    out, x, consts = pattern

    def rewrite(expr, matches):
        rel = tol(str(matches[x].ty.dtype))
        for name, want in expected.items():
            got = scalar_value(matches[consts[name]])
            if got is None or abs(got - want) > rel * max(1.0, abs(want)):
                return expr
        return relax.op.nn.gelu_tanh(matches[x])

    return rewrite_call(out, rewrite, func)
