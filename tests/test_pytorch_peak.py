"""The PyTorch eager baseline: simulated peak on fake/meta tensors."""
import pytest
import torch
from torch import nn

from roam_tvm.report.pytorch_peak import pytorch_peak
from roam_tvm.zoo import ModelSpec, OptimizerConfig, get_model


def _mlp_spec(batch=256, din=8, hidden=512, dout=8, optimizer=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(din, hidden), nn.ReLU(), nn.Linear(hidden, dout))
    x = torch.randn(batch, din)
    y = torch.randint(0, dout, (batch,))
    return ModelSpec("mlp-hand", model.train(), (x,), (y,), "cross_entropy", optimizer or OptimizerConfig("sgd", 0.1))


def test_mlp_matches_hand_computation():
    B, D, H, C = 256, 8, 512, 8
    spec = _mlp_spec(B, D, H, C)
    r = pytorch_peak(spec, device="meta")
    assert r["method"] == "simulated"
    f = 4
    params = (D * H + H + H * C + C) * f
    inputs = B * D * f + B * 8  # x (fp32) + int64 labels
    grads_layer2 = (H * C + C) * f
    act = B * H * f
    # Peak: threshold_backward (ReLU's backward) reads the incoming gradient and the saved ReLU output and writes
    # the gradient of the pre-activation: three [B, H] tensors, while params, inputs and the gradients of the
    # second Linear (already accumulated into .grad) are live. The logits' gradient is dead by then.
    expected = params + inputs + grads_layer2 + 3 * act
    assert r["peak_bytes"] == expected
    d = r["detail"]
    assert d["peak_phase"] == "backward" and "threshold_backward" in d["peak_op"]
    assert d["params_bytes"] == params and d["inputs_bytes"] == inputs
    assert d["grads_bytes"] == params and d["optimizer_state_bytes"] == 0
    assert d["grads_at_peak_bytes"] == grads_layer2
    assert d["activations_bytes"] == 3 * act


def test_optimizer_states_counted():
    sgd = pytorch_peak(_mlp_spec(batch=4, optimizer=OptimizerConfig("sgd", 0.1)), device="meta")
    adam = pytorch_peak(_mlp_spec(batch=4, optimizer=OptimizerConfig("adam", 0.1, weight_decay=1e-4)),
                        device="meta")
    p = sgd["detail"]["params_bytes"]
    assert adam["detail"]["optimizer_state_bytes"] == 2 * p
    # tiny batch: the peak sits in the optimizer step, where every gradient and both moments are live
    assert adam["detail"]["peak_phase"] == "optimizer"
    assert adam["peak_bytes"] >= 4 * p


@pytest.mark.parametrize("name", ["cnn", "resnet18", "gpt2-xl-paper",
                                  pytest.param("gpt2-small", marks=pytest.mark.slow),
                                  pytest.param("bert-base", marks=pytest.mark.slow),
                                  pytest.param("vit-tiny", marks=pytest.mark.slow),
                                  pytest.param("mobilenet_v2", marks=pytest.mark.slow),
                                  pytest.param("vgg11", marks=pytest.mark.slow)])
def test_peak_at_least_params_grads_states(name):
    spec = get_model(name, small=True)
    r = pytorch_peak(spec, device="meta")
    d = r["detail"]
    assert d["untracked_bytes"] == 0
    assert d["grads_bytes"] == d["params_bytes"]
    assert d["optimizer_state_bytes"] == spec.optimizer.state_per_param * d["params_bytes"]
    assert r["peak_bytes"] >= d["params_bytes"] + d["grads_bytes"] + d["optimizer_state_bytes"]
    assert r["peak_bytes"] == (d["params_bytes"] + d["buffers_bytes"] + d["inputs_bytes"] +
                               d["optimizer_state_bytes"] + d["grads_at_peak_bytes"] + d["activations_bytes"])


def test_meta_small_gpt2_same_as_real():
    real = pytorch_peak(get_model("gpt2-small", small=True), device="meta")
    meta = pytorch_peak(get_model("gpt2-small", small=True, meta=True), device="meta")
    assert meta["peak_bytes"] == real["peak_bytes"] > 0
    # the spec's own (meta) model is left untouched: no grads, no optimizer state
    spec = get_model("gpt2-xl-paper", small=True, meta=True)
    pytorch_peak(spec, device="meta")
    assert all(p.grad is None for p in spec.model.parameters())


def test_activations_grow_with_batch():
    a = pytorch_peak(get_model("gpt2-xl-paper", small=True, batch=2, seq=32), device="meta")
    b = pytorch_peak(get_model("gpt2-xl-paper", small=True, batch=8, seq=32), device="meta")
    assert b["peak_bytes"] > a["peak_bytes"]
    assert b["detail"]["params_bytes"] == a["detail"]["params_bytes"]


