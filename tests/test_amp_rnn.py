"""Recurrent layers under AMP run in the low precision, as CUDA autocast runs them
(roam_tvm/frontend/amp_rnn.py); CPU autocast would keep them float32."""
from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend.amp_rnn import rnns_in  # noqa: E402

from test_precision import ADT, EPS, _close, _tvm_step  # noqa: E402


class _Recurrent(nn.Module):
    """A GRUCell loop, then a bidirectional nn.LSTM over its states."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(6, 12)
        self.lstm = nn.LSTM(12, 8, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):  # x: [B, T, 6]
        h = x.new_zeros(x.shape[0], 12)
        states = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            states.append(h)
        out, _ = self.lstm(torch.stack(states, 1))
        return self.fc(out[:, -1])


def _torch_step(model, x, y, lr, dtype):
    """PyTorch's eager step with the same recipe: CPU autocast, recurrent kernels in ``dtype``."""
    m = copy.deepcopy(model).train()
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    with torch.autocast("cpu", dtype=dtype), rnns_in(dtype):
        loss = nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return float(loss.detach().float()), {n: p.detach().double().numpy() for n, p in m.named_parameters()}


def test_recurrent_layers_run_in_low_precision_and_match_pytorch():
    torch.manual_seed(0)
    model = _Recurrent()
    x, y = torch.randn(3, 5, 6), torch.randint(0, 4, (3,))
    ts = from_torch(model, (x,), (y,), optimizer=SGD(lr=0.5), quiet=True, precision="bf16-amp")
    assert {ts.shapes[n][1] for n in ts.param_names} == {"float32"}  # fp32 master weights
    with torch.autocast("cpu", dtype=torch.bfloat16), rnns_in(torch.bfloat16):
        assert model.cell(x[:, 0]).dtype == torch.bfloat16 and model.lstm(x.new_zeros(3, 2, 12))[0].dtype == \
            torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model.cell(x[:, 0]).dtype == torch.float32  # what CPU autocast alone does
    loss, before, after = _tvm_step(ts, (x.numpy(),), (y.numpy(),))
    t_loss, ref = _torch_step(model, x, y, 0.5, ADT["bf16-amp"])
    eps = EPS["bf16-amp"]
    assert abs(loss - t_loss) <= 4 * eps * max(1.0, abs(t_loss)), (loss, t_loss)
    for n in ts.param_names:
        _close(after[n].astype(np.float64) - before[n], ref[n.removeprefix("model.")] - before[n], 4 * eps, n)


def test_kernels_are_restored():
    vf = torch._VF
    before = vf.lstm
    with rnns_in(torch.float16):
        assert vf.lstm is not before
    assert vf.lstm is before
