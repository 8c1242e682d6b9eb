"""A gradient stacked from row blocks is applied block by block only where ``rnn_gate_grads``
stacked it (an RNN weight's gates): ``nn.MultiheadAttention``'s ``in_proj_weight`` is split
into q/k/v rows in the forward, so its gradient is also a concat of row blocks, and applied
block by block it failed to lower in TVM (FuseTIR: "Inconsistent buffers ... mapped to the same
relax var"; the outside ``seq2seq`` row, an ``nn.Transformer``)."""
from __future__ import annotations

import re

import pytest

import torch

from roam_tvm.frontend import Adam, from_torch
from test_outside_kinds_more import check_outside_step


class _Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        y, _ = self.mha(x, x, x, need_weights=False)
        return self.fc(y.mean(dim=1))


def _data():
    torch.manual_seed(0)
    return _Attn(), (torch.randn(2, 5, 8),), (torch.randint(0, 3, (2,)),)


def test_multihead_attention_step_builds_and_matches_torch(monkeypatch):
    model, x, y = _data()
    check_outside_step(model, x, y, "cross_entropy", Adam(lr=1e-3), monkeypatch)


def _updates(model, x, y) -> set:
    ts = from_torch(model, x, y, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    return set(re.findall(r"(upd_\w+)\s*[:=]", ts.mod.script()))


class _Rnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.fc = torch.nn.GRU(4, 6, batch_first=True), torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


def test_only_rnn_gate_rows_are_updated_by_rows():
    model, x, y = _data()
    upd = _updates(model, x, y)
    assert "upd_mha_in_proj_weight" in upd
    assert not any("_rows" in u for u in upd)  # q/k/v rows: one whole update
    torch.manual_seed(0)
    upd = _updates(_Rnn(), (torch.randn(2, 3, 4),), y)
    assert {"upd_rnn_weight_hh_l0_rows0", "upd_rnn_weight_hh_l0_rows6"} <= upd  # a GRU's gates: by rows


class _Bf16Rnn(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


@pytest.mark.slow  # a whole bf16 row each (test_amp_rnn covers AMP RNN steps by default)
@pytest.mark.parametrize("cell", [torch.nn.GRU, torch.nn.LSTM],
                         ids=["gru", "lstm"])
def test_bf16_rnn_row_updates_lower_and_run(cell):
    """A pure-bf16 RNN: each gate block is a transposed, rounded product, and FuseTIR refused to
    fuse that transpose into the (shape-generic) row-block update ("Inconsistent buffers");
    the row-block kernels are now never fused. The step lowers for CUDA, builds for llvm and
    its loss is finite."""
    import numpy as np
    import tvm
    from tvm import relax

    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.simulate import schedule_for
    from roam_tvm.runtime import build

    torch.manual_seed(0)
    model = _Bf16Rnn(cell).to(torch.bfloat16)
    x, y = torch.randn(3, 6, 8).to(torch.bfloat16), torch.randint(0, 5, (3,))
    ts = from_torch(model, (x,), (y,), loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    assert any("_rows" in u for u in re.findall(r"(upd_\w+)\s*[:=]", ts.mod.script()))
    schedule_for(with_param_kinds(ts), "cuda")
    exe = build(ts.mod, "llvm", order=True, layout=True, order_time_limit=2.0)
    vm = relax.VirtualMachine(exe, tvm.cpu())
    loss = ts.run(vm, [x], [y], ts.initial_values())
    assert np.isfinite(loss)
