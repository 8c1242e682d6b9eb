"""recompute_attention_in_backward: the backward redoes P = softmax(Q Kᵀ + mask) from Q and K
(kept anyway) instead of keeping P; never the P V product or what follows; values bit-identical;
a step with SDPA keeps less and still matches PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend import Adam, from_torch
from roam_tvm.frontend import autodiff
from roam_tvm.frontend.backward_attention import recompute_attention_in_backward


@tvm.script.ir_module
class Attention:
    @R.function
    def main(q: R.Tensor((2, 8, 4), "float32"), k: R.Tensor((2, 4, 8), "float32"),
             v: R.Tensor((2, 8, 4), "float32"), dy: R.Tensor((2, 8, 4), "float32")):
        with R.dataflow():
            pos = R.arange(0, 8, 1, dtype="int64")
            later = R.greater(R.expand_dims(pos, axis=[0]), R.expand_dims(pos, axis=[1]))
            mask = R.where(later, R.const(-1e9, "float32"), R.const(0.0, "float32"))
            s = R.add(R.matmul(q, k), mask)
            p = R.nn.softmax(s, axis=-1)
            y = R.matmul(p, v)
            z = R.tanh(y)                              # forward reader of the P V product
            y_adjoint = R.multiply(dy, z)              # backward: reads z (kept)
            v_adjoint = R.matmul(R.permute_dims(p, [0, 2, 1]), y_adjoint)  # reads P
            p_adjoint = R.matmul(y_adjoint, R.permute_dims(v, [0, 2, 1]))
            s_adjoint = R.multiply(p, R.subtract(p_adjoint, R.sum(R.multiply(p_adjoint, p), axis=[-1], keepdims=True)))
            q_adjoint = R.matmul(s_adjoint, R.permute_dims(k, [0, 2, 1]))  # reads k (kept anyway)
            out = (v_adjoint, q_adjoint)
            R.output(out)
        return out


def _run(mod, args):
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return [t.numpy() for t in vm["main"](*[tvm.runtime.tensor(a) for a in args])]


def test_backward_redoes_the_scores_and_softmax_only():
    after = recompute_attention_in_backward(Attention["main"])
    text = after.script()
    assert "p_bwd: " in text and "s_bwd: " in text
    assert "mask_bwd" not in text and "later_bwd" not in text  # built from constants: kept
    assert "R.nn.softmax(s_bwd" in text
    assert "y_bwd" not in text and "z_bwd" not in text   # P V and after: never redone
    assert text.count("R.matmul(q, k") == 2              # the forward's and the backward's
    # every backward read of p reads the copy; the forward's p has one reader left
    assert "R.permute_dims(p_bwd" in text and "R.multiply(p_bwd" in text
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(2, 8, 4), (2, 4, 8), (2, 8, 4), (2, 8, 4)]]
    for got, want in zip(_run(tvm.IRModule({"main": after}), args), _run(Attention, args)):
        np.testing.assert_array_equal(got, want)     # same kernels on the same inputs


def test_a_recipe_that_needs_an_unkept_value_is_not_redone():
    """Here the backward does not read k: redoing P would keep k alive, so P is kept."""
    @tvm.script.ir_module
    class NoK:
        @R.function
        def main(q: R.Tensor((2, 8, 4), "float32"), w: R.Tensor((4, 4), "float32"),
                 dy: R.Tensor((2, 8, 8), "float32")):
            with R.dataflow():
                k = R.matmul(q, w)                   # a forward value, not kept by the backward
                kt = R.permute_dims(k, [0, 2, 1])
                p = R.nn.softmax(R.matmul(q, kt), axis=-1)
                y = R.multiply(p, R.const(2.0, "float32"))
                p_adjoint = R.multiply(dy, p)
                R.output(p_adjoint, y)
            return (p_adjoint, y)

    # k is redone from q and w (params): allowed, but then it costs a second matmul: refused
    assert recompute_attention_in_backward(NoK["main"]).same_as(NoK["main"])


@tvm.script.ir_module
class ViewFirst:
    """The backward reads a view of P first (``dV``), then P itself (the softmax's gradient);
    the mask is index arithmetic (``take``, ``concat``) over positions given as an input, so it
    is redone, not kept."""

    @R.function
    def main(q: R.Tensor((2, 8, 4), "float32"), k: R.Tensor((2, 4, 8), "float32"),
             v: R.Tensor((8, 4), "float32"), dy: R.Tensor((16, 4), "float32"),
             pos: R.Tensor((8,), "int64")):
        with R.dataflow():
            both = R.concat((pos, pos), axis=0)
            row = R.take(both, R.arange(0, 8, 1, dtype="int64"), axis=0)
            later = R.greater(R.expand_dims(row, axis=[0]), R.expand_dims(row, axis=[1]))
            mask = R.where(later, R.const(-1e9, "float32"), R.const(0.0, "float32"))
            p = R.nn.softmax(R.add(R.matmul(q, k), mask), axis=-1)
            p2 = R.reshape(p, R.shape([16, 8]))
            v_adjoint = R.matmul(R.permute_dims(p2, [1, 0]), dy)  # backward: the view first
            p_adjoint = R.matmul(dy, R.permute_dims(v, [1, 0]))
            s_adjoint = R.multiply(p, R.reshape(p_adjoint, R.shape([2, 8, 8])))  # then P
            q_adjoint = R.matmul(s_adjoint, R.permute_dims(k, [0, 2, 1]))
            out = (v_adjoint, q_adjoint)
            R.output(out)
        return out


def test_every_backward_read_uses_the_copy_and_index_masks_are_redone():
    after = recompute_attention_in_backward(ViewFirst["main"])
    text = after.script()
    assert "mask_bwd: " in text and "both_bwd: " in text and "row_bwd: " in text
    assert "R.multiply(p_bwd" in text, "P read after its view must read the copy"
    assert text.count("R.nn.softmax(") == 2
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in [(2, 8, 4), (2, 4, 8), (8, 4), (16, 4)]]
    args.append(np.arange(8, dtype="int64")[::-1].copy())
    for got, want in zip(_run(tvm.IRModule({"main": after}), args), _run(ViewFirst, args)):
        np.testing.assert_array_equal(got, want)


def test_a_redoable_query_stays_kept_so_the_scores_can_be_redone():
    """Q is a projection the backward reads through a view: redoable on its own (one matmul),
    but redoing it would put a second matmul in P's recipe. Q stays kept; P is redone."""
    @tvm.script.ir_module
    class Projected:
        @R.function
        def main(x: R.Tensor((8, 4), "float32"), wq: R.Tensor((4, 4), "float32"),
                 k: R.Tensor((4, 8), "float32"), dy: R.Tensor((8, 8), "float32")):
            with R.dataflow():
                q = R.matmul(x, wq)
                q2 = R.reshape(q, R.shape([8, 4]))
                p = R.nn.softmax(R.matmul(q2, k), axis=-1)
                y = R.multiply(p, R.const(2.0, "float32"))
                p_adjoint = R.multiply(dy, p)
                k_adjoint = R.matmul(R.permute_dims(q2, [1, 0]), p_adjoint)
                R.output(k_adjoint, y)
            return (k_adjoint, y)

    text = recompute_attention_in_backward(Projected["main"]).script()
    assert "p_bwd: " in text and "q2_bwd" not in text and "q_bwd" not in text, text


class _Block(nn.Module):
    def __init__(self, d=16, h=2):
        super().__init__()
        self.qkv, self.o, self.h = nn.Linear(d, 3 * d), nn.Linear(d, d), h

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = [z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in self.qkv(x).split(d, -1)]
        return x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))


