"""The step keeps no more for the backward than PyTorch's autograd (issue 13, item 5).

* ``x * sigmoid(x)`` (torch.export's SiLU) becomes one ``silu`` and the spelled-out RMSNorm
  one ``rms_norm`` before autodiff (fuse_silu.py, fuse_rms_norm.py); ``rms_norm``'s
  gradient (norm_grad.py) reads only ``x`` and the weight.
* ``take``'s gradient (grad_fixes.py) no longer reads ``x``, and ``batch_norm``'s reads the
  output gradient itself, not TVM's ``zeros + g``.

Numerics against torch autograd in float64, the rewrites on Relax functions, and the memory
effect on a small model (its ``cut`` bound below PyTorch's simulated eager step).
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from roam_tvm.frontend.fuse_rms_norm import fuse_rms_norm  # noqa: E402
from roam_tvm.frontend.fuse_silu import fuse_silu  # noqa: E402
from test_numerics import compare_step  # noqa: E402

nn = torch.nn
F = nn.functional


class GatedBlock(nn.Module):
    """LLaMA's RMSNorm and SiLU-gated MLP (as Hugging Face writes them), a roll
    (exported as index_select) and a BatchNorm over the result."""

    def __init__(self, d=8, ffn=12, classes=3):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.norm_w = nn.Parameter(torch.rand(d) + 0.5)
        self.gate, self.up, self.down = nn.Linear(d, ffn), nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.bn = nn.BatchNorm1d(d)
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        h = self.inp(x)
        n = self.norm_w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))
        h = h + self.down(F.silu(self.gate(n)) * self.up(n))
        h = torch.roll(h, shifts=(1, -2), dims=(1, 2))
        return self.out(self.bn(h.transpose(1, 2)).mean(-1))


def _case(dtype, batch=2, seq=5, **sizes):
    torch.manual_seed(0)
    model = GatedBlock(**sizes).to(dtype)
    x = torch.randn(batch, seq, model.inp.in_features, dtype=dtype)
    return model, (x,), (torch.randint(0, 3, (batch,)),)


def test_changed_gradients_match_torch_float64():
    """silu, take (the roll) and batch_norm in float64 (rms_norm is folded for float32 only)."""
    model, ins, tgs = _case(torch.float64)
    compare_step(model, ins, tgs, "cross_entropy", SGD(lr=1.0), dtype="float64")


@pytest.mark.slow  # also covered by test_families' llama (RMSNorm, SiLU gate)
def test_folded_step_matches_torch_float32():
    """The same block in float32, its RMSNorm folded into one rms_norm."""
    model, ins, tgs = _case(torch.float32)
    compare_step(model, ins, tgs, "cross_entropy", Adam(lr=1e-3))


def test_rms_norm_gradient_float64():
    """rms_norm's registered gradient against torch autograd, w.r.t. x and the weight."""
    import numpy as np

    from roam_tvm.frontend import gradients

    gradients.ensure_registered()
    shape = (2, 3, 6)
    x = relax.Var("x", relax.TensorType(shape, "float64"))
    w = relax.Var("w", relax.TensorType((6,), "float64"))
    g = relax.Var("g", relax.TensorType(shape, "float64"))
    bb = relax.BlockBuilder()
    with bb.function("f", [x, w, g]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.rms_norm(x, w, axes=[-1], epsilon=1e-5))
            s = bb.emit_output(bb.emit(relax.op.sum(relax.op.multiply(y, g))))
        bb.emit_func_output(s)
    mod = relax.transform.Gradient("f", require_grads=[x, w])(bb.get())
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    rng = np.random.default_rng(0)
    xv, wv, gv = rng.standard_normal(shape), rng.standard_normal(6), rng.standard_normal(shape)
    _, (dx, dw) = vm["f_adjoint"](*(tvm.runtime.tensor(v) for v in (xv, wv, gv)))
    xt, wt = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
    yt = wt * (xt * torch.rsqrt(xt.pow(2).mean(-1, keepdim=True) + 1e-5))
    (yt * torch.tensor(gv)).sum().backward()
    np.testing.assert_allclose(dx.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw.numpy(), wt.grad.numpy(), rtol=1e-12, atol=1e-12)


