"""What models outside the zoo and outside roam_tvm/zoo/families.py needed (issue 13's
breadth check, run as ``roam-tvm compare --model file.py:factory``): each case here broke the
import of such a model, until fixed. A bidirectional LSTM (``flip``), Switch-style top-1
routing (``one_hot``'s run-time asserts), transformers' Mixtral / Qwen2-MoE (their default
``grouped_mm`` experts), a TCN (``conv1d``, dilation, ``amax``), a U-Net decoder
(``ConvTranspose2d``, bilinear upsampling, ``AdaptiveAvgPool2d``). Tiny sizes, random
weights; each step is checked against PyTorch's own, the gradients in float64 where TVM
builds the ops in float64."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from test_numerics import compare_step  # noqa: E402

F = torch.nn.functional


class FlipOneHotNet(torch.nn.Module):
    """A linear layer; its output reversed along two axes (``flip``: no TVM gradient) and
    masked by a top-1 ``one_hot`` routing (its decomposition asserts the classes' range at
    run time, which made TVM's importer build an impure function)."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(6, 6)
        self.l2 = torch.nn.Linear(6, 3)

    def forward(self, x):  # x: (2, 5, 6)
        h = self.l1(x)
        route = F.one_hot(h.argmax(-1), 6).to(h.dtype)
        return self.l2(torch.flip(h, [1]) * h + torch.flip(h, [2]) * route).mean(1)


def test_flip_and_one_hot_float64():
    torch.manual_seed(0)
    m = FlipOneHotNet().double()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0),
                 dtype="float64")


class BiLSTMTagger(torch.nn.Module):
    """Bidirectional LSTM (the reverse direction is a ``flip``), per-step [B, C, T] logits."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(4, 6, 1, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(12, 3)

    def forward(self, x):
        return self.fc(self.rnn(x)[0]).transpose(1, 2)


@pytest.mark.slow  # 30 s on 2 shared cores
def test_bidirectional_lstm_tagger():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    m = BiLSTMTagger()
    x, y = torch.randn(2, 4, 4, generator=g), torch.randint(0, 3, (2, 4), generator=g)
    ts = from_torch(m, (x,), (y,), loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    compare_step(m, (x,), (y,), lambda out, t: F.cross_entropy(out, t), Adam(lr=1e-3), ts=ts)


def _hf_moe(kind):
    tf = pytest.importorskip("transformers")
    from transformers.utils import logging

    logging.set_verbosity_error()
    torch.manual_seed(0)
    common = dict(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=1, use_cache=False,
                  attn_implementation="eager", attention_dropout=0.0,
                  output_router_logits=False)
    if kind == "mixtral":
        cfg = tf.MixtralConfig(num_local_experts=3, num_experts_per_tok=2, **common)
        return tf.MixtralForCausalLM(cfg)
    cfg = tf.Qwen2MoeConfig(num_experts=3, num_experts_per_tok=2, moe_intermediate_size=12,
                            shared_expert_intermediate_size=16, decoder_sparse_step=1,
                            mlp_only_layers=[], **common)
    return tf.Qwen2MoeForCausalLM(cfg)


class _Logits(torch.nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, ids):
        return self.hf(input_ids=ids).logits


@pytest.mark.slow  # 70-100 s each on 2 shared cores
@pytest.mark.parametrize("kind", ["mixtral", "qwen2_moe"])
def test_hf_moe_default_experts_import_and_match(kind):
    """transformers' default experts ("grouped_mm": histc + torch._grouped_mm) have no TVM
    converter; the import switches to the static "batched_mm" form for the export only."""
    hf = _hf_moe(kind)
    before = hf.config._experts_implementation
    m = _Logits(hf)
    g = torch.Generator().manual_seed(0)
    ids, y = torch.randint(0, 32, (2, 5), generator=g), torch.randint(0, 32, (2, 5), generator=g)
    ts = from_torch(m, (ids,), (y,), loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    assert hf.config._experts_implementation == before  # the user's choice is restored
    # the reference: PyTorch's step with transformers' "eager" experts (a loop over the
    # experts that index_add their tokens back; grouped_mm has no float64 kernel)
    hf.set_experts_implementation("eager")
    compare_step(m, (ids,), (y,), "cross_entropy", Adam(lr=1e-3), ts=ts)


@pytest.mark.parametrize("implementation", ["eager", "batched_mm"])
def test_hf_moe_exports_without_ragged_ops(implementation):
    """Fast: within ``exportable_experts`` (the eager loop traced dense, or the batched fallback) the
    export has neither ``histc`` nor a grouped matmul, nor a value-sized ``nonzero``, and the user's
    experts implementation comes back afterwards."""
    from roam_tvm.frontend.dense_dispatch import dense_dispatch
    from roam_tvm.frontend.hf_experts import EXPORT_IMPLEMENTATIONS, exportable_experts

    assert EXPORT_IMPLEMENTATIONS == ("eager", "batched_mm")  # dense eager first: no gathered weights
    hf = _hf_moe("mixtral")
    before = hf.config._experts_implementation
    ids = torch.randint(0, 32, (2, 5))
    with exportable_experts(hf, implementation), dense_dispatch():
        assert hf.config._experts_implementation == implementation
        ep = torch.export.export(_Logits(hf), (ids,), strict=False)
    assert hf.config._experts_implementation == before
    targets = {str(n.target) for n in ep.graph.nodes
               if n.op == "call_function"}
    assert not [t for t in targets if "histc" in t or "grouped_mm" in t or "nonzero" in t], sorted(targets)


def test_pytorch_simulation_of_hf_moe():
    """The simulated PyTorch baseline runs HF MoE layers too (grouped_mm has no float32
    fake-tensor kernel): a peak above the parameters and Adam's states, and the model's own
    experts implementation untouched."""
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.zoo.spec import ModelSpec, OptimizerConfig

    hf = _hf_moe("mixtral")
    before = hf.config._experts_implementation
    ids = torch.randint(0, 32, (2, 5))
    spec = ModelSpec("mixtral", _Logits(hf), (ids,), (ids,), optimizer=OptimizerConfig("adam"))
    peak = simulate_eager_step(spec)["peak_bytes"]
    params = sum(p.numel() * p.element_size() for p in hf.parameters())
    assert peak > 3 * params
    assert hf.config._experts_implementation == before


class ConvNet(torch.nn.Module):
    """Conv1d (stride, dilation, groups) and ConvTranspose2d (stride 2, output_padding, groups):
    neither has a gradient in TVM 0.27; a dilated Conv2d, whose TVM gradient fails."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2)
        self.up = torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1,
                                           groups=2)
        self.dilated = torch.nn.Conv2d(4, 4, 3, padding=2, dilation=2)
        self.up2 = torch.nn.ConvTranspose2d(4, 2, 2, stride=2)
        self.fc = torch.nn.Linear(2 * 12 * 12 + 6 * 3, 3)

    def forward(self, x):  # x: (2, 4, 6)
        h = torch.tanh(self.c1(x))  # (2, 6, 3)
        img = torch.relu(self.up(h[:, :, :, None] * h[:, :, None, :]))  # (2, 4, 6, 6)
        img = self.up2(torch.tanh(self.dilated(img)))  # (2, 2, 12, 12)
        return self.fc(torch.cat([img.flatten(1), h.flatten(1)], 1))


