"""RoamPlan: the reordered candidate is judged against TVM's plan of the step as given.

A 2-layer tanh RNN: RoamOrder's order reaches `cut`, and RoamLayout packs it at its bound, but
that plan saves less than ``min_saving`` over TVM's plan *of the new order*. Judged that way it
was dropped for TVM's plan of the new order, which is worse than roam's plan of the program
order, so the step kept the program order (3.9% above `cut`).
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from roam_tvm.report.compare import compare_step  # noqa: E402


class _RNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(8, 16, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


def test_reordered_plan_kept_when_it_beats_both_candidates():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 12, 8, generator=g), torch.randint(0, 5, (4,), generator=g)
    ts = from_torch(_RNN(), (x,), (y,), optimizer=Adam(), quiet=True)
    report = compare_step(ts, planners=["tvm-default", "roam"], target="cuda", progress=False)
    roam = report["planners"]["roam"]
    assert roam["valid"]
    assert "; kept (peak" in roam["note"], roam["note"]
    assert roam["peak_bytes"] <= report["lower_bounds"]["cut"] * 1.001, (roam["peak_bytes"], report["lower_bounds"])
    assert roam["peak_bytes"] < report["planners"]["tvm-default"]["peak_bytes"]
