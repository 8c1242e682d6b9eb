"""Hugging Face DINOv3-style RoPE coordinate augmentation, traced as the identity (as dropout is).

DINOv3 (and EoMT-DINOv3, Sapiens2) shift, jitter and rescale the patch coordinates its rotary embedding
reads by random factors while training (``augment_patches_center_coordinates``, on by default:
``pos_embed_rescale=2.0``). A random draw cannot be planned for (``random_ops.py`` refuses it), and the
augmentation changes no tensor's size, so, as with dropout and drop-path, :func:`rope_augmentation_off`
makes the module's function the identity while the model is traced and checked, and
:func:`warn_rope_augmentation` says so.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

from .module_globals import swapped_globals

__all__ = ["rope_augmentation_off", "warn_rope_augmentation"]

_AUGMENT = "augment_patches_center_coordinates"


def _unaugmented(coords, *args, **kwargs):
    return coords


@contextlib.contextmanager
def rope_augmentation_off(model) -> Iterator[list]:
    """While active, the modeling modules of ``model``'s layers that augment RoPE coordinates do not;
    yields the names of the configs' augmentation settings that were on."""
    settings = sorted({f"{k}={getattr(cfg, k)}" for m in model.modules() for cfg in [getattr(m, "config", None)]
                       for k in ("pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale")
                       if getattr(cfg, k, None) is not None})
    with swapped_globals(model, _AUGMENT, _unaugmented) as swapped:
        yield settings if swapped and model.training else []


def warn_rope_augmentation(settings: list, model_name: str) -> None:
    """Say that the step has no RoPE coordinate augmentation where the model's config asks for one."""
    if not settings:
        return
    warnings.warn(
        f"{model_name}: the rotary embedding's random patch-coordinate augmentation ({', '.join(settings)}) is "
        "imported as the identity, as dropout is: the step is planned and runs WITHOUT it. For a faithful step "
        "set those config fields to None.", RuntimeWarning, stacklevel=3)