class _SDPA(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(_Block(), _Block(), _Block())
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.blocks(x)).mean(1)


def _sdpa_step(recompute: bool, monkeypatch):
    if not recompute:
        monkeypatch.setattr(autodiff, "recompute_attention_in_backward", lambda f: f)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, 32, 16, generator=g), torch.randint(0, 3, (2,), generator=g)
    torch.manual_seed(0)
    model = _SDPA()
    return model, x, y, from_torch(model, (x,), (y,), optimizer=Adam(lr=1e-3), quiet=True)


def test_sdpa_step_keeps_less_and_is_bit_identical(monkeypatch):
    from roam_tvm.passes import extract_graph
    from roam_tvm.order import plan_order
    from roam_tvm.report.simulate import schedule_for
    from test_numerics import tvm_step

    peaks, results = {}, {}
    for redo in (True, False):
        with monkeypatch.context() as mp:
            model, x, y, ts = _sdpa_step(redo, mp)
        g = extract_graph(schedule_for(ts.mod)[ts.func_name], schedule_for(ts.mod), ts.func_name).graph
        peaks[redo] = plan_order(g, progress=False, jobs=1).peak
        results[redo] = tvm_step(ts, (x,), (y,))
    assert peaks[True] < peaks[False] * 0.95, peaks
    assert results[True][0] == results[False][0]      # the loss
    for name, arr in results[True][2].items():
        np.testing.assert_array_equal(arr, results[False][2][name])


def test_sdpa_step_matches_pytorch():
    from test_numerics import compare_step

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, 32, 16, generator=g), torch.randint(0, 3, (2,), generator=g)
    torch.manual_seed(0)
    compare_step(_SDPA(), (x,), (y,), lambda out, t: F.cross_entropy(out, t), Adam(lr=1e-3))
