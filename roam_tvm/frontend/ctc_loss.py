"""``F.ctc_loss`` (``nn.CTCLoss``) as a log-space forward recursion over the time steps.

``torch.export`` cannot trace ``aten._ctc_loss`` (its output shape depends on the target
lengths' values: "DynamicOutputShapeException"), and Relax has no CTC op. The loss is the
textbook forward (alpha) recursion, unrolled over the ``T`` time steps (static under export),
in ops whose gradients the frontend has:

* the extended label sequence ``blank, y1, blank, y2, ..., blank`` (``2S + 1`` states for
  padded targets ``[N, S]``) and the log-probabilities of its labels (one ``gather``);
* ``alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2) if allowed)
  + lp_t(s)``, a jump over a blank being allowed onto a label that differs from the one two
  states back. The log-sum-exp subtracts the (detached) maximum, and states that no path
  reaches hold a large finite negative number instead of ``-inf``, so neither the forward
  nor the backward meets ``inf - inf`` (NaN). A step past a sequence's input length keeps
  its alpha unchanged;
* the sequence's log-likelihood is the log-sum-exp of its last two states (last label,
  final blank) at the end.

Concatenated 1-D targets made by ``labels.masked_select(mask)`` from padded ``[N, S]`` labels (Hugging
Face's CTC heads: wav2vec2, HuBERT, WavLM, ...: ``labels >= 0``) are read back as padded rows:
:func:`recorded_selections` notes each ``masked_select`` traced, and the loss takes each row's selected
labels first, in order (a stable sort of the mask), which is the concatenated form's split by
``mask.sum(-1)`` with static shapes. Other concatenated targets are refused with the way out.

The gradient is the exact derivative of this loss. PyTorch's own CTC backward returns that
derivative plus ``exp(log_probs)``, which cancels through the ``log_softmax`` that produces
CTC inputs; with ``log_softmax`` outputs (the documented input) the parameter gradients
agree. Reductions as PyTorch: ``"mean"`` divides each loss by its target length (at least
1) and averages over the batch. An impossible alignment (input too short) is ``inf``, or 0
with ``zero_infinity``, with no gradient.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from .errors import UnsupportedError

_UNREACHED = -1e30  # log-probability of a state no path reaches (finite: no inf - inf)
_SELECTIONS: list = []  # (result, source, mask) of each masked_select traced (recorded_selections)


@contextlib.contextmanager
def recorded_selections() -> Iterator[None]:
    """While active, ``masked_select`` notes its operands, so :func:`ctc_loss` can read concatenated
    targets back as padded rows."""
    import torch

    original = torch.Tensor.masked_select

    def masked_select(self, mask):
        out = original(self, mask)
        _SELECTIONS.append((out, self, mask))
        return out

    torch.Tensor.masked_select = masked_select
    try:
        yield
    finally:
        torch.Tensor.masked_select = original
        _SELECTIONS.clear()


def _padded_from_selection(targets, n: int):
    """``[N, S]`` rows of the labels ``targets`` was selected from, each row's selected labels first
    (others: 0); None when ``targets`` is not a recorded selection from ``[N, S]`` labels."""
    import torch

    for out, source, mask in _SELECTIONS:
        if out is targets and source.dim() == 2 and source.shape[0] == n and mask.shape == source.shape:
            order = torch.argsort((~mask).to(torch.int32), dim=1, stable=True)  # selected first, in order
            kept = mask.gather(1, order)
            return torch.where(kept, source.gather(1, order), torch.zeros_like(source))
    return None


def _lse(*terms):
    """Log-sum-exp of same-shape tensors, shifted by their detached maximum."""
    import torch

    top = terms[0]
    for t in terms[1:]:
        top = torch.maximum(top, t)
    top = top.detach()
    total = torch.exp(terms[0] - top)
    for t in terms[1:]:
        total = total + torch.exp(t - top)
    return top + torch.log(total)


def _step(alpha, lp_t, jump, lead):
    """One step of the recursion: the three candidate states stacked, one log-sum-exp.

    Stacking keeps the ops per time step few (the loop is unrolled ``T`` times)."""
    import torch

    padded = torch.cat([lead, alpha], dim=1)  # two unreached states before state 0
    cand = torch.stack([alpha, padded[:, 1:-1], padded[:, :-2] + jump])
    top = cand.amax(0).detach()
    return top + torch.log(torch.exp(cand - top).sum(0)) + lp_t


def _as_lengths(lengths, n: int, device):
    import torch

    if not isinstance(lengths, torch.Tensor):
        lengths = torch.tensor(list(lengths), device=device)
    return lengths.reshape(n).long()


def _check(log_probs, targets, reduction):
    if reduction not in ("mean", "sum", "none"):
        raise UnsupportedError(f"ctc_loss: reduction {reduction!r} is not 'mean', 'sum' or 'none'")
    if log_probs.dim() == 3 and targets.dim() != 2:
        raise UnsupportedError(
            f"ctc_loss: targets of shape {list(targets.shape)} are the concatenated form, whose "
            "split depends on the target lengths' values (not traceable for a static plan); pass "
            "padded targets [N, S] (one row per sequence, any padding past its target length)")


def _extended(targets, blank: int):
    """``[N, 2S + 1]`` labels ``blank, y1, blank, ..., yS, blank``."""
    import torch

    n, s = targets.shape
    blanks = torch.full_like(targets, blank)
    inner = torch.stack([blanks, targets], dim=-1).reshape(n, 2 * s)
    return torch.cat([inner, blanks[:, :1]], dim=1)


def _jump_allowed(ext, blank: int):
    """``[N, 2S + 1]`` bool: state ``s`` may be entered from ``s - 2``."""
    import torch

    two_back = torch.cat([torch.full_like(ext[:, :2], blank), ext[:, :-2]], dim=1)
    return (ext != blank) & (ext != two_back)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False):
    """``F.ctc_loss`` for padded targets (see the module docstring).

    Raises
    ------
    UnsupportedError
        Concatenated 1-D targets for a batch (other than a recorded ``masked_select`` of padded labels),
        or an unknown reduction.
    """
    import torch

    if log_probs.dim() == 3 and targets.dim() == 1:
        padded = _padded_from_selection(targets, log_probs.shape[1])
        targets = padded if padded is not None else targets
    _check(log_probs, targets, reduction)
    unbatched = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs  # [T, N, C]
    # labels past a target's length are never read: keep them valid indices (HF pads with -100)
    tg = (targets.reshape(1, -1) if unbatched else targets).long().clamp(0, log_probs.shape[-1] - 1)
    if lp.dtype in (torch.float16, torch.bfloat16):  # as autocast runs CTC: in float32
        lp = lp.float()
    steps, n = lp.shape[0], lp.shape[1]
    in_len = _as_lengths(input_lengths, n, lp.device)
    tg_len = _as_lengths(target_lengths, n, lp.device)
    ext = _extended(tg, blank)
    states = ext.shape[1]
    lp_ext = lp.gather(2, ext.unsqueeze(0).expand(steps, n, states))  # [T, N, 2S+1]
    unreached = torch.full_like(lp_ext[0], _UNREACHED)
    jump = torch.where(_jump_allowed(ext, blank), torch.zeros_like(unreached), unreached)
    # one split into time steps (not lp_ext[t] per step: the gradient of each such take is a
    # zero [T, N, 2S+1] tensor with one row filled, T of them)
    lp_rows = lp_ext.unbind(0)
    running = (torch.arange(steps, device=lp.device).unsqueeze(1) < in_len).unsqueeze(2)
    running_rows = running.unbind(0)  # [N, 1] each: sequence n still has input at step t
    first = torch.arange(states, device=lp.device) < 2
    alpha = torch.where(first, lp_rows[0], unreached)
    lead = unreached[:, :2]
    for t in range(1, steps):
        alpha = torch.where(running_rows[t], _step(alpha, lp_rows[t], jump, lead), alpha)
    last_blank = alpha.gather(1, (2 * tg_len).unsqueeze(1)).squeeze(1)
    last_label = alpha.gather(1, (2 * tg_len - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    last_label = torch.where(tg_len > 0, last_label, torch.full_like(last_label, _UNREACHED))
    nll = -_lse(last_blank, last_label)
    impossible = nll > -_UNREACHED / 2
    nll = torch.where(impossible, torch.full_like(nll, 0.0 if zero_infinity else float("inf")), nll)
    if reduction == "mean":
        out = (nll / tg_len.clamp(min=1).to(nll.dtype)).mean()
    elif reduction == "sum":
        out = nll.sum()
    else:
        out = nll.squeeze(0) if unbatched else nll
    return out.to(log_probs.dtype)
