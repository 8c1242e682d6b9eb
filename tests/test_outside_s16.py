"""Session 16's plain-torch outside models (benchmarks/outside/kinds_s16_nn.py) train as PyTorch does: one
roam-planned step on llvm against PyTorch's (test_outside_kinds_more.check_outside_step). The fast ones
cover this session's converters (stable argsort, bincount, a cumsum capacity) and odd-size layers."""
from __future__ import annotations

import importlib.util
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("tvm")

from roam_tvm.frontend import SGD  # noqa: E402

import test_numerics  # noqa: E402
from test_families import _roam_step  # noqa: E402
from test_outside_kinds_more import check_outside_step  # noqa: E402

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "outside",
                    "kinds_s16_nn.py")
FAST = ["odd_sizes_cnn", "gshard_capacity", "sort_dispatch", "moe_bincount_aux"]
SLOW = ["lit_llama", "hand_t5", "moe_gather_weights", "moe_dense_einsum", "lstm_learned_init", "hand_swin",
        "densenet_frozen_block", "vit_mha", "lstm_regression"]
# bf16 end to end (test_precision holds pure bf16 to the exact step); Dropout2d (the identity here,
# with a warning; PyTorch's step drops channels)
NO_NUMERICS = ["gru_tagger_bf16", "cnn_interpolate_seg"]


def _factory(name: str):
    spec = importlib.util.spec_from_file_location("benchmarks_outside_kinds_s16_nn", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


# the hand-written T5 in float64: in float32 its embedding update (encoder, decoder and head reads, a
# finfo.min mask) is off from torch's by rounding at the tolerance's edge, and matches to 1e-9 in float64
DOUBLE = {"hand_t5"}
def _check(name, monkeypatch):
    made = _factory(name)()
    model, inputs, targets = made[:3]
    loss = made[3] if len(made) > 3 else "mse" if targets[0].is_floating_point() else "cross_entropy"
    if name in DOUBLE:
        monkeypatch.setattr(test_numerics, "tvm_step", _roam_step)
        model = model.double()
        test_numerics.compare_step(model, inputs, targets, loss, SGD(lr=0.1), dtype="float64")
        return
    check_outside_step(model, inputs, targets, loss, SGD(lr=0.1), monkeypatch)


@pytest.mark.parametrize("name", FAST)
def test_s16_tiny(name, monkeypatch):
    _check(name, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_s16_tiny_slow(name, monkeypatch):
    _check(name, monkeypatch)


def test_every_factory_is_listed():
    import ast

    with open(PATH, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    public = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    assert sorted(FAST + SLOW + NO_NUMERICS) == sorted(public)
