"""``index_fill`` on a non-contiguous view (``h.transpose(1, 2).index_fill(1, idx, 0.0)``): PyTorch's
decomposition ends in ``prims.copy_strided``, which TVM 0.27's importer lacked (converters._copy_strided);
the step now imports and matches PyTorch's."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _FillTransposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("idx", torch.tensor([1, 3]))

    def forward(self, x):
        return self.lin(x).transpose(1, 2).index_fill(1, self.idx, 0.0).sum(1)


def test_index_fill_on_a_transposed_view_matches_pytorch():
    torch.manual_seed(0)
    compare_step(_FillTransposed(), (torch.randn(2, 4, 8),), (torch.randn(2, 4),), "mse", SGD(lr=0.1))
