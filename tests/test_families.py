"""Architectures outside the zoo (roam_tvm/zoo/families.py), tiny: each imports, is planned by
the roam pipeline (RoamOrder + RoamLayout), builds for llvm and runs one step, and its loss,
updated parameters and optimizer states match PyTorch's step (test_numerics.compare_step,
the zoo's tolerances)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")
pytest.importorskip("transformers")

from tvm import relax  # noqa: E402

import test_numerics  # noqa: E402
from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from roam_tvm.passes import latest_layout  # noqa: E402
from roam_tvm.runtime import build  # noqa: E402
from roam_tvm.zoo import families  # noqa: E402

# 40-90 s each on 2 heavily shared cores (load 7), about a third of that on quiet ones;
# the slowest run with --runslow (T5's where and DenseNet's one-element concat gradients are
# also in test_grad_ops' default float64 test)
FAST = ["llama", "moe", "lstm", "gru", "unet"]
SLOW = ["qwen2", "mistral", "swin", "t5", "densenet"]
CNNS = {"densenet", "unet"}


def _roam_step(ts, inputs, targets):
    """test_numerics.tvm_step, planned by the roam pipeline instead of TVM's default."""
    exe = build(ts.mod, "llvm", order=True, layout=True, order_time_limit=2.0)
    vm = relax.VirtualMachine(exe, tvm.cpu())
    state = ts.initial_values()
    before = {k: v.copy() for k, v in state.items()}
    loss = ts.run(vm, [t.numpy() for t in inputs], [t.numpy() for t in targets], state)
    assert latest_layout(ts.func_name) is not None, "the roam layout did not run"
    return loss, before, state


def _check(name, monkeypatch):
    made = getattr(families, name)()
    model, inputs, targets = made[:3]
    loss = made[3] if len(made) > 3 else "cross_entropy"
    # the zoo's conventions: SGD with momentum for CNNs, Adam for the rest
    opt = SGD(lr=0.01, momentum=0.9, weight_decay=1e-4) if name in CNNS else Adam(lr=1e-3)
    ts = from_torch(model, inputs, targets, loss=loss, optimizer=opt, quiet=True)
    monkeypatch.setattr(test_numerics, "tvm_step", _roam_step)
    test_numerics.compare_step(model, inputs, targets, loss, opt, ts=ts)


@pytest.mark.parametrize("name", FAST)
def test_family_tiny(name, monkeypatch):
    _check(name, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_family_tiny_slow(name, monkeypatch):
    _check(name, monkeypatch)


def test_every_family_is_tested():
    assert sorted(FAST + SLOW) == sorted(families.TINY)
