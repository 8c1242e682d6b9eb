"""A trainable parameter the loss reads only inside ``torch.no_grad()`` (LayoutLMv3's relative-position
tables) gets ``.grad = None`` in PyTorch, and its optimizer skips it: no update, no AdamW weight decay,
no state. The step treats it as frozen (torch_params._gradless), so the same step holds no optimizer
state for it and leaves it unchanged."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import AdamW, from_torch  # noqa: E402


class _TableUnderNoGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.table = nn.Linear(3, 4, bias=False)  # read only inside no_grad
        self.detached = nn.Parameter(torch.randn(4))  # read only through .detach()

    def forward(self, x):
        with torch.no_grad():
            bias = self.table.weight.t()[torch.tensor([0, 2, 1, 0, 2])]
        return self.lin(x) + bias + self.detached.detach()


def test_parameter_read_only_under_no_grad_is_frozen():
    torch.manual_seed(0)
    model = _TableUnderNoGrad()
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    ts = from_torch(model, (x,), (y,), loss="mse", optimizer=AdamW(lr=0.1, weight_decay=0.1), quiet=True)
    assert ts.param_names == ["lin.weight", "lin.bias"]
    assert sorted(ts.frozen_names) == ["detached", "table.weight"]
    # PyTorch agrees: no gradient, and AdamW leaves them as they were
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    for n in ("table.weight", "detached"):
        assert dict(model.named_parameters())[n].grad is None
        np.testing.assert_array_equal(dict(model.named_parameters())[n].detach().numpy(), before[n].numpy())
