"""Outside models of the zoo's kinds (benchmarks/outside/kinds_more.py, kinds_more_nn.py), tiny: each
imports, is planned by the roam pipeline (RoamOrder + RoamLayout), builds for llvm and runs one Adam
step whose loss, updated parameters and optimizer states match PyTorch's step
(test_numerics.compare_step, through test_outside_hf_more's check)."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("tvm")
pytest.importorskip("transformers")

import test_numerics  # noqa: E402
from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from roam_tvm.frontend.hf_experts import exportable_experts  # noqa: E402
from roam_tvm.frontend.noop_casts import noop_module_casts  # noqa: E402
from test_families import _roam_step  # noqa: E402
from test_outside_hf_more import OUTSIDE, _module  # noqa: E402

HF, NN = os.path.join(OUTSIDE, "kinds_more.py"), os.path.join(OUTSIDE, "kinds_more_nn.py")
# a CNN with odd skips and the dynamic-RoPE fix by default (RNNs: test_rnn_*); the rest with --runslow
FAST = [("llama_rope_dynamic", HF)]  # U-Nets: test_families
SLOW = [(n, HF) for n in ("swinv2", "swin_pad", "swin_frozen_embed", "longt5_local", "longt5_tglobal", "t5_enc_cls",
                          "t5_lora", "llama_tied_mqa", "llama_rope_llama3", "olmoe", "granitemoe",
                          "deepseek_v3", "t5_small")] + \
       [(n, NN) for n in ("unet_odd", "densenet_bc", "unet_convt_bn", "unet_attention", "lstm3", "gru_bi2",
                          "lstm_lm", "moe_expert_choice", "lstm_proj")]


# Adam's first update is lr * g / (|g| + eps): on gradients near 0 it turns fp32 rounding into
# update-sized differences. The DenseNets' stem BatchNorm weight gradients (1e-7 .. 1e-6, sums
# that nearly cancel) are such: those rows check the gradient itself through an SGD step (as
# test_outside_cnns_more does).
SGD_ROWS = {"densenet_bc"}
# not held to compare_step: densenet_ckpt (torch.utils.checkpoint reruns each bottleneck's BatchNorm
# in PyTorch's backward, which updates its running statistics twice; the planned step runs it once,
# as a step without checkpointing does), switch (compare_step's float64 reference cannot run it: the
# router casts to config.router_dtype, float32; test_switch_step_matches_torch checks it in float32)


def _check(name, monkeypatch, path):
    """Import with roam's pipeline, one Adam step on llvm, matched against PyTorch's; the loss is
    ``F.cross_entropy`` (classes in dim 1) for the U-Nets (per-pixel targets), the CLI's
    ``"cross_entropy"`` (classes last for ``[B, T, V]`` logits) for the others."""
    import torch

    model, inputs, targets = getattr(_module(path), name)()[:3]
    loss = torch.nn.functional.cross_entropy if name.startswith("unet") else "cross_entropy"
    opt = SGD(lr=0.1) if name in SGD_ROWS else Adam(lr=1e-3)
    check_outside_step(model, inputs, targets, loss, opt, monkeypatch)


def check_outside_step(model, inputs, targets, loss, opt, monkeypatch) -> None:
    """Import with roam's pipeline, one step on llvm, matched against PyTorch's (compare_step)."""
    ts = from_torch(model, inputs, targets, loss=loss, optimizer=opt, quiet=True)
    monkeypatch.setattr(test_numerics, "tvm_step", _roam_step)
    # torch's steps run MoE experts, and a module's cast to its own dtype (Switch's float32 router in the
    # float64 reference), as the export does
    with exportable_experts(model), noop_module_casts():
        test_numerics.compare_step(model, inputs, targets, loss, opt, ts=ts)


@pytest.mark.parametrize("name,path", FAST)
def test_kinds_more_tiny(name, path, monkeypatch):
    _check(name, monkeypatch, path)


@pytest.mark.slow
@pytest.mark.parametrize("name,path", SLOW)
def test_kinds_more_tiny_slow(name, path, monkeypatch):
    _check(name, monkeypatch, path)


@pytest.mark.slow
def test_switch_step_matches_torch():
    """Switch Transformers (no attention_mask: hf_default_mask.py; capacity-dropping top-1 router run
    densely: hf_experts.py), planned by roam: every gradient of one SGD step (lr 1) is torch's float32
    one (experts run as in the export) within 1e-4 of its tensor's largest."""
    import copy

    import numpy as np
    import torch
    import tvm
    from tvm import relax

    from roam_tvm.runtime.build import build

    model, inputs, targets = _module(HF).switch()
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=SGD(lr=1.0), quiet=True)
    vm = relax.VirtualMachine(build(ts.mod, "llvm", order=True, layout=True, order_time_limit=2.0), tvm.cpu())
    state = ts.initial_values()
    before = {k: v.copy() for k, v in state.items()}
    loss = ts.run(vm, [t.numpy() for t in inputs], [t.numpy() for t in targets], state)
    ref = copy.deepcopy(model).train()
    with exportable_experts(ref):
        out = ref(*inputs)
        t_loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), targets[0].reshape(-1))
        t_loss.backward()
    assert abs(float(loss) - float(t_loss)) <= 1e-5 * abs(float(t_loss))
    grads = dict(ref.named_parameters())
    for n in ts.param_names:
        want = grads[n].grad.double().numpy() if grads[n].grad is not None else np.zeros(before[n].shape)
        got = before[n].astype(np.float64) - state[n]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(np.abs(want).max(), 1e-6), err_msg=n)
