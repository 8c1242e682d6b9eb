"""The gradient of ``x[:, :, t]`` (a take of one constant index) is a zero pad (grad_select.py), so a
scan reading every step of a sequence accumulates its per-step gradients into their slices in place
instead of summing one full-size ``take_backward`` scatter per step. Values: test_grad_ops.py's
``select*`` cases against torch.autograd."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend import grad_select  # noqa: E402

B, D, T, N = 2, 16, 10, 8


class Scan(torch.nn.Module):
    """``h_t = A[:, :, t] * h_{t-1} + U[:, :, t]``, read per step with Python ints (Mamba's slow path)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(D, D * N)
        self.u = torch.nn.Linear(D, D * N)
        self.out = torch.nn.Linear(D * N, 3)

    def forward(self, x):  # x: [B, T, D]
        a = torch.sigmoid(self.a(x)).view(B, T, D, N).permute(0, 2, 1, 3)  # [B, D, T, N]
        u = self.u(x).view(B, T, D, N).permute(0, 2, 1, 3)
        h = torch.zeros(B, D, N)
        for t in range(T):
            h = a[:, :, t] * h + u[:, :, t]
        return self.out(h.reshape(B, -1))


def _step_text():
    torch.manual_seed(0)
    ts = from_torch(Scan(), (torch.randn(B, T, D),), (torch.randint(0, 3, (B,)),), loss="cross_entropy",
                    optimizer=SGD(lr=0.1), quiet=True)
    return ts.mod[ts.func_name].script()


def test_scan_gradients_accumulate_into_slices():
    text = _step_text()
    assert "take_backward" not in text
    assert "slice_accumulate" in text  # the per-step pads were added into their slices in place


def test_without_the_fix_the_scan_scatters_full_size(monkeypatch):
    """The check above can fail: with the pad form turned off, TVM's scatter form comes back."""
    monkeypatch.setattr(grad_select, "constant_index", lambda idx, ctx=None: None)
    assert "take_backward" in _step_text()