def test_conv1d_and_conv_transpose_gradients_float64():
    torch.manual_seed(0)
    m = ConvNet().double()
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0),
                 dtype="float64")


class ExtremeNet(torch.nn.Module):
    """amax / amin over some dims (no TVM converter) and max() over all (no TVM gradient),
    with a tie the gradient splits evenly, as PyTorch's does; adaptive_avg_pool2d (no TVM
    gradient)."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(6, 6)
        self.l2 = torch.nn.Linear(6, 3)

    def forward(self, x):  # x: (2, 4, 6)
        h = self.l1(x)
        top = h[:, :1] + 100.0
        tie = torch.cat([top, top, h[:, 2:]], 1)  # rows 0 and 1 equal, and the max
        pooled = tie.amax(1) + h.amin((1,), keepdim=True)[:, 0] * h.max()
        # adaptive average pooling to 3x4 from 4x6 (rows overlap) and to 2x3 (they do not)
        img = (h[:, :, None, :] * pooled[:, None, :, None]).reshape(2, 6, 4, 6)
        pools = (F.adaptive_avg_pool2d(img, (3, 4)).sum((2, 3))
                 + F.adaptive_avg_pool2d(img, (2, 3)).amax((2, 3)))
        return self.l2(pooled + pools)


def test_amax_amin_max_adaptive_pool_gradients_float64():
    torch.manual_seed(0)
    m = ExtremeNet().double()
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0),
                 dtype="float64")


class BilinearNet(torch.nn.Module):
    """Bilinear upsampling, align_corners False and True, and a non-integer size; nearest too."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(2, 2, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 + 7 * 5 + 6 * 6, 3)

    def forward(self, x):  # x: (2, 2, 4, 3)
        h = torch.tanh(self.c(x))
        up = [F.interpolate(h, size=(8, 8), mode="bilinear", align_corners=False),
              F.interpolate(h, size=(7, 5), mode="bilinear", align_corners=True),
              F.interpolate(h[:, :, :3], scale_factor=2.0, mode="nearest")]
        return self.fc(torch.cat([u.sum(1).flatten(1) for u in up], 1))


def test_bilinear_resize_gradient_float32():
    """float32: TVM's resize2d rounds float64 through float32 (see test_grad_ops)."""
    torch.manual_seed(0)
    m = BilinearNet()
    x = torch.randn(2, 2, 4, 3)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=0.1))
