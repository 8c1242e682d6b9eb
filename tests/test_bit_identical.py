"""The roam pipeline computes exactly what TVM's default pipeline computes.

One training step of each zoo model (small configuration) is built for llvm
twice, with ``pipeline(order=False, layout=False)`` (TVM's planner, program
order) and with ``pipeline(order=True, layout=True)`` (roam), run from the same
state, and every output, updated parameter and optimizer state must be equal
bit for bit: ordering only permutes independent kernels and the arena only
moves buffers, so any difference is a bug (an overlap, a missed dependency or a
silent copy), not rounding.
"""
import copy

import numpy as np
import pytest

from roam_tvm.cli import optimizer_from_config
from roam_tvm.frontend import from_torch
from roam_tvm.passes import latest_layout
from roam_tvm.runtime import build
from roam_tvm.zoo import MODELS, get_model

FAST = ["mlp", "cnn"]  # llvm builds are slow on 2 cores; the rest run with --runslow


def _one_step(ts, spec, order, layout):
    exe = build(ts.mod, "llvm", order=order, layout=layout,
                **({"order_time_limit": 2.0} if order else {}))
    state = copy.deepcopy(ts.initial_values())
    inputs = [t.numpy() for t in spec.example_inputs]
    targets = [t.numpy() for t in spec.targets]
    loss = ts.run(exe, inputs, targets, state)
    return loss, state


def _check(name):
    spec = get_model(name, small=True)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer))
    loss_a, state_a = _one_step(ts, spec, False, False)
    loss_b, state_b = _one_step(ts, spec, True, True)
    assert latest_layout(ts.func_name) is not None
    assert loss_a == loss_b
    assert set(state_a) == set(state_b)
    for key in state_a:
        np.testing.assert_array_equal(np.asarray(state_a[key]), np.asarray(state_b[key]), err_msg=key)


@pytest.mark.parametrize("name", FAST)
def test_roam_pipeline_is_bit_identical(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MODELS if n not in FAST and not MODELS[n].needs_meta_for_default])
def test_roam_pipeline_is_bit_identical_whole_zoo(name):
    _check(name)
