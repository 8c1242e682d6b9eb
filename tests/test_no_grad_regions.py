"""``with torch.no_grad():`` inside a forward (``frontend/no_grad_regions.py``): the decompositions inlined
the block and lost its grad mode, so the backward went through it. A norm taken as a constant scale, a
SimSiam-style target branch and spectral norm's power iteration (plus its weight) each against
PyTorch's step."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, Adam  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _ConstantScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        with torch.no_grad():
            scale = self.lin.weight.norm()  # a constant for autograd
        return self.lin(x) / scale


class _TargetBranch(nn.Module):
    """Predictor against a no-grad target of the same encoder (SimSiam / BYOL style)."""

    def __init__(self):
        super().__init__()
        self.enc, self.pred = nn.Sequential(nn.Linear(6, 8), nn.Tanh()), nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            target = self.enc(x.flip(0))
        return self.pred(self.enc(x)) - target


def _power_iteration(w: torch.Tensor, steps: int = 2) -> torch.Tensor:
    v = torch.ones(w.shape[1], dtype=w.dtype)
    for _ in range(steps):
        u = nn.functional.normalize(w @ v, dim=0)
        v = nn.functional.normalize(w.t() @ u, dim=0)
    return u @ w @ v


class _SpectralScaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 4)

    def forward(self, x):
        with torch.no_grad():
            sigma = _power_iteration(self.lin.weight)
        return self.lin(x) / sigma


@pytest.mark.parametrize("make, opt", [(_ConstantScale, SGD(lr=1.0)), (_TargetBranch, Adam(lr=0.01)),
                                       (_SpectralScaled, SGD(lr=0.5))])
def test_no_grad_blocks_stop_the_gradient(make, opt):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = make()
    n_in = {_ConstantScale: 4, _TargetBranch: 6, _SpectralScaled: 5}[make]
    x = torch.randn(5, n_in, generator=g)
    y = torch.randn(*model(x).shape, generator=g)
    compare_step(model, (x,), (y,), "mse", opt)
