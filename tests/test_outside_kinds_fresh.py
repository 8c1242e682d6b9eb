"""Outside models of architectures no other outside file covers (benchmarks/outside/kinds_fresh.py,
kinds_fresh_nn.py), tiny: each imports, is planned by the roam pipeline (RoamOrder + RoamLayout), builds
for llvm and runs one Adam step whose loss, updated parameters and optimizer states match PyTorch's step
(test_numerics.compare_step, through test_outside_kinds_more's check)."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("tvm")
pytest.importorskip("transformers")

from roam_tvm.frontend import Adam  # noqa: E402
from test_outside_hf_more import OUTSIDE, _module  # noqa: E402
from test_outside_kinds_more import check_outside_step  # noqa: E402

HF, NN = os.path.join(OUTSIDE, "kinds_fresh.py"), os.path.join(OUTSIDE, "kinds_fresh_nn.py")
# message passing by index_add_ / scatter_add with the edge list an input (GCN) or a buffer (GAT);
FAST = [("gcn", NN), ("gat", NN)]
# the rows a fix was needed for: Mamba (select gradients), RWKV (cropping pad), Funnel (negative-step arange),
# FNet and GFNet's rfft2 -> complex filter -> irfft2 (fft pairs; test_fft_pairs covers them by default)
SLOW = [("gfnet", NN), ("perceiver", NN), ("clip", HF), ("mamba", HF), ("rwkv", HF), ("funnel", HF), ("fnet", HF)]


def _check(name, path, monkeypatch):
    made = getattr(_module(path), name)()
    model, inputs, targets = made[:3]
    loss = made[3] if len(made) > 3 else "cross_entropy"
    check_outside_step(model, inputs, targets, loss, Adam(lr=1e-3), monkeypatch)


@pytest.mark.parametrize("name,path", FAST)
def test_kinds_fresh_tiny(name, path, monkeypatch):
    _check(name, path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name,path", SLOW)
def test_kinds_fresh_tiny_slow(name, path, monkeypatch):
    _check(name, path, monkeypatch)
