"""Losses by name, with PyTorch's conventions: ``cross_entropy`` and ``mse``.

``cross_entropy`` follows ``F.cross_entropy``: the classes are dimension 1 of the output, so a
segmentation output ``[B, C, H, W]`` takes ``[B, H, W]`` class indices (or ``[B, C, H, W]``
probabilities). The one exception is the language-model layout: logits ``[B, T, V]`` with
``[B, T]`` class indices, recognised from the target's shape, put the classes last. Where the
target's shape fits both readings (``[B, T, T]`` logits with ``[B, T]`` targets) the loss is
refused: the user passes a callable ``loss(output, *targets)`` that says what is meant.

Several targets: the per-target losses are summed (the convention shared with ``roam_tvm.zoo``).
"""

from __future__ import annotations

from typing import Callable, Sequence

from .errors import UnsupportedError

LOSS_NAMES = ("cross_entropy", "mse")
_CALLABLE_HINT = ("pass a callable loss(output, *targets) -> scalar tensor instead (as from_torch's "
                  "loss=, or as the factory's 4th element / 'loss' key for roam-tvm)")


class LossShapeError(UnsupportedError):
    """The output and target shapes fit no convention of the named loss (or fit two)."""


def _shape(t) -> tuple:
    return tuple(t.shape)  # no int(): a symbolic (dynamic) dim must stay symbolic under torch.export


def class_dim(out_shape: Sequence[int], target_shape: Sequence[int], class_indices: bool) -> int:
    """The dimension of the output that holds the classes for ``cross_entropy``.

    Parameters
    ----------
    out_shape : sequence of int
        The model output (logits) shape.
    target_shape : sequence of int
        The target's shape.
    class_indices : bool
        True for integer class-index targets, False for class-probability targets.

    Returns
    -------
    int
        1 (``F.cross_entropy``'s rule), ``len(out_shape) - 1`` for language-model logits, or 0 for
        an unbatched ``[C]`` output.

    Raises
    ------
    LossShapeError
        The shapes fit no convention, or (class indices only) fit two different ones.
    """
    out, tgt = tuple(out_shape), tuple(target_shape)
    rank = len(out)
    if rank == 0:
        raise LossShapeError("cross_entropy: the model output is a scalar; it needs class scores "
                             f"([B, C, ...] logits); {_CALLABLE_HINT}")
    if not class_indices:
        if tgt != out:
            raise LossShapeError(f"cross_entropy: probability targets must have the output's shape {list(out)}, "
                                 f"got {list(tgt)}; for class indices use an integer target; {_CALLABLE_HINT}")
        return 0 if rank == 1 else 1
    if rank == 1:
        if tgt != ():
            raise LossShapeError(f"cross_entropy: an unbatched output {list(out)} takes a scalar class index, "
                                 f"got a target of shape {list(tgt)}; {_CALLABLE_HINT}")
        return 0
    torch_rule = tgt == out[:1] + out[2:]  # F.cross_entropy: [B, C, d1, ...] with [B, d1, ...]
    lm_rule = rank >= 3 and tgt == out[:-1]  # [B, T, V] logits with [B, T] targets
    if torch_rule and lm_rule:
        raise LossShapeError(
            f"cross_entropy is ambiguous for output {list(out)} with targets {list(tgt)}: the classes could be "
            f"dimension 1 (F.cross_entropy's rule, {out[1]} classes) or the last dimension (language-model "
            f"logits, {out[-1]} classes); {_CALLABLE_HINT}, e.g. "
            "lambda out, y: F.cross_entropy(out.flatten(0, -2), y.flatten())")
    if torch_rule:
        return 1
    if lm_rule:
        return rank - 1
    expect = [list(out[:1] + out[2:])] + ([list(out[:-1])] if rank >= 3 else [])
    raise LossShapeError(
        f"cross_entropy: class-index targets of shape {list(tgt)} do not fit the output {list(out)}; expected "
        + " or ".join(str(e) for e in expect) + " (classes in dimension 1, as F.cross_entropy"
        + (", or last for language-model logits" if rank >= 3 else "") + f"); {_CALLABLE_HINT}")


def _cross_entropy(out, targets):
    import torch
    F = torch.nn.functional

    total = None
    for t in targets:
        if t.is_floating_point():
            dim = class_dim(_shape(out), _shape(t), class_indices=False)
        elif t.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            dim = class_dim(_shape(out), _shape(t), class_indices=True)
        else:
            raise LossShapeError(f"cross_entropy: targets must be integer class indices or float probabilities, "
                                 f"got {t.dtype}; {_CALLABLE_HINT}")
        if dim == out.dim() - 1 and out.dim() > 2:  # language-model logits: rows of V classes
            term = F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1).long())
        else:  # F.cross_entropy reads dimension 1 itself (no transposed copy of the logits)
            term = F.cross_entropy(out, t if t.is_floating_point() else t.long())
        total = term if total is None else total + term
    return total


def _mse(out, targets):
    import torch
    F = torch.nn.functional

    total = None
    for t in targets:
        if _shape(t) != _shape(out):  # F.mse_loss would broadcast (with only a warning)
            raise LossShapeError(f"mse: the target's shape {list(_shape(t))} differs from the output's "
                                 f"{list(_shape(out))}; reshape the target, or {_CALLABLE_HINT}")
        term = F.mse_loss(out, t)
        total = term if total is None else total + term
    return total


def make_loss_fn(loss) -> Callable:
    """``loss(output, *targets) -> scalar`` for a loss name, or the callable itself.

    Raises
    ------
    UnsupportedError
        ``loss`` is neither a known name nor callable.
    """
    if callable(loss):
        return loss
    if loss in ("cross_entropy", "mse"):
        fn = (lambda out, *targets: _cross_entropy(out, targets)) if loss == "cross_entropy" else \
            (lambda out, *targets: _mse(out, targets))
        fn.named_loss = True  # reads the output's first tensor (loss_input.apply_loss)
        return fn
    raise UnsupportedError(f"unknown loss {loss!r}: use {' or '.join(map(repr, LOSS_NAMES))}, or "
                           "a callable loss(output, *targets) -> scalar tensor")
