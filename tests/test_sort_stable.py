"""``torch.argsort(..., stable=True)`` / ``torch.sort(stable=True)`` (``aten.sort.stable``, converters.py):
TVM's converter map lacked it (a sort-based MoE dispatch failed to import). Keys with ties in both
directions: a sort that is not stable permutes the rows differently from PyTorch and the step differs."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _Sorted(nn.Module):
    def __init__(self, descending: bool):
        super().__init__()
        self.lin, self.descending = nn.Linear(4, 6), descending

    def forward(self, x, keys):
        order = torch.argsort(keys, stable=True, descending=self.descending)
        values, index = torch.sort(keys.float(), stable=True, descending=self.descending)
        return self.lin(x)[order] * (1 + values[:, None]) + index[:, None].float()


@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_with_ties_matches_pytorch(descending):
    torch.manual_seed(0)
    keys = torch.tensor([2, 0, 2, 1, 0, 2, 1, 1, 0, 2])
    g = torch.Generator().manual_seed(0)
    compare_step(_Sorted(descending), (torch.randn(10, 4, generator=g), keys),
                 (torch.randn(10, 6, generator=g),), "mse", SGD(lr=0.1))
