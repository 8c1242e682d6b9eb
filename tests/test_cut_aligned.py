"""``cut_aligned``: the cut bound for tensors at aligned offsets of one arena (report/simulate.py).

Small steps with odd sizes (a bf16 RNN's 96-byte step tensors) cannot reach the exact-byte ``cut`` in any
64-byte-aligned arena; ``cut_aligned`` is the bound such plans are measured against.
"""
from __future__ import annotations

import itertools
import json
import textwrap

import pytest

from roam_tvm.graph.model import GraphBuilder
from roam_tvm.report.simulate import lower_bounds

from test_compare import run_cli


def _three_live(size: int):
    b = GraphBuilder("three")
    x = b.tensor(64, kind="input")
    a, = b.op([x], [size])
    c, = b.op([x], [size])
    d, = b.op([x], [size])
    out, = b.op([a, c, d], [4])
    b.tensors[out].is_output = True
    return b.build(), [a, c, d]


def _least_aligned_top(sizes: list[int], alignment: int) -> int:
    """Brute force: the lowest arena top for tensors all live at once, at aligned offsets."""
    slots = range(0, alignment * 2 * len(sizes) + 1, alignment)
    best = None
    for offsets in itertools.product(slots, repeat=len(sizes)):
        spans = sorted(zip(offsets, sizes))
        if all(o1 + s1 <= o2 for (o1, s1), (o2, _) in zip(spans, spans[1:])):
            top = max(o + s for o, s in spans)
            best = top if best is None else min(best, top)
    return best


def test_bound_is_the_least_aligned_arena():
    g, arena = _three_live(96)
    bounds = lower_bounds(g, arena={0: arena}, alignment=64)
    assert bounds["cut"] == 64 + 3 * 96 + 4
    assert bounds["cut_aligned"] == 64 + _least_aligned_top([96] * 3, 64) + 4  # 0, 128, 256: top 352


def test_no_aligned_bound_without_padding():
    g, arena = _three_live(128)
    assert "cut_aligned" not in lower_bounds(g, arena={0: arena}, alignment=64)


@pytest.fixture(scope="module")
def bf16_gru_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aligned")
    f = tmp / "gru.py"
    f.write_text(textwrap.dedent("""
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = torch.nn.GRU(8, 16, batch_first=True)
                self.fc = torch.nn.Linear(16, 5)
            def forward(self, x):
                return self.fc(self.rnn(x)[0][:, -1])
        def factory():
            torch.manual_seed(0)
            return (M().to(torch.bfloat16), (torch.randn(3, 4, 8).to(torch.bfloat16),),
                    (torch.randint(0, 5, (3,)),))
    """))
    out = tmp / "gru.json"
    run_cli("compare", "--model", f"{f}:factory", "--optimizer", "adam", "--planners", "tvm-default", "roam",
            "--quiet", "--json", str(out))
    return json.loads(out.read_text())


@pytest.mark.slow  # a whole compare run (about 45 s); the bound itself is tested above
def test_small_bf16_rnn_meets_the_aligned_bound(bf16_gru_report):
    lb = bf16_gru_report["lower_bounds"]
    roam = bf16_gru_report["planners"]["roam"]["peak_bytes"]
    assert lb["cut"] < lb["cut_aligned"] <= roam <= 1.01 * lb["cut_aligned"], (roam, lb)
