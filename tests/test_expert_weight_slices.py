"""Stacked expert weights indexed by a constant (``self.gate_up_proj[e]``, HF MoE layers' experts run
densely): the backward takes the slice again instead of keeping the forward's copy of each expert's
weight until its gradient (``frontend/backward_input_slices.py``; PyTorch saves the slice as a view)."""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import test_numerics  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402

E, H, F = 4, 16, 48


class StackedExperts(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(H, E)
        self.up = nn.Parameter(torch.randn(E, F, H) * 0.1)
        self.down = nn.Parameter(torch.randn(E, H, F) * 0.1)
        self.head = nn.Linear(H, 3)

    def forward(self, x):
        w = torch.softmax(self.router(x), dim=-1)
        out = torch.zeros_like(x)
        for e in range(E):
            out = out + nn.functional.linear(torch.relu(nn.functional.linear(x, self.up[e])), self.down[e]) * w[:, e:e + 1]
        return self.head(out)


def _example():
    torch.manual_seed(0)
    return StackedExperts(), (torch.randn(6, H),), (torch.tensor([0, 1, 2, 0, 1, 2]),)


def _forward_takes_read_in_backward(func) -> tuple[int, list]:
    """How many forward ``take(param, const)`` bindings there are, and which of them backward bindings read."""
    import tvm
    from tvm import relax

    binds = [b for blk in func.body.blocks for b in blk.bindings]
    first = next(i for i, b in enumerate(binds) if b.var.name.endswith("_adjoint"))
    params = set(func.params)
    takes = {b.var for b in binds[:first] if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
             and b.value.op.name == "relax.take" and b.value.args[0] in params
             and isinstance(b.value.args[1], tvm.ir.Constant)}
    read = {v.name for b in binds[first:] for v in relax.analysis.free_vars(b.value) if v in takes}
    return len(takes), sorted(read)


def test_expert_weight_slices_are_not_kept_for_the_backward(monkeypatch):
    from roam_tvm.frontend import autodiff

    model, ins, tgs = _example()
    ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=SGD(lr=0.1), quiet=True)
    n, read = _forward_takes_read_in_backward(ts.mod[ts.func_name])
    assert n == 2 * E and read == [], (n, read)
    with monkeypatch.context() as m:  # the check sees the copies when the rewrite is off
        m.setattr(autodiff, "recompute_input_slices_in_backward", lambda f: f)
        ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=SGD(lr=0.1), quiet=True)
    assert len(_forward_takes_read_in_backward(ts.mod[ts.func_name])[1]) == E  # each expert's down weight


def test_expert_weight_slices_step_matches_pytorch():
    model, ins, tgs = _example()
    test_numerics.compare_step(model, ins, tgs, "cross_entropy", SGD(lr=0.1))
