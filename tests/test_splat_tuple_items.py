"""``SplatConstants`` on an item of a constant tuple (a top-1 MoE's dense dispatch, ZAYA: ``w[tok, pos]`` with
``pos`` all zeros, folded by FoldConstant into ``(tok_table, zeros)[1]``): the item is read on its own. Before,
the uniform member was filled inside the tuple, dead, and FuseOps fused that fill into a function returning
its parameter: FuseTIR failed (``global_name != "fused"``) and the step did not build."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from torch import nn  # noqa: E402
from tvm import relax  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402
from roam_tvm.runtime.splat_constants import SplatConstants  # noqa: E402

from test_numerics import compare_step  # noqa: E402


def test_uniform_item_of_a_constant_tuple_becomes_a_fill():
    table = relax.const(np.arange(6), "int64")
    zeros = relax.const(np.zeros(6), "int64")
    x = relax.Var("x", relax.TensorType((6,), "int64"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            item = bb.emit(relax.TupleGetItem(relax.Tuple([table, zeros]), 1))
            out = bb.emit_output(relax.op.add(x, item))
        bb.emit_func_output(out)
    after = SplatConstants()(bb.get())["main"]
    values = [b.value for b in after.body.blocks[0].bindings]
    assert not any(isinstance(v, relax.TupleGetItem) for v in values)
    assert any(isinstance(v, relax.Call) and "full" in str(v.args[0]) for v in values)


class _TopOneGather(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        w = torch.softmax(self.proj(x), -1)[:, :1].unsqueeze(-1)
        tok = torch.arange(x.shape[0])
        slot = torch.zeros(x.shape[0], dtype=torch.long)  # top-1: every token's slot is 0
        return x * w[tok, slot]


def test_top_one_gather_plans_and_matches_pytorch():
    from roam_tvm.frontend import from_torch
    from roam_tvm.report.compare import compare_step as plan_step

    torch.manual_seed(0)
    x, y = torch.randn(24, 8), torch.randn(24, 8)
    ts = from_torch(_TopOneGather(), (x,), (y,), loss="mse", optimizer=SGD(lr=0.1), quiet=True)
    report = plan_step(ts, ["tvm-default", "roam"], pytorch=None, progress=False, scratch=False)
    assert all(r["valid"] for r in report["planners"].values())
    compare_step(_TopOneGather(), (x,), (y,), "mse", SGD(lr=0.1))
