"""Activation checkpointing (``torch.utils.checkpoint``) in a model being exported: counted and named.

``torch.export`` traces a checkpointed function as its plain forward: the exported graph carries no
mark of the region, so the imported step keeps the region's activations for the backward, where
PyTorch's eager step frees them and recomputes them (torchvision's DenseNet ``memory_efficient=True``,
Hugging Face's ``gradient_checkpointing_enable()``, a user's own ``checkpoint(...)``). The planned
step is still correct, but it is a different step from PyTorch's, and PyTorch's peak can then be
below the plan. :func:`count_checkpoints` counts the checkpoint calls made while tracing (both the
non-reentrant generator and the reentrant ``CheckpointFunction``, looked up by ``checkpoint`` at call
time), and :func:`warn_checkpoints` says what the count means and the way out: a byte budget
(``--budget`` / ``RoamRemat(budget=...)``), with which roam picks its own recomputation.

While counting, a region runs as the plain call of its function. Left to torch, the export marks a
reentrant region, and the inner one of two nested non-reentrant regions (Hugging Face Swin's stage and
layer), as ``set_grad_enabled(False)``: its outputs would be detached and the step would train nothing
through them.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterator


class CheckpointCount:
    """How many ``torch.utils.checkpoint`` regions ran inside :func:`count_checkpoints`."""

    def __init__(self) -> None:
        self.calls = 0


@contextlib.contextmanager
def count_checkpoints() -> Iterator[CheckpointCount]:
    """Within the block, every ``torch.utils.checkpoint.checkpoint`` call is counted and runs its
    function plainly (no no-grad forward, no saved-tensor hooks: the gradient flows as without it)."""
    from torch.utils import checkpoint as ckpt

    count = CheckpointCount()
    generator = ckpt._checkpoint_without_reentrant_generator
    function = ckpt.CheckpointFunction

    def counted_generator(*_args, **_kwargs):
        # checkpoint() advances this once before calling the function and once after it
        count.calls += 1
        yield

    class CountedFunction(function):
        @classmethod
        def apply(cls, run_function, _preserve_rng_state, *args):
            count.calls += 1
            return run_function(*args)

    ckpt._checkpoint_without_reentrant_generator = counted_generator
    ckpt.CheckpointFunction = CountedFunction
    try:
        yield count
    finally:
        ckpt._checkpoint_without_reentrant_generator = generator
        ckpt.CheckpointFunction = function


def warn_checkpoints(count: CheckpointCount, model_name: str) -> None:
    """A ``RuntimeWarning`` when the traced forward ran checkpoint regions (see the module docstring)."""
    if not count.calls:
        return
    warnings.warn(
        f"{model_name}'s forward runs {count.calls} torch.utils.checkpoint region(s) (activation "
        "checkpointing: memory_efficient=True, gradient_checkpointing_enable(), checkpoint(...)). "
        "torch.export traces them as the plain forward: the step is planned WITHOUT their "
        "recomputation and keeps their activations, which PyTorch's step frees and recomputes, so "
        "PyTorch's peak can be below the plan. To trade compute for memory in the planned step, give "
        "roam a byte budget (roam-tvm compare/plan --budget B, or roam_tvm.remat.RoamRemat(budget=B)); "
        "to compare like with like, turn the checkpointing off.", RuntimeWarning, stacklevel=3)
