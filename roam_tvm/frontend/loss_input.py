"""What a loss reads from the model's output.

A named loss (``"cross_entropy"``, ``"mse"``) reads one tensor: the output itself, or its ``logits`` /
``last_hidden_state`` / first element (:func:`first_output`). A user's loss callable is written for what
the model returns, as ``loss(model(x), y)`` is in PyTorch: a model returning ``(logits, aux_loss)`` or
``{"logits": ..., "aux_logits": ...}`` gets a callable that unpacks it, and giving such a callable only
the first tensor silently misreads it (``logits, aux = out`` unpacks a batch of 2). So a callable gets the
whole output first, and the first tensor only when it fails on the whole one (a callable written for the
tensor, e.g. ``F.cross_entropy(out, y)`` with a Hugging Face ``ModelOutput``).

Both the exported step (``export.with_loss``) and PyTorch's own step (``zoo.LossWrapper``) call
:func:`apply_loss`, so the two steps train on the same loss.
"""
from __future__ import annotations

from typing import Any, Callable


class LossCallableError(Exception):
    """The loss callable failed on the model's whole output and on its first tensor."""


def first_output(out: Any):
    """The tensor a named loss applies to: logits / last hidden state / first element.

    Parameters
    ----------
    out : torch.Tensor, ModelOutput, dict, tuple or list
        What the model returned.

    Returns
    -------
    torch.Tensor
    """
    import torch

    from .errors import UnsupportedError

    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state"):
        v = getattr(out, key, None)
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(out, dict) and isinstance(out.get(key), torch.Tensor):
            return out[key]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)) and out:
        return first_output(out[0])
    raise UnsupportedError(f"cannot find a tensor in the model output of type {type(out).__name__}")


def apply_loss(loss_fn: Callable, out: Any, targets: tuple, named: bool) -> Any:
    """``loss_fn`` on the model output ``out`` and the targets.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(output, *targets) -> scalar``.
    out : Any
        What the model returned.
    targets : tuple of torch.Tensor
    named : bool
        ``loss_fn`` is a named loss's (it reads :func:`first_output`); else a user callable, which gets
        the whole output, or the first tensor when it fails on the whole one.

    Raises
    ------
    LossCallableError
        A user callable failed on both (the message carries both errors).
    """
    import torch

    if named or isinstance(out, torch.Tensor):
        return loss_fn(first_output(out), *targets)
    try:
        return loss_fn(out, *targets)
    except Exception as whole:  # noqa: BLE001 - maybe a callable written for the first tensor
        try:
            return loss_fn(first_output(out), *targets)
        except Exception as first:  # noqa: BLE001 - report both readings
            raise LossCallableError(
                f"the loss callable failed on the model's whole output (a {type(out).__name__}: "
                f"{type(whole).__name__}: {str(whole).strip()[:200]}) and on its first tensor "
                f"({type(first).__name__}: {str(first).strip()[:200]})") from first