def test_foreach_needs_more_for_adam():
    spec = _mlp_spec(batch=4, optimizer=OptimizerConfig("adam", 0.1, weight_decay=1e-4))
    loop = pytorch_peak(spec, device="meta", foreach=False)
    multi = pytorch_peak(spec, device="meta", foreach=True)
    assert multi["peak_bytes"] > loop["peak_bytes"]


def test_bad_device():
    with pytest.raises(ValueError, match="unsupported device"):
        pytorch_peak(_mlp_spec(batch=4), device="tpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_measured_vs_simulated():
    spec = get_model("gpt2-small", small=True)
    m = pytorch_peak(spec, device="cuda")
    s = pytorch_peak(spec, device="meta")
    assert m["method"] == "measured"
    assert m["peak_bytes"] >= s["detail"]["params_bytes"] * 3


@pytest.mark.slow
def test_gpt2_xl_paper_batch1():
    r = pytorch_peak(get_model("gpt2-xl-paper", batch=1, meta=True), device="meta")
    d = r["detail"]
    assert 1.5e9 * 4 < d["params_bytes"] < 1.6e9 * 4
    assert d["optimizer_state_bytes"] == 2 * d["params_bytes"]
    assert r["peak_bytes"] > 4 * d["params_bytes"]


class _ScaledByArange(nn.Module):
    """Makes a tensor without a device in its forward (like a sinusoidal time embedding)."""

    def __init__(self, width=64):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return self.lin(x) * torch.arange(x.shape[-1], dtype=x.dtype)


def test_tensor_made_in_forward_without_device():
    torch.manual_seed(0)
    B, W = 32, 64
    spec = ModelSpec("arange", _ScaledByArange(W).train(), (torch.randn(B, W),),
                     (torch.randint(0, W, (B,)),), "cross_entropy", OptimizerConfig("sgd", 0.1))
    r = pytorch_peak(spec, device="meta")
    # the arange is step memory like any activation: the peak holds more than the
    # parameters, the input and the gradients
    f = 4
    assert r["peak_bytes"] > 2 * (W * W + W) * f + B * W * f + B * 8 + W * f


class _CastsItsRouter(nn.Module):
    """Casts a submodule to its own dtype in forward, as HF Switch Transformers' router does."""

    def __init__(self, width=16):
        super().__init__()
        self.router = nn.Linear(width, width)

    def forward(self, x):
        self.router = self.router.to(torch.float32)
        return self.router(x)


def test_module_cast_to_its_own_dtype_in_forward():
    torch.manual_seed(0)
    spec = ModelSpec("cast", _CastsItsRouter().train(), (torch.randn(4, 16),),
                     (torch.randint(0, 16, (4,)),), "cross_entropy", OptimizerConfig("sgd", 0.1))
    r = pytorch_peak(spec, device="meta")
    assert r["peak_bytes"] >= 2 * (16 * 16 + 16) * 4 + 4 * 16 * 4


def test_real_value_recording_counts_like_the_fake_one():
    """The real-tensor path (for value-sized steps) gives the fake path's figure on a static step."""
    from roam_tvm.report.pytorch_peak import _simulate

    spec = _mlp_spec(batch=8, optimizer=OptimizerConfig("adam", 0.1))
    fake = _simulate(spec, False, real_values=False)
    real = _simulate(spec, False, real_values=True)
    assert real["peak_bytes"] == fake["peak_bytes"]
    assert real["detail"]["optimizer_state_bytes"] == fake["detail"]["optimizer_state_bytes"] > 0


class _RoutesByValue(nn.Module):
    """Top-1 routing by ``nonzero``: sizes depend on the values."""

    def __init__(self, width=16, experts=4):
        super().__init__()
        self.router = nn.Linear(width, experts)
        self.experts = nn.ModuleList(nn.Linear(width, width) for _ in range(experts))

    def forward(self, x):
        pick = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            rows = (pick == e).nonzero().squeeze(-1)
            out = out.index_add(0, rows, expert(x[rows]))
        return out


def test_value_sized_step_is_recorded_on_real_tensors():
    torch.manual_seed(0)
    spec = ModelSpec("routes", _RoutesByValue().train(), (torch.randn(32, 16),),
                     (torch.randint(0, 16, (32,)),), "cross_entropy", OptimizerConfig("sgd", 0.1))
    r = pytorch_peak(spec, device="meta")
    assert r["detail"]["values"].startswith("real") and "real CPU tensors" in r["detail"]["order"]
    params = (16 * 4 + 4 + 4 * (16 * 16 + 16)) * 4
    assert r["peak_bytes"] > 2 * params + 32 * 16 * 4
