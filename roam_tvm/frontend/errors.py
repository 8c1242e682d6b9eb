"""Errors raised by the frontend.

Every error names what went wrong (the op, tensor or dim) and says what to do.
They derive from :class:`FrontendError`, so callers can catch one type.
"""

from __future__ import annotations


class FrontendError(Exception):
    """Base class of every error the frontend raises on bad input."""


class TraceError(FrontendError):
    """``torch.export`` could not trace the model (with its loss)."""


class ImportError_(FrontendError):  # noqa: N801 - avoid shadowing the builtin
    """TVM's PyTorch importer rejected the exported program (e.g. an unsupported op)."""


class MissingGradientError(FrontendError):
    """A Relax op on the path from a parameter to the loss has no registered gradient."""


class DynamicShapeError(FrontendError):
    """A tensor has a dynamic dim without an upper bound."""


class MetaWeightsError(FrontendError):
    """Real values were requested from a model built on the ``meta`` device."""


class UnsupportedError(FrontendError):
    """A feature (optimizer option, loss, layer setting) the frontend does not support."""


def model_frame(frames):
    """The innermost of ``frames`` (``traceback.FrameSummary``) in the model's own code -- not torch's,
    not roam-tvm's, not generated (``<string>``, ``<frozen ...>``) and not ``contextlib``'s -- or None.

    Errors name that line, so the user sees where in *their* code a problem starts."""
    import contextlib
    import os

    import torch

    skip = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))
    own = [f for f in frames if not f.filename.startswith(skip) and not f.filename.startswith("<")
           and f.filename != contextlib.__file__]
    return own[-1] if own else None
