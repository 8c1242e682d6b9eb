"""What the backward keeps of a layer/batch norm (roam_tvm/frontend/norm_grad.py).

Relax ``Gradient`` saves, from the forward, whatever each gradient reads. Autodiff of the
decomposed norm (mean, subtract, variance, sqrt, divide, multiply, add) saved ``x - mean``
and the normalised ``x_hat`` besides the input; the fused gradient reads only the input
(and gamma). These tests count the full-size forward tensors that the backward reads.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend.step import _bindings, _free_vars, _op_name  # noqa: E402


def _saved_for_backward(ts, shape):
    """``{var name: op}`` of every tensor of ``shape`` that the forward computes and a binding
    after the loss (the backward) reads."""
    f = ts.mod["train_step"]
    binds = _bindings(f)
    ret = f.body.body
    defs = {b.var: b.value for b in binds}
    while isinstance(ret, relax.Var) and isinstance(defs.get(ret), (relax.Var, relax.Tuple)):
        ret = defs[ret]
    loss = ret.fields[0]
    end = next(i for i, b in enumerate(binds) if b.var.same_as(loss))
    fwd = {b.var: _op_name(b.value) for b in binds[:end + 1]
           if isinstance(b.var.ty, relax.TensorType)
           and [int(s) for s in b.var.ty.shape.values] == list(shape)}
    saved = {}
    for b in binds[end + 1:]:
        for v in _free_vars(b.value):
            if v in fwd:
                saved[v.name] = fwd[v]
    return saved


class LNNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.l2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.l2(self.ln(self.l1(x)))


class BNNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 6 * 6, 4)

    def forward(self, x):
        return self.fc(torch.tanh(self.bn(self.conv(x))).flatten(1))


def test_layer_norm_backward_keeps_only_input_and_output():
    torch.manual_seed(0)
    x, y = torch.randn(5, 16), torch.randint(0, 4, (5,))
    ts = from_torch(LNNet(), (x,), (y,), optimizer=SGD(lr=0.1), quiet=True)
    saved = _saved_for_backward(ts, (5, 32))
    # the norm's input (its gradient) and its output (l2's weight gradient); the decomposed
    # chain also kept x_hat (the divide's output, read by the gamma multiply's gradient)
    assert len(saved) == 2, saved
    assert not {"relax.subtract", "relax.divide", "relax.multiply"} & set(saved.values()), saved
    text = ts.mod.script()
    assert "relax.nn.layer_norm" not in text  # decomposed after autodiff
    # the gradient reads the forward's statistics (share_statistics), no second variance
    assert text.count("R.variance(") == 1


def test_batch_norm_backward_keeps_only_input_and_output():
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 6, 6), torch.randint(0, 4, (4,))
    ts = from_torch(BNNet(), (x,), (y,), optimizer=SGD(lr=0.1), quiet=True)
    saved = _saved_for_backward(ts, (4, 8, 6, 6))
    # the conv output (bn's input) and tanh's output (tanh's gradient reads it); the
    # decomposed chain also kept x_hat (divide)
    assert sorted(saved.values()) == ["relax.nn.conv2d", "relax.tanh"], saved
    # one variance for the forward, the running-stat update and the gradient
    assert ts.mod["train_step"].script().count("R.variance(") == 1


def test_batch_norm_inference_mode_gradient_float64():
    """batch_norm with training=False (running statistics) through Relax Gradient directly,
    against torch autograd in float64."""
    import numpy as np
    from tvm.relax import op as R

    from roam_tvm.frontend.gradients import ensure_registered

    ensure_registered()
    rng = np.random.default_rng(0)
    shp, c = (3, 4, 5, 2), 4
    vals = {"x": rng.standard_normal(shp), "g": rng.uniform(0.5, 1.5, c),
            "b": rng.uniform(-0.5, 0.5, c), "rm": rng.standard_normal(c),
            "rv": rng.uniform(0.5, 2.0, c), "w": rng.standard_normal(shp)}
    vs = {k: relax.Var(k, relax.TensorType(v.shape, "float64")) for k, v in vals.items()}
    bb = relax.BlockBuilder()
    with bb.function("f", list(vs.values())):
        with bb.dataflow():
            t = bb.emit(R.nn.batch_norm(vs["x"], vs["g"], vs["b"], vs["rm"], vs["rv"], axis=1,
                                        epsilon=1e-5, training=False))
            y = bb.emit(relax.TupleGetItem(t, 0))
            out = bb.emit_output(R.sum(R.multiply(y, vs["w"])))
        bb.emit_func_output(out)
    mod = relax.transform.Gradient("f", require_grads=[vs["x"], vs["g"], vs["b"]])(bb.get())
    mod = relax.transform.DecomposeOpsForTraining()(mod)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    res = vm["f_adjoint"](*[tvm.runtime.tensor(v) for v in vals.values()])
    got = [res[1][i].numpy() for i in range(3)]
    tt = {k: torch.tensor(v, requires_grad=k in ("x", "g", "b")) for k, v in vals.items()}
    yt = torch.nn.functional.batch_norm(tt["x"], tt["rm"], tt["rv"], tt["g"], tt["b"],
                                        training=False, eps=1e-5)
    (yt * tt["w"]).sum().backward()
    for k, g in zip(("x", "g", "b"), got):
        np.testing.assert_allclose(g, tt[k].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=k)


class _TransposedBN(torch.nn.Module):
    """CLAP's audio encoder: BatchNorm over mel bins, ``bn(x.transpose(1, 3))`` on a ``[B, 1, T, F]``
    spectrogram (a ``[B, F, T, 1]`` view), then a permute."""

    def __init__(self, channels: int):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.bn(x.transpose(1, 3)).permute(0, 3, 1, 2)


class _WrittenOutBN(torch.nn.Module):
    """The same batch norm written out in ops (mean, biased variance, normalise, scale, shift)."""

    def __init__(self, channels: int):
        super().__init__()
        self.bn = torch.nn.Module()
        self.bn.weight = torch.nn.Parameter(torch.ones(channels))
        self.bn.bias = torch.nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        h = x.transpose(1, 3)
        mean = h.mean((0, 2, 3), keepdim=True)
        var = h.var((0, 2, 3), keepdim=True, unbiased=False)
        y = (h - mean) / torch.sqrt(var + 1e-5) * self.bn.weight.view(1, -1, 1, 1) + self.bn.bias.view(1, -1, 1, 1)
        return y.permute(0, 3, 1, 2)


def test_batch_norm_on_a_transposed_view_matches_the_written_out_norm():
    # PyTorch 2.13's CPU batch_norm backward gets gamma's gradient wrong for this input: the [B, F, T, 1]
    # view passes for channels-last (its size-1 dim's stride is free) while the output gradient, through
    # the permute, is laid out otherwise. The planned step matches the same norm written out in ops, in
    # float64 (the check is against that, not against torch's native kernel).
    import numpy as np
    from test_numerics import tvm_step

    torch.manual_seed(0)
    native, written = _TransposedBN(8).double(), _WrittenOutBN(8).double()
    with torch.no_grad():
        native.bn.weight.uniform_(0.5, 1.5)
        native.bn.bias.uniform_(-0.5, 0.5)
        written.bn.weight.copy_(native.bn.weight)
        written.bn.bias.copy_(native.bn.bias)
    x, target = torch.randn(2, 1, 5, 8, dtype=torch.float64), torch.randn(2, 1, 8, 5, dtype=torch.float64)
    ts = from_torch(native, (x,), (target,), loss="mse", optimizer=SGD(lr=0.1), quiet=True)
    loss, _, after = tvm_step(ts, (x,), (target,))
    ref_loss = torch.nn.functional.mse_loss(written(x), target)
    ref_loss.backward()
    assert abs(loss - ref_loss.item()) < 1e-12
    for name in ("bn.weight", "bn.bias"):
        p = dict(written.named_parameters())[name]
        np.testing.assert_allclose(after[name], (p - 0.1 * p.grad).detach().numpy(), rtol=1e-10, atol=1e-12)
