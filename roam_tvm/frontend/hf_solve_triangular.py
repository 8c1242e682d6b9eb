"""Gated-DeltaNet decoders (Qwen3-Next, Qwen3.5, OLMo-Hybrid, ...) traced with their triangular solve.

``transformers`` solves each chunk's UT system with ``torch.linalg.solve_triangular`` in eager, but under
``torch.export`` (``is_torchdynamo_exporting()``) switches to a ``chunk_size``-step forward-substitution loop
that writes one row of the system per step: each write is a copy of the whole ``[B, H, N, C, C]`` system,
kept for the backward, so the planned step held some sixty copies that PyTorch's eager step never makes
(1.5-1.9x its peak on those models). :func:`triangular_solves_traced` makes such a modeling module see
``False`` while the model is exported, so the solve is traced as in eager and decomposed into
``2 log2(C)`` matrix products (``torch_decompositions._solve_triangular``). Only modules whose one
``is_torchdynamo_exporting()`` call guards that solve are switched.
"""
from __future__ import annotations

import inspect

from .module_globals import swapped_globals

__all__ = ["triangular_solves_traced"]

_SWITCHES: dict = {}  # module name -> whether its export check only guards a triangular solve


def _guards_only_a_solve(module) -> bool:
    name = module.__name__
    if name not in _SWITCHES:
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            source = ""
        _SWITCHES[name] = "solve_triangular" in source and source.count("is_torchdynamo_exporting()") == 1
    return _SWITCHES[name]


def triangular_solves_traced(model):
    """While active, the modeling modules of ``model``'s layers whose export check only picks the
    substitution loop over ``solve_triangular`` take the solve; yields the modules switched."""
    return swapped_globals(model, "is_torchdynamo_exporting", lambda: False, _guards_only_a_solve)
