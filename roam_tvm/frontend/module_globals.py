"""A global of the modeling modules that define a model's layers, swapped while the model is traced.

Hugging Face modeling files pick some behaviour through module-level functions (the export check that
chooses a substitution loop, a random RoPE augmentation); :func:`swapped_globals` replaces one such
function in every module that defines one of the model's layers and puts it back on exit.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

__all__ = ["swapped_globals"]


@contextlib.contextmanager
def swapped_globals(model, name: str, replacement, applies: Callable[[object], bool] = lambda module: True
                    ) -> Iterator[list]:
    """While active, ``name`` is ``replacement`` in each module defining a layer of ``model`` whose ``name``
    is callable and for which ``applies(module)``; yields those modules."""
    modules = {sys.modules.get(type(m).__module__) for m in model.modules()} - {None}
    swapped = [(m, getattr(m, name)) for m in modules if callable(getattr(m, name, None)) and applies(m)]
    for module, _ in swapped:
        setattr(module, name, replacement)
    try:
        yield [m for m, _ in swapped]
    finally:
        for module, original in swapped:
            setattr(module, name, original)
