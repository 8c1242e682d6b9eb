"""``torch.histc`` and ``torch.bincount`` (roam_tvm/frontend/counts.py): the token counts of MoE
load-balancing losses.

TVM 0.27's importer has no converter for either ("Unsupported function types ['histc.default']", every HF
MoE with ``output_router_logits=True``). Each case's counts scale a different output column, so a count off
by one changes that column's loss and gradient and the step no longer matches PyTorch's."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _Counted(nn.Module):
    """``lin(x)`` with column j scaled by the count of bin j of ``histc(x[:, 0], ...)``."""

    def __init__(self, bins: int, lo: float, hi: float):
        super().__init__()
        self.bins, self.lo, self.hi = bins, lo, hi
        self.lin = nn.Linear(3, bins)

    def forward(self, x):
        counts = torch.histc(x[:, 0], bins=self.bins, min=self.lo, max=self.hi)
        return self.lin(x) * (1.0 + counts)


def _inputs(column: list[float]) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(len(column), 3, generator=g)
    x[:, 0] = torch.tensor(column)
    return x


CASES = {
    # bounds given: values on both edges (max goes to the last bin), on inner edges, and outside the range
    "edges_and_outside": (5, -1.0, 1.0, [-1.0, 1.0, -0.6, -0.2, 0.2, 0.6, 1.5, -3.0, 0.0, 0.99, -0.99, 0.4]),
    # the HF load-balancing count: expert ids as floats over bins [0, E]
    "expert_ids": (4, 0.0, 4.0, [0.0, 3.0, 1.0, 1.0, 2.0, 3.0, 0.0, 0.0, 2.0, 1.0]),
    # min == max: the data's own range
    "data_range": (3, 0.0, 0.0, [0.5, -2.0, 4.0, 1.0, 1.0, 3.9, -1.9, 0.0]),
    # a single value: PyTorch widens it to [v - 1, v + 1]
    "single_value": (4, 0.0, 0.0, [2.0] * 6),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_histc_counts_match_pytorch(case):
    bins, lo, hi, column = CASES[case]
    torch.manual_seed(0)
    model, x = _Counted(bins, lo, hi), _inputs(column)
    y = torch.randn(len(column), bins, generator=torch.Generator().manual_seed(1))
    compare_step(model, (x,), (y,), "mse", SGD(lr=0.1))


class _AuxLossMoE(nn.Module):
    """A top-2 router with HF's load-balancing term (histc of the chosen experts) added to the logits."""

    def __init__(self, d: int = 8, experts: int = 4):
        super().__init__()
        self.experts = experts
        self.router, self.head = nn.Linear(d, experts, bias=False), nn.Linear(d, 5)

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        _, chosen = probs.topk(2, dim=-1)
        tokens = torch.histc(chosen.reshape(-1).float(), bins=self.experts, min=0, max=self.experts)
        aux = (tokens / x.shape[0] * probs.mean(0)).sum() * self.experts
        return self.head(x) + aux


def test_load_balancing_loss_trains_as_pytorch():
    torch.manual_seed(0)
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(2))
    y = torch.randint(0, 5, (16,), generator=torch.Generator().manual_seed(3))
    compare_step(_AuxLossMoE(), (x,), (y,), "cross_entropy", SGD(lr=0.5))


class _BinCounted(nn.Module):
    """``lin(x)`` with column j scaled by ``bincount(ids, weights, minlength)[j]``."""

    def __init__(self, width: int, minlength: int, weighted: bool):
        super().__init__()
        self.minlength, self.weighted = minlength, weighted
        self.lin = nn.Linear(3, width)

    def forward(self, x, ids):
        w = x[:, 1].abs() if self.weighted else None
        counts = torch.bincount(ids, weights=w, minlength=self.minlength)
        return self.lin(x) * (1.0 + counts.to(x.dtype))


@pytest.mark.parametrize("minlength,weighted", [(6, False), (6, True), (0, False)])
def test_bincount_matches_pytorch(minlength, weighted):
    ids = torch.tensor([0, 3, 3, 1, 4, 4, 4, 0, 2, 1])  # max 4: length 5 without minlength
    width = max(minlength, int(ids.max()) + 1)
    torch.manual_seed(0)
    model, x = _BinCounted(width, minlength, weighted), _inputs([0.0] * len(ids))
    y = torch.randn(len(ids), width, generator=torch.Generator().manual_seed(1))
    compare_step(model, (x, ids), (y,), "mse", SGD(lr=0.1))
