"""Buffers a forward updates in place, other than BatchNorm's (``frontend/mutated_buffers.py``): TVM's
importer bound them as constants and dropped their updates, so spectral norm's power-iteration vectors
and an EMA codebook never changed. They are now states of the step, updated as PyTorch updates them; each
case against PyTorch's step, the buffers included."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402

from test_numerics import compare_step, torch_step, tvm_step  # noqa: E402

F = nn.functional


class _SpectralNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.utils.parametrizations.spectral_norm(nn.Linear(6, 8))
        self.bn = nn.BatchNorm1d(8)
        self.c2 = nn.utils.spectral_norm(nn.Linear(8, 3))  # the older hook-based form

    def forward(self, x):
        return self.c2(F.leaky_relu(self.bn(self.c1(x)), 0.2))


class _EmaCodebook(nn.Module):
    """A VQ layer whose codebook follows an EMA of the assigned encodings (no gradient), plus a
    step counter: float and int64 buffers updated under no_grad."""

    def __init__(self, codes: int = 5, dim: int = 4, decay: float = 0.9):
        super().__init__()
        self.enc, self.dec, self.decay = nn.Linear(6, dim), nn.Linear(dim, 6), decay
        self.register_buffer("codebook", torch.randn(codes, dim))
        self.register_buffer("ema_sum", torch.zeros(codes, dim))
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        z = self.enc(x)
        dist = (z.unsqueeze(1) - self.codebook.unsqueeze(0)).pow(2).sum(-1)
        onehot = F.one_hot(dist.argmin(1), self.codebook.shape[0]).to(z.dtype)
        q = onehot @ self.codebook
        with torch.no_grad():
            self.ema_sum.mul_(self.decay).add_((1 - self.decay) * onehot.t() @ z)
            self.codebook.copy_(self.ema_sum + 0.5 * self.codebook)
            self.steps += 1
        return self.dec(z + (q - z).detach())


@pytest.mark.parametrize("make, buffers", [
    (_SpectralNormNet, ["c1.parametrizations.weight.0._u", "c1.parametrizations.weight.0._v", "c2.weight_u"]),
    (_EmaCodebook, ["codebook", "ema_sum", "steps"]),
])
def test_updated_buffers_are_states_and_match_pytorch(make, buffers):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = make()
    x, y = torch.randn(8, 6, generator=g), torch.randn(8, 6 if make is _EmaCodebook else 3, generator=g)
    opt = Adam(lr=0.01)
    ts = from_torch(model, (x,), (y,), loss="mse", optimizer=opt)
    assert set(buffers) <= set(ts.state_names)
    _, ref, _ = torch_step(model, (x,), (y,), "mse", opt)
    _, before, after = tvm_step(ts, (x,), (y,))
    for name in buffers:
        assert not np.array_equal(before[name], ref[name]), name  # PyTorch's step moved it
        np.testing.assert_allclose(after[name], ref[name], rtol=1e-4, atol=1e-5, err_msg=name)
    compare_step(model, (x,), (y,), "mse", SGD(lr=0.1))
