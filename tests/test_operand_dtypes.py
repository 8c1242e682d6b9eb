"""Matmuls over float operands of different dtypes are refused before TVM's import
(roam_tvm/frontend/operand_dtypes.py): eager PyTorch raises on them, torch.export's fake kernels do not."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend.errors import UnsupportedError  # noqa: E402


class _HalfWithFloatNorm(nn.Module):
    def __init__(self, cast_back: bool):
        super().__init__()
        self.cast_back = cast_back
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x):
        h = self.a(x)
        h = h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6)  # a norm in float32
        return self.b(h.to(x.dtype) if self.cast_back else h)


def _made(cast_back):
    torch.manual_seed(0)
    return _HalfWithFloatNorm(cast_back).half(), (torch.randn(4, 8).half(),), (torch.randint(0, 3, (4,)),)


def test_mixed_operands_are_refused_with_the_model_line():
    model, x, y = _made(False)
    with pytest.raises(RuntimeError):
        model(*x)  # what eager PyTorch says
    with pytest.raises(UnsupportedError, match=r"aten.linear.*test_operand_dtypes.py.*float32 and float16.*Way out"):
        from_torch(model, x, y, optimizer=SGD(lr=0.1), quiet=True)


def test_cast_back_imports():
    model, x, y = _made(True)
    assert from_torch(model, x, y, optimizer=SGD(lr=0.1), quiet=True).param_names