def _ops(func) -> list[str]:
    return [b.value.op.name for blk in func.body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)]


def test_fuse_silu_either_order():
    @R.function
    def f(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            a = R.multiply(x, R.sigmoid(x))
            b = R.multiply(R.sigmoid(a), a)
            c = R.multiply(x, R.sigmoid(a))  # not a silu: x is not the sigmoid's input
            o = R.add(b, c)
            R.output(o)
        return o

    ops = _ops(relax.transform.DeadCodeElimination()(tvm.IRModule({"main": fuse_silu(f)}))["main"])
    assert ops.count("relax.nn.silu") == 2 and ops.count("relax.sigmoid") == 1


def test_fuse_rms_norm_pattern_and_non_matches():
    @R.function
    def f(x: R.Tensor((2, 3, 8), "float32"), w: R.Tensor((8,), "float32")):
        with R.dataflow():
            r = R.rsqrt(R.add(R.mean(R.power(x, R.const(2.0, "float32")), axis=[-1], keepdims=True),
                              R.const(1e-6, "float32")))
            o = R.multiply(w, R.multiply(x, r))
            # a cube, not a square: left alone
            r3 = R.rsqrt(R.add(R.mean(R.power(x, R.const(3.0, "float32")), axis=[-1], keepdims=True),
                               R.const(1e-6, "float32")))
            p = R.multiply(w, R.multiply(x, r3))
            # statistics over axis 1, which the weight does not span: left alone
            r1 = R.rsqrt(R.add(R.mean(R.multiply(x, x), axis=[1], keepdims=True),
                               R.const(1e-6, "float32")))
            q = R.multiply(R.multiply(r1, x), w)
            s = R.add(R.add(o, p), q)
            R.output(s)
        return s

    out = fuse_rms_norm(f)
    calls = [b.value for blk in out.body.blocks for b in blk.bindings
             if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
             and b.value.op.name == "relax.nn.rms_norm"]
    assert len(calls) == 1
    assert [int(a) for a in calls[0].attrs.axes] == [2]
    assert abs(float(calls[0].attrs.epsilon) - 1e-6) < 1e-12


def _cut_and_pytorch(model, ins, tgs):
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.report.simulate import lower_bounds, schedule_for
    from roam_tvm.passes import extract_graph
    from roam_tvm.zoo.spec import ModelSpec, OptimizerConfig

    ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    mod = schedule_for(with_param_kinds(ts))
    g = extract_graph(mod[ts.func_name], mod, ts.func_name).graph
    spec = ModelSpec("gated", model, ins, tgs, optimizer=OptimizerConfig(kind="adam", lr=1e-3))
    return lower_bounds(g)["cut"], simulate_eager_step(spec)["peak_bytes"]


@pytest.mark.slow  # two imports and two cut bounds: 10-25 s
def test_keeps_no_more_than_pytorch(monkeypatch):
    """With the folds the whole step's least peak (``cut``) is below PyTorch's eager step;
    without them (the ops as torch.export spells them) it is above."""
    from roam_tvm.frontend import forward_prep as step

    model, ins, tgs = _case(torch.float32, batch=4, seq=32, d=32, ffn=96)
    cut, torch_peak = _cut_and_pytorch(model, ins, tgs)
    assert cut < torch_peak, (cut, torch_peak)
    # the elementwise redo (backward_elementwise.py) alone also brings the unfused ops below
    # PyTorch (measured 408,204 B): switched off so the folds are what is measured
    from roam_tvm.frontend import autodiff

    monkeypatch.setattr(autodiff, "recompute_elementwise_in_backward", lambda f: f)
    monkeypatch.setattr(step, "fuse_silu", lambda f: f)
    monkeypatch.setattr(step, "fuse_rms_norm", lambda f: f)
    unfused, _ = _cut_and_pytorch(model, ins, tgs)
    assert torch_peak < unfused, (torch_peak, unfused)
    # at least sigmoid(gate), 4 x 32 x 96 float32, is no longer kept (measured: 440,476 B
    # folded, 457,376 without the RMSNorm fold, 489,628 without the SiLU one; PyTorch 469,848)
    assert unfused - cut >= 4 * 32 * 96 * 4, (unfused, cut)
