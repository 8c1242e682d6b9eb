"""Value checks in a forward: ``assert (x >= 0).all()``, ``if labels.max() >= vocab: raise ...``.

Such a check reads a tensor's *value* into Python, which ``torch.export`` cannot trace
(``GuardOnDataDependentSymNode``): F.gaussian_nll_loss checks ``var < 0`` this way, Hugging Face's CTC
heads (wav2vec2, HuBERT, WavLM, ...) check the labels against the vocabulary. A check only decides
whether the step raises; the step it guards computes the same either way. So:

1. The export runs with ``Tensor.__bool__`` watched. A data-dependent ``bool`` at a *check site* (the
   test of an ``assert``, or of an ``if`` without ``else`` whose body only raises; found from the
   caller's source with :mod:`ast`) is noted, and the export fails as before.
2. :func:`record_checks` then runs the model eagerly once on the example (``no_grad``, buffers
   restored) and records the outcome of every check site it meets: the one that did not raise.
3. The export is retried with those outcomes replayed at the check sites. A site that took both
   outcomes, or a data-dependent ``bool`` anywhere else (a branch between two computations), still
   fails: the trace would be specialised to the example's values.

The traced step then has no check: :func:`warn_checks` says which ones were checked on the example only.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import logging
import sys
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterator

__all__ = ["ValueChecks", "watch_value_checks", "record_checks", "warn_checks"]


@dataclass
class ValueChecks:
    """Check sites (``(file, line)``) met while tracing and their recorded outcomes."""

    pending: set = field(default_factory=set)  # sites whose bool was data-dependent in the trace
    outcomes: dict = field(default_factory=dict)  # site -> set of bools seen eagerly
    replayed: set = field(default_factory=set)  # sites answered from ``outcomes``


_SITES: dict = {}  # (code, line) -> whether it is a check site


def _is_check_site(code, line: int) -> bool:
    key = (code, line)
    if key not in _SITES:
        _SITES[key] = _find_check(code, line)
    return _SITES[key]


def _find_check(code, line: int) -> bool:
    try:
        lines, start = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return False
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return False
    rel = line - max(start, 1) + 1
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.lineno <= rel <= node.end_lineno:
            return True
        if (isinstance(node, ast.If) and not node.orelse and node.test.lineno <= rel <= node.test.end_lineno
                and all(isinstance(s, ast.Raise) for s in node.body)):
            return True
    return False


def _site(frame) -> tuple[str, int, object]:
    return frame.f_code.co_filename, frame.f_lineno, frame.f_code


@contextlib.contextmanager
def _bool_hook(hook: Callable) -> Iterator[None]:
    import torch

    had_own = "__bool__" in torch.Tensor.__dict__
    original = torch.Tensor.__bool__
    torch.Tensor.__bool__ = lambda self: hook(self, original)
    try:
        yield
    finally:
        if had_own:
            torch.Tensor.__bool__ = original
        else:
            del torch.Tensor.__bool__


@contextlib.contextmanager
def watch_value_checks(checks: ValueChecks) -> Iterator[ValueChecks]:
    """While tracing: answer data-dependent ``bool`` at check sites from ``checks.outcomes``, note
    the other check sites in ``checks.pending``."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    def hook(tensor, original):
        try:
            return original(tensor)
        except GuardOnDataDependentSymNode:
            file, line, code = _site(sys._getframe(2))
            if not _is_check_site(code, line):
                raise
            seen = checks.outcomes.get((file, line))
            if seen is not None and len(seen) == 1:
                checks.replayed.add((file, line))
                return next(iter(seen))
            checks.pending.add((file, line))
            raise

    # torch logs a warning for each replayed check's unbacked value ("Unable to find user code"):
    # the check is named once, by warn_checks
    shapes_log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    level = shapes_log.level
    shapes_log.setLevel(logging.ERROR)
    try:
        with _bool_hook(hook):
            yield checks
    finally:
        shapes_log.setLevel(level)


def record_checks(run: Callable[[], object], module, checks: ValueChecks) -> None:
    """Run ``run()`` eagerly (no gradients; ``module``'s buffers restored) and record the outcome
    of every ``bool`` taken at a check site."""
    import torch

    def hook(tensor, original):
        value = original(tensor)
        file, line, code = _site(sys._getframe(2))
        # every check site, not only the pending ones: a trace stops at its first unanswered one
        if (file, line) in checks.pending or _is_check_site(code, line):
            checks.outcomes.setdefault((file, line), set()).add(bool(value))
        return value

    with buffers_restored(module), torch.no_grad(), _bool_hook(hook):
        run()


@contextlib.contextmanager
def buffers_restored(module) -> Iterator[None]:
    """``module``'s buffers (a BatchNorm's running statistics) as they were before, after an eager check run."""
    import torch

    saved = {k: v.detach().clone() for k, v in module.state_dict(keep_vars=True).items()
             if not isinstance(v, torch.nn.Parameter)}
    try:
        yield
    finally:
        with torch.no_grad():
            current = module.state_dict(keep_vars=True)
            for k, v in saved.items():
                current[k].copy_(v)


def warn_checks(checks: ValueChecks, model_name: str) -> None:
    """A ``RuntimeWarning`` naming the value checks the traced step leaves out."""
    if not checks.replayed:
        return
    sites = ", ".join(f"{file.rsplit('/', 1)[-1]}:{line}" for file, line in sorted(checks.replayed))
    warnings.warn(
        f"{model_name} checks tensor values in Python ({sites}); each passed on the example inputs, which "
        "were checked eagerly, and the planned step leaves the checks out (it computes the same). Check new "
        "batches yourself if they may break them.", RuntimeWarning, stacklevel=3)
