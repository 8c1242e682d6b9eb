"""``split_pads``: a split of a zero pad (through a transpose) becomes the pad's pieces.

A bidirectional RNN classifier reading the last step (``out[:, -1]``) gets as its output's
gradient a zero pad over the sequence, transposed and split into the two directions and the
steps: before the rewrite the padded tensor and its pieces were copied out by split kernels,
a sequence-sized transient (outside ``lstm1_bi``: 1.047 x `cut`).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import tvm
from tvm import relax
from tvm.script import relax as R

import test_numerics
from roam_tvm.frontend import Adam
from roam_tvm.frontend.split_of_pad import split_pads
from test_outside_kinds_more import check_outside_step


def _run(func: relax.Function, *args: np.ndarray) -> list[np.ndarray]:
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    ex = tvm.compile(relax.transform.LegalizeOps()(mod), "llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(a) for a in args])
    return [o.numpy() for o in out]


@R.function
def _before(g: R.Tensor((4, 6), "float32")):
    with R.dataflow():
        e = R.expand_dims(g, axis=[1])
        p = R.nn.pad(e, pad_width=[0, 0, 4, 0, 0, 0], pad_value=0.0, pad_mode="constant")  # (4, 5, 6)
        t = R.permute_dims(p, axes=[1, 0, 2])  # (5, 4, 6)
        dirs = R.split(t, indices_or_sections=[3], axis=2)
        fwd = dirs[0]
        steps = R.split(fwd, indices_or_sections=5, axis=0)
        out = (steps[0], steps[3], steps[4], dirs[1])
        R.output(out)
    return out


def test_pieces_are_zero_fills_and_slices_of_the_core():
    after = split_pads(_before)
    ops = []
    relax.analysis.post_order_visit(after, lambda n: ops.append(n.op.name) if isinstance(n, relax.Call)
                                    and isinstance(n.op, tvm.ir.Op) else None)
    assert "relax.split" not in ops  # no kernel copies the padded tensor into pieces
    assert ops.count("relax.zeros") == 4  # steps 0-3 of the first direction lie in the padding
    g = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    for want, got in zip(_run(_before, g), _run(after, g)):
        assert want.shape == got.shape
        np.testing.assert_array_equal(want, got)


@R.function
def _partial(x: R.Tensor((2, 3), "float32")):
    with R.dataflow():
        p = R.nn.pad(x, pad_width=[1, 2, 0, 0], pad_value=0.0, pad_mode="constant")  # (5, 3)
        parts = R.split(p, indices_or_sections=[2, 4], axis=0)  # rows [0,2) [2,4) [4,5)
        out = (parts[0], parts[1], parts[2])
        R.output(out)
    return out


def test_a_piece_across_the_core_edge_is_a_pad_of_a_slice():
    after = split_pads(_partial)
    x = np.arange(6, dtype="float32").reshape(2, 3) + 1
    for want, got in zip(_run(_partial, x), _run(after, x)):
        np.testing.assert_array_equal(want, got)


@R.function
def _not_zero(x: R.Tensor((2, 3), "float32")):
    with R.dataflow():
        p = R.nn.pad(x, pad_width=[1, 1, 0, 0], pad_value=1.0, pad_mode="constant")
        parts = R.split(p, indices_or_sections=2, axis=0)
        out = (parts[0], parts[1])
        R.output(out)
    return out


def test_a_pad_with_another_value_is_left_alone():
    tvm.ir.assert_structural_equal(split_pads(_not_zero), _not_zero)


class _BiLastStep(torch.nn.Module):
    def __init__(self, cell: str):
        super().__init__()
        self.rnn = getattr(torch.nn, cell)(6, 8, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(16, 3)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


@pytest.mark.parametrize("cell", [pytest.param("LSTM", marks=pytest.mark.slow), "GRU"])  # the GRU's in CI
def test_bidirectional_last_step_step_matches_torch(cell, monkeypatch):
    torch.manual_seed(0)
    model = _BiLastStep(cell)
    x = torch.randn(2, 5, 6)
    y = torch.randint(0, 3, (2,))
    check_outside_step(model, (x,), (y,), "cross_entropy", Adam(lr=1e-3), monkeypatch)
    assert test_numerics  # the reference step comes from test_numerics.compare_step
