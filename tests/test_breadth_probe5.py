"""Fifth breadth probe (issue 13): ops a user's model brings that needed converters or
traceable forms, each at a tiny size in float64: a causal ``nn.Transformer``, CTC loss,
``grid_sample`` + ``affine_grid`` (a spatial transformer) and ``unfold`` / ``fold``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from test_numerics import compare_step  # noqa: E402

nn = torch.nn
F = torch.nn.functional
f64 = torch.float64


class CausalSeq2Seq(nn.Module):
    """``nn.Transformer`` with the causal ``tgt_mask`` of ``generate_square_subsequent_mask``
    (``full(-inf)`` then ``triu``), built inside forward as the PyTorch tutorials do."""

    def __init__(self, d=8):
        super().__init__()
        self.t = nn.Transformer(d, 2, 1, 1, 16, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, 5)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=src.dtype)
        return self.out(self.t(src, tgt, tgt_mask=mask))


def test_transformer_with_causal_tgt_mask_float64():
    torch.manual_seed(0)
    m = CausalSeq2Seq().double()
    src, tgt = torch.randn(2, 3, 8, dtype=f64), torch.randn(2, 4, 8, dtype=f64)
    y = torch.randint(0, 5, (2, 4))
    compare_step(m, (src, tgt), (y,), "cross_entropy", Adam(lr=1e-2), dtype="float64")


class DecoderOnly(nn.Module):
    """``nn.TransformerDecoder`` given the mask as an input (``-inf`` above the diagonal)."""

    def __init__(self, d=8):
        super().__init__()
        layer = nn.TransformerDecoderLayer(d, 2, 16, dropout=0.0, batch_first=True)
        self.dec = nn.TransformerDecoder(layer, 2)
        self.out = nn.Linear(d, 5)

    def forward(self, x, memory, mask):
        return self.out(self.dec(x, memory, tgt_mask=mask))


def test_transformer_decoder_mask_as_input_float64():
    torch.manual_seed(1)
    m = DecoderOnly().double()
    x, mem = torch.randn(2, 4, 8, dtype=f64), torch.randn(2, 3, 8, dtype=f64)
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=f64)
    y = torch.randint(0, 5, (2, 4))
    stats = compare_step(m, (x, mem, mask), (y,), "cross_entropy", SGD(lr=1.0), dtype="float64")
    assert stats["loss"] < 1e-9


class PatchMixer(nn.Module):
    """Patches by ``nn.Unfold`` (padding, stride, dilation), mixed by a Linear, put back by
    ``nn.Fold`` (overlapping windows add up) and classified."""

    def __init__(self, c=2, k=2):
        super().__init__()
        self.conv = nn.Conv2d(1, c, 1)
        self.unfold = nn.Unfold(k, dilation=(1, 2), padding=1, stride=(2, 1))
        self.mix = nn.Linear(c * k * k, c * k * k)
        self.fold = nn.Fold((5, 6), k, dilation=(1, 2), padding=1, stride=(2, 1))
        self.head = nn.Linear(c * 5 * 6, 3)

    def forward(self, x):
        cols = self.unfold(self.conv(x))  # [N, c*k*k, L]
        cols = self.mix(cols.transpose(1, 2)).transpose(1, 2)
        return self.head(torch.tanh(self.fold(cols)).flatten(1))


def test_unfold_and_fold_float64():
    torch.manual_seed(2)
    m = PatchMixer().double()
    x = torch.randn(2, 1, 5, 6, dtype=f64)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64")


class TinySTN(nn.Module):
    """A spatial transformer classifier: ``theta`` from a localization net, ``affine_grid``,
    ``grid_sample`` (its grid reaches past the image, so zero padding matters)."""

    def __init__(self, align_corners, padding_mode="zeros"):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 3 * 4, 6))
        self.head = nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.Flatten(), nn.Linear(2 * 5 * 6, 3))
        self.align_corners, self.padding_mode = align_corners, padding_mode
        with torch.no_grad():  # a zoom-out with some rotation: corners sample outside the image
            self.loc[-1].bias.copy_(torch.tensor([1.2, 0.3, 0.1, -0.2, 1.3, -0.1]))

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=self.align_corners)
        y = F.grid_sample(x, grid, padding_mode=self.padding_mode, align_corners=self.align_corners)
        return self.head(y)


@pytest.mark.parametrize("align_corners,padding_mode",
                         [(True, "zeros"), pytest.param(False, "zeros", marks=pytest.mark.slow), (False, "border")])
def test_spatial_transformer_float64(align_corners, padding_mode):
    torch.manual_seed(3)
    m = TinySTN(align_corners, padding_mode).double()
    x = torch.randn(2, 2, 5, 6, dtype=f64)
    compare_step(m, (x,), (torch.tensor([1, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64")


def test_grid_sample_unsupported_mode_is_named():
    from roam_tvm.frontend.errors import UnsupportedError

    class Nearest(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(2, 2)

        def forward(self, x):
            grid = torch.tanh(self.l(x.permute(0, 2, 3, 1)))
            return F.grid_sample(x, grid, mode="nearest", align_corners=False).flatten(1)

    with pytest.raises(UnsupportedError, match="mode='nearest'"):
        from_torch(Nearest(), (torch.randn(2, 2, 3, 3),), (torch.tensor([0, 1]),), quiet=True)


class ExpHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(3, 4)

    def forward(self, x):
        return self.l(x)


def test_python_sum_of_a_list_in_the_loss_float64():
    """``sum(terms)`` starts with ``0 + terms[0]``, which TVM's build turns into a view of
    ``terms[0]``: the in-place gradient accumulation must not write into it (``exp`` keeps
    its output for its own backward)."""
    torch.manual_seed(4)
    m = ExpHead().double()
    x = torch.randn(2, 3, dtype=f64)

    def loss(out, y):
        return sum(torch.exp(out[:, i]) for i in range(3)).mean() + F.cross_entropy(out, y)

    compare_step(m, (x,), (torch.tensor([0, 3]),), loss, SGD(lr=1.0), dtype="float64")


class CTCHead(nn.Module):
    """``[T, N, C]`` log-probabilities, as ``F.ctc_loss`` takes them."""

    def __init__(self, c=5):
        super().__init__()
        self.l = nn.Linear(3, c)

    def forward(self, x):
        return self.l(x).log_softmax(-1)


def _ctc_batch():
    x = torch.randn(6, 3, 3, dtype=f64)  # T=6, N=3
    targets = torch.tensor([[1, 2, 2], [3, 1, 0], [4, 0, 0]])  # padded; a repeat needs a blank
    return x, targets, torch.tensor([6, 5, 4]), torch.tensor([3, 2, 1])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_ctc_loss_callable_float64(reduction):
    torch.manual_seed(5)
    x, tg, il, tl = _ctc_batch()

    def loss(out, tg, il, tl):
        return F.ctc_loss(out, tg, il, tl, blank=0, reduction=reduction)

    compare_step(CTCHead().double(), (x,), (tg, il, tl), loss, SGD(lr=1.0), dtype="float64")


class CTCInside(nn.Module):
    """``nn.CTCLoss`` inside the model: forward returns the loss itself."""

    def __init__(self):
        super().__init__()
        self.head = CTCHead()
        self.ctc = nn.CTCLoss(zero_infinity=True)

    def forward(self, x, tg, il, tl):
        return self.ctc(self.head(x), tg, il, tl)


def test_ctc_loss_module_inside_the_model_float64():
    torch.manual_seed(6)
    x, tg, il, tl = _ctc_batch()
    # no targets: the model returns its loss, the loss callable passes it on
    compare_step(CTCInside().double(), (x, tg, il, tl), (), lambda out: out, Adam(lr=1e-2),
                 dtype="float64")


def test_ctc_concatenated_targets_are_refused():
    from roam_tvm.frontend.errors import UnsupportedError

    x, _, il, tl = _ctc_batch()
    flat = torch.tensor([1, 2, 2, 3, 1, 4])
    with pytest.raises(UnsupportedError, match="pass padded targets"):
        from_torch(CTCHead().double(), (x,), (flat, il, tl), loss=lambda o, *t: F.ctc_loss(o, *t),
                   quiet=True)


def test_ctc_targets_selected_from_padded_labels_float64():
    """Hugging Face's CTC heads: ``labels.masked_select(labels >= 0)`` of ``-100``-padded labels (padding
    in the middle of a row too) is read back as padded rows; the step matches PyTorch's."""
    torch.manual_seed(7)
    x, _, il, _ = _ctc_batch()
    labels = torch.tensor([[1, 2, 2], [3, -100, 1], [4, -100, -100]])

    def hf_ctc(out, labels, il):
        mask = labels >= 0
        return F.ctc_loss(out, labels.masked_select(mask), il, mask.sum(-1), blank=0, zero_infinity=True)

    compare_step(CTCHead().double(), (x,), (labels, il), hf_ctc, SGD(lr=1.0), dtype="float64")


