"""PyTorch's own CTC loss in the simulated eager step, by the tensors its kernel allocates.

The simulation runs the step on fake tensors, and ``aten._ctc_loss`` cannot run there: its
``log_alpha`` is sized by the longest target, read from the target lengths' *values*
("DynamicOutputShapeException"). PyTorch's native CTC (CPU and CUDA) allocates

* in the forward: the per-sequence losses ``[N]`` and ``log_alpha`` ``[N, T, 2 S + 1]``,
  kept for the backward with ``log_probs``;
* in the backward: the gradient ``[T, N, C]`` and ``log_beta`` (the shape of ``log_alpha``),
  both live while the gradient is formed.

:func:`eager_ctc_sizes` swaps ``F.ctc_loss`` for a stand-in that allocates exactly these
(``S`` is the padded targets' width, the longest a target can be) and reads them where the
kernels do, so the recorder sees PyTorch's CTC memory; the values are not computed (fake
tensors carry none). The reduction (``mean`` divides by the target lengths) runs as
PyTorch's ``ctc_loss`` runs it, in ordinary ops.
"""
from __future__ import annotations

import contextlib

import torch


class _NativeCTC(torch.autograd.Function):
    """The allocations of ``aten._ctc_loss`` and its backward (values not computed)."""

    @staticmethod
    def forward(ctx, log_probs, width: int):
        steps, n, _ = log_probs.shape
        nll = log_probs.new_empty((n,))
        log_alpha = log_probs.new_empty((n, steps, 2 * width + 1))
        log_alpha.copy_(log_probs[..., :1].permute(1, 0, 2).expand_as(log_alpha))  # reads lp
        nll.copy_(log_alpha[:, -1, 0])
        ctx.save_for_backward(log_probs, log_alpha)
        return nll

    @staticmethod
    def backward(ctx, grad_nll):
        log_probs, log_alpha = ctx.saved_tensors
        log_beta = torch.empty_like(log_alpha)
        log_beta.copy_(log_alpha)
        grad = torch.empty_like(log_probs)
        grad.copy_(log_probs)
        grad.add_(log_beta[:, :, :1].permute(1, 0, 2))  # both live while the gradient forms
        grad.mul_(grad_nll.reshape(1, -1, 1))
        return grad, None


def _stand_in(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
              zero_infinity=False):
    unbatched = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    width = targets.shape[-1]
    nll = _NativeCTC.apply(lp, width)
    if reduction == "mean":
        lengths = torch.as_tensor(target_lengths, device=nll.device).reshape(-1)
        return (nll / lengths.clamp(min=1).to(nll.dtype)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll.squeeze(0) if unbatched else nll


@contextlib.contextmanager
def eager_ctc_sizes():
    """While active, ``F.ctc_loss`` (so ``nn.CTCLoss``) allocates what PyTorch's kernel does
    and computes nothing (see the module docstring)."""
    import torch.nn.functional as F

    original = F.ctc_loss
    F.ctc_loss = _stand_in
    try:
        yield
    finally:
        F.ctc_loss = original
