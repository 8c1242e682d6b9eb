"""``alpha`` of ``torch.add`` / ``torch.sub`` / ``torch.rsub`` and their in-place forms (``frontend/add_alpha.py``):
TVM 0.27's converters dropped it, so ``x.add(y, alpha=0.5)`` imported as ``x + y``. In the differentiated
path, with tensors and numbers, against PyTorch's step."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 5), nn.Linear(5, 3)

    def forward(self, x):
        h = self.a(x)
        h = torch.add(h, torch.tanh(h), alpha=0.5).sub(h.sin(), alpha=2.0)
        h = torch.rsub(h, 1.5, alpha=3.0) + torch.add(h, 2.0, alpha=-1.5)
        h = h.clone().add_(h.cos(), alpha=0.25)
        return self.b(h)


def test_alpha_is_applied_as_in_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(6, 4, generator=g), torch.randn(6, 3, generator=g)
    compare_step(_Scaled(), (x,), (y,), "mse", SGD(lr=0.1))