class StraightThrough(nn.Module):
    """A straight-through estimator ``x + (round(x) - x).detach()`` and a detached scale."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 4)
        self.l2 = nn.Linear(4, 3)

    def forward(self, x):
        h = self.l1(x)
        q = h + (torch.round(h * 2) / 2 - h).detach()
        return self.l2(q) / h.abs().max().detach()


def test_detach_stops_the_gradient_float64():
    torch.manual_seed(7)
    m = StraightThrough().double()
    x = torch.randn(4, 3, dtype=f64)
    compare_step(m, (x,), (torch.tensor([0, 2, 1, 1]),), "cross_entropy", SGD(lr=1.0),
                 dtype="float64")


class GraySTN(nn.Module):
    """One input channel, then ``.view`` after a conv (the PyTorch STN tutorial's pattern):
    the sampled image must keep PyTorch's strides for the trace's ``view`` to work."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(16, 6)
        self.conv = nn.Conv2d(1, 2, 3)
        self.fc = nn.Linear(2 * 2 * 2, 3)

    def forward(self, x):
        theta = self.loc(x.view(-1, 16)).view(-1, 2, 3)
        y = F.grid_sample(x, F.affine_grid(theta, x.size(), align_corners=False),
                          align_corners=False)
        return self.fc(self.conv(y).view(-1, 8))


def test_grid_sample_single_channel_then_view_float64():
    torch.manual_seed(8)
    m = GraySTN().double()
    compare_step(m, (torch.randn(2, 1, 4, 4, dtype=f64),), (torch.tensor([0, 2]),),
                 "cross_entropy", SGD(lr=1.0), dtype="float64")


def test_splat_of_an_infinite_constant_builds():
    """A folded ``-inf`` tensor (a causal mask, CTC's impossible alignments) is filled at run
    time without ``topi.full``, which fails on an infinite fill."""
    import numpy as np
    from tvm import relax

    from roam_tvm.runtime.splat_constants import SplatConstants

    x = relax.Var("x", relax.TensorType((3, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.maximum(x, relax.const(np.full((3, 4), -np.inf, "float32"))))
            out = bb.emit_output(relax.op.add(y, relax.const(np.full((3, 4), np.inf, "float32"))))
        bb.emit_func_output(out)
    target = tvm.target.Target("llvm")
    with target:
        mod = SplatConstants()(relax.transform.LegalizeOps()(bb.get()))
    exe = tvm.compile(mod, target)
    data = np.arange(12, dtype="float32").reshape(3, 4)
    got = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(data)).numpy()
    assert np.all(np.isposinf(got))


def _simulated(model, inputs, targets, loss):
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.zoo import ModelSpec, OptimizerConfig

    spec = ModelSpec("probe", model.train(), inputs, targets, loss, OptimizerConfig("adam", 1e-3))
    return simulate_eager_step(spec)


def test_pytorch_simulation_counts_ctc_alpha_and_beta():
    """PyTorch's CTC keeps ``log_alpha [N, T, 2S+1]`` and makes ``log_beta`` of the same size in
    its backward: wider padded targets (same lengths) add both to the simulated peak."""
    torch.manual_seed(9)
    x, tg, il, tl = _ctc_batch()
    x = x.float()
    steps, n = x.shape[0], x.shape[1]
    peaks = []
    for pad in (0, 27):
        wide = torch.cat([tg, torch.zeros(n, pad, dtype=tg.dtype)], dim=1)
        out = _simulated(CTCHead(), (x,), (wide, il, tl), lambda o, *t: F.ctc_loss(o, *t))
        assert out["method"] == "simulated", out
        peaks.append(out["peak_bytes"])
    assert peaks[1] - peaks[0] >= 2 * n * steps * (2 * 27) * 4, peaks


def test_pytorch_simulation_of_a_causal_transformer():
    torch.manual_seed(10)
    src, tgt = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    out = _simulated(CausalSeq2Seq(), (src, tgt), (torch.randint(0, 5, (2, 4)),), "cross_entropy")
    assert out["method"] == "simulated" and out["peak_bytes"] > 0, out


def test_traced_forms_keep_pytorchs_autocast_dtypes():
    """Under autocast PyTorch runs im2col / col2im in the input's dtype and grid_sampler in
    float32; the traced forms (a conv, arithmetic) must not round to bf16 instead."""
    from roam_tvm.frontend.traceable_ops import traceable_functionals

    x, g = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 4, 2) * 2 - 1

    def dtypes():
        cols = F.unfold(x, 2)
        return (cols.dtype, F.fold(cols, (5, 6), 2).dtype,
                F.grid_sample(x.bfloat16(), g.bfloat16(), align_corners=False).dtype)

    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = dtypes()
        with traceable_functionals():
            assert dtypes() == expected
    ts = from_torch(PatchMixer(), (torch.randn(2, 1, 5, 6),), (torch.tensor([0, 2]),),
                    precision="bf16-amp", quiet=True)
    assert ts.param_names


_FACTORY = """
import torch
from test_breadth_probe5 import CTCInside, _ctc_batch

def with_loss():
    x, tg, il, tl = _ctc_batch()
    return CTCInside().double(), (x, tg, il, tl), (), lambda out: out

def without_loss():
    x, tg, il, tl = _ctc_batch()
    return CTCInside().double(), (x, tg, il, tl), ()
"""


def test_factory_without_targets_needs_a_loss_callable(tmp_path, monkeypatch):
    """A factory whose model returns its own loss gives no targets and a loss callable; with no
    callable, empty targets stay an error that names the way out."""
    import os

    from roam_tvm.zoo.factory import ZooError, load_factory

    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    path = tmp_path / "own_loss.py"
    path.write_text(_FACTORY)
    spec = load_factory(f"{path}:with_loss")
    assert spec.targets == () and spec.config["target_shapes"] == []
    with pytest.raises(ZooError, match="loss=lambda out: out"):
        load_factory(f"{path}:without_loss")
