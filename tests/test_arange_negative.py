"""``torch.arange`` with a negative step is imported at PyTorch's length (arange_negative.py):
Funnel Transformer's relative positions ``arange(hi, lo, -stride)`` expanded to ``[n, d_model]``
and gathered from a position table; one SGD step matches PyTorch's in float64."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import SGD  # noqa: E402
from test_numerics import compare_step  # noqa: E402

D = 6


class RelPos(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(30, D))
        self.lin = torch.nn.Linear(D, D)

    def forward(self, x):  # x: [4, D]
        rel = torch.arange(12, -12, -1, dtype=torch.long)[:, None] + 13  # 24 rows, as PyTorch makes
        pos = torch.gather(self.table, 0, rel.expand(rel.size(0), D))  # [24, D]
        odd = torch.arange(5.0, -6.0, -2.5)  # a float step: 5 values
        h = self.lin(x)
        return h @ pos.t() + odd.sum() + pos[torch.arange(23, -1, -4)].sum(0).mean()


def test_negative_step_arange_matches_torch():
    torch.manual_seed(0)
    m = RelPos().double()
    x = torch.randn(4, D, dtype=torch.float64)
    compare_step(m, (x,), (torch.randint(0, 24, (4,)),), "cross_entropy", SGD(lr=1.0), dtype="float64")
