"""Train/eval flags of a model's modules, kept as the user set them.

``model.train(flag)`` sets the flag of *every* submodule, so restoring a model with it after a trace
undoes a user's per-module choice (a frozen BatchNorm in eval mode inside a model in train mode) and
mutates the model they handed over. :func:`kept_modes` restores each module's own flag instead, and
:func:`to_train_mode` puts a model in train mode for the training step without overriding such choices.
"""
from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def kept_modes(model) -> Iterator[None]:
    """Within the block, modes may change; on exit every module has its own flag back."""
    modes = [(module, module.training) for module in model.modules()]
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def traced_training(model, module) -> bool:
    """Whether ``module`` of ``model`` ran in train mode in the traced step (see :func:`to_train_mode`)."""
    return module.training or not model.training


def to_train_mode(model) -> None:
    """Train mode for a training step: a model in train mode keeps its submodules' flags (an eval-mode
    BatchNorm keeps using its running statistics, as in PyTorch's step); a model in eval mode is switched
    to train mode as a whole."""
    if not model.training:
        model.train()
