"""Stochastic depth (drop-path) modules traced as the identity, as dropout is, with a warning.

Hugging Face's Swin, ConvNeXt, BEiT, Swin-v2 and others default to ``drop_path_rate=0.1``; their
``*DropPath`` modules (and timm's ``DropPath``, torchvision's ``StochasticDepth``, and user modules named
so) draw ``torch.rand`` per sample in training mode, which a planned step cannot (random_ops.py refused it:
"the forward draws random numbers"). Dropout is imported as the identity with a warning (TVM 0.27 has no
random masks); stochastic depth is now treated the same way: while the model is exported and checked,
each such module with a drop probability above 0 runs in evaluation mode, where every one of them returns
its input unchanged. Random draws elsewhere are still refused (random_ops.py).
"""
from __future__ import annotations

import contextlib
import warnings

__all__ = ["stochastic_depth_off", "warn_stochastic_depth"]

_NAMES = ("droppath", "stochasticdepth")
_PROBABILITY_ATTRS = ("drop_prob", "drop_path_prob", "drop_rate", "p", "prob")


def _probability(module) -> float | None:
    for attr in _PROBABILITY_ATTRS:
        value = getattr(module, attr, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _drop_path_modules(model) -> list:
    """``(module, probability)`` of every drop-path module of ``model`` that drops in training mode."""
    found = []
    for module in model.modules():
        name = type(module).__name__.lower().replace("_", "")
        if any(n in name for n in _NAMES):
            p = _probability(module)
            if p is None or p > 0:
                found.append((module, p))
    return found


@contextlib.contextmanager
def stochastic_depth_off(model):
    """Run ``model``'s drop-path modules in evaluation mode (the identity) inside the block.

    Yields the list of ``(class name, probability)`` switched off; each module's training flag is put back.
    """
    found = _drop_path_modules(model)
    flags = [m.training for m, _ in found]
    for m, _ in found:
        m.training = False
    try:
        yield [(type(m).__name__, p) for m, p in found]
    finally:
        for (m, _), flag in zip(found, flags):
            m.training = flag


def warn_stochastic_depth(switched: list, model_name: str) -> None:
    """Say that the step has no stochastic depth where the model had some."""
    if not switched:
        return
    kinds = sorted({name for name, _ in switched})
    ps = sorted({round(p, 4) for _, p in switched if p is not None})
    warnings.warn(
        f"{model_name}: {len(switched)} stochastic-depth module(s) ({', '.join(kinds)}; drop probability "
        f"{ps or '?'}) are imported as the identity, as dropout is: the step is planned and runs WITHOUT "
        "drop-path (PyTorch's step drops whole residual branches at random). For a faithful step set the "
        "rate to 0 (Hugging Face / timm: drop_path_rate=0.0).", RuntimeWarning, stacklevel=3)
