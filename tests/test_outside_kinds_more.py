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
from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from test_families import _roam_step  # noqa: E402
from test_outside_hf_more import OUTSIDE, _module  # noqa: E402

HF, NN = os.path.join(OUTSIDE, "kinds_more.py"), os.path.join(OUTSIDE, "kinds_more_nn.py")
# one of each kind by default (a CNN with odd skips, an LSTM with proj_size, the dynamic-RoPE fix);
# the rest with --runslow
FAST = [("unet_odd", NN), ("lstm_proj", NN), ("llama_rope_dynamic", HF)]
SLOW = [(n, HF) for n in ("swinv2", "swin_pad", "swin_frozen_embed", "longt5_local", "longt5_tglobal", "t5_enc_cls",
                          "t5_lora", "llama_tied_mqa", "llama_rope_llama3", "switch", "olmoe", "granitemoe",
                          "deepseek_v3", "t5_small")] + \
       [(n, NN) for n in ("densenet_ckpt", "densenet_bc", "unet_convt_bn", "unet_attention", "lstm3", "gru_bi2",
                          "lstm_lm", "moe_expert_choice")]


def _check(name, monkeypatch, path):
    """Import with roam's pipeline, one Adam step on llvm, matched against PyTorch's; the loss is
    ``F.cross_entropy`` (classes in dim 1) for the U-Nets (per-pixel targets), the CLI's
    ``"cross_entropy"`` (classes last for ``[B, T, V]`` logits) for the others."""
    import torch

    model, inputs, targets = getattr(_module(path), name)()[:3]
    loss = torch.nn.functional.cross_entropy if name.startswith("unet") else "cross_entropy"
    opt = Adam(lr=1e-3)
    ts = from_torch(model, inputs, targets, loss=loss, optimizer=opt, quiet=True)
    monkeypatch.setattr(test_numerics, "tvm_step", _roam_step)
    test_numerics.compare_step(model, inputs, targets, loss, opt, ts=ts)


@pytest.mark.parametrize("name,path", FAST)
def test_kinds_more_tiny(name, path, monkeypatch):
    _check(name, monkeypatch, path)


@pytest.mark.slow
@pytest.mark.parametrize("name,path", SLOW)
def test_kinds_more_tiny_slow(name, path, monkeypatch):
    _check(name, monkeypatch, path)
