"""A router whose scores tie at the k-th value (AFMoE zero-initialises its gate) picks experts by the
sort's tie-breaking, which differs between PyTorch's kernels and TVM's: the import warns (topk_ties.py);
a router without ties does not."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402


class _Router(nn.Module):
    def __init__(self, zero: bool):
        super().__init__()
        self.gate = nn.Linear(8, 4, bias=False)
        self.experts = nn.Linear(8, 32)
        if zero:
            nn.init.zeros_(self.gate.weight)

    def forward(self, x):
        scores = torch.sigmoid(self.gate(x))
        w, idx = torch.topk(scores, 2, dim=-1)
        mask = torch.zeros_like(scores).scatter(-1, idx, w)  # [T, 4] routing weights
        out = self.experts(x).view(x.shape[0], 4, 8)
        return (out * mask.unsqueeze(-1)).sum(1)


def _import(zero: bool) -> list[str]:
    torch.manual_seed(0)
    x, y = torch.randn(6, 8), torch.randn(6, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from_torch(_Router(zero), (x,), (y,), loss="mse", optimizer=SGD(lr=0.1), quiet=True)
    return [str(w.message) for w in caught if "ties" in str(w.message)]


def test_tied_router_warns():
    msgs = _import(zero=True)
    assert len(msgs) == 1 and "1 torch.topk call(s) met exact ties" in msgs[0]


def test_router_without_ties_is_quiet():
    assert _import(zero=False) == []
