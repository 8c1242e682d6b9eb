"""TVM's own StaticPlanBlockMemory tests, run with our passes in its place.

The test file is Apache TVM's ``test_transform_static_plan_block_memory.py``
(Apache-2.0), kept unchanged in ``../shared/peer/tvm/`` beside this repository
and loaded from there (it is not part of roam-tvm). Every test in it runs twice:
with ``RoamLayout`` alone and with ``Sequential([RoamOrder(), RoamLayout()])``
in place of ``relax.transform.StaticPlanBlockMemory``. Each asserts TVM's exact
output IR, so a pass means our passes planned the same, fell back, or kept
TVM's plan because ours was not better.
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

import pytest
import tvm
from tvm import relax

from roam_tvm.passes import RoamLayout, RoamOrder

PEER = Path(__file__).resolve().parents[1].parent / "shared" / "peer" / "tvm" / \
    "test_transform_static_plan_block_memory.py"


def _load_peer():
    if not PEER.exists():
        return None
    spec = importlib.util.spec_from_file_location("tvm_peer_static_plan", PEER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # TVMScript reads class sources through sys.modules
    spec.loader.exec_module(module)
    return module


_PEER = _load_peer()
_TESTS = sorted(n for n, f in inspect.getmembers(_PEER, inspect.isfunction)
                if n.startswith("test_")) if _PEER else []

_CONFIGS = {
    "layout": lambda: RoamLayout(),
    "order+layout": lambda: tvm.transform.Sequential([RoamOrder(time_limit=5.0), RoamLayout()]),
}


@pytest.mark.skipif(_PEER is None, reason=f"TVM's planner tests not found at {PEER} (../shared is absent)")
def test_peer_suite_is_complete():
    assert len(_TESTS) == 28, _TESTS


@pytest.mark.skipif(_PEER is None, reason=f"TVM's planner tests not found at {PEER} (../shared is absent)")
@pytest.mark.parametrize("config", sorted(_CONFIGS))
@pytest.mark.parametrize("name", _TESTS or ["none"])
def test_tvm_planner_test_with_roam(name, config, monkeypatch):
    make = _CONFIGS[config]
    monkeypatch.setattr(relax.transform, "StaticPlanBlockMemory", lambda: make())
    getattr(_PEER, name)()
