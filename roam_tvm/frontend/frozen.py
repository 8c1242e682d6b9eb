"""Frozen parameters (``requires_grad=False``): constants of the training step.

A frozen parameter is an input of ``train_step`` (kind ``"frozen"`` in its signature) that
the step reads and never writes: ``Gradient`` is not asked for its gradient, it gets no
optimizer state and no update. What the backward needs only for a frozen parameter's
gradient (the activations a frozen weight's gradient would read) is dead code and goes, so
fine-tuning a small head or adapter on a frozen backbone keeps far less than full training.
"""

from __future__ import annotations

from .errors import UnsupportedError


def split_frozen(names, params: dict, gradless=()) -> tuple[list, list]:
    """``names`` (parameters that reach the loss) split into ``(trainable, frozen)``: frozen are
    those with ``requires_grad=False`` and the ``gradless`` ones (no gradient reaches them).

    Raises :class:`UnsupportedError` when nothing is left to train.
    """
    gradless = set(gradless)
    trainable = [n for n in names if params[n].requires_grad and n not in gradless]
    frozen = [n for n in names if not params[n].requires_grad or n in gradless]
    if not names:
        raise UnsupportedError("no parameter of the model reaches the loss: there is nothing "
                               "to train. Check that the loss depends on the model's output.")
    if not trainable:
        raise UnsupportedError(
            f"every parameter that reaches the loss has requires_grad=False ({len(frozen)} "
            f"frozen, e.g. {frozen[:3]}): there is nothing to train. Set requires_grad=True "
            "on the parameters to fine-tune (e.g. a head or adapter).")
    return trainable, frozen


def check_trainable(params: dict) -> None:
    """Before any slow work: at least one parameter must have ``requires_grad=True``."""
    if params and not any(p.requires_grad for p in params.values()):
        raise UnsupportedError(
            f"every parameter of the model has requires_grad=False ({len(params)} frozen): "
            "there is nothing to train. Set requires_grad=True on the parameters to fine-tune "
            "(e.g. a head or adapter).")
