"""``torch.div(..., rounding_mode=...)`` and ``//`` (``aten.div.Tensor_mode``, float_promotion._div_mode):
TVM's converter made a Python-number divisor an int32 constant, so ``int64_tensor // 8`` (Llama-4's
chunked attention mask) failed to import. Negative operands tell floor from trunc; each result scales the
output, so a wrong rounding changes the step."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _Divided(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, x, ids):
        pos = torch.arange(6) - 3  # int64 with negatives
        scales = torch.stack([
            (pos // 4).float(),                                   # int64 // python int: floor
            torch.div(pos, 4, rounding_mode="trunc").float(),     # int64, trunc
            torch.div(ids, ids.abs() + 2, rounding_mode="floor").float().mean().expand(6),
            torch.div(x[0, 0] * 10, 3.0, rounding_mode="floor").expand(6),  # float tensor, floor
            torch.div(x[0, 1] * 10, 3, rounding_mode="trunc").expand(6),    # float tensor, int divisor, trunc
            torch.full((6,), 1.0),
        ]).sum(0)
        return self.lin(x) * scales


def test_rounding_modes_match_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, generator=g)
    ids = torch.tensor([-7, -3, 0, 5, 9])
    compare_step(_Divided(), (x, ids), (torch.randn(5, 6, generator=g),), "mse", SGD(lr=0.05))
