"""Re-ordering after recomputation: a chained move moves an earlier copy up instead of redoing it (no TVM).

On ResNet-50's step (batch 8, 64x64, extracted from TVM and stored in
tests/data), dropping a conv output puts its copy at the batch norm's
backward; a ReLU recomputed later needs that conv output just before. Moving
the copy up serves both. Checked with test_remat's independent simulator.
"""
from __future__ import annotations

import gzip
import json
import os

import pytest
from test_remat import check_plan

from roam_tvm.graph.model import Graph
from roam_tvm.remat import RematPlanner, moves
from roam_tvm.remat.cross_bound import CrossingBound

DATA = os.path.join(os.path.dirname(__file__), "data", "resnet50_b8_i64.graph.json.gz")


@pytest.fixture(scope="module")
def resnet():
    with gzip.open(DATA, "rt") as f:
        g = Graph.from_dict(json.load(f))
    pairs = {int(k): [tuple(p) for p in v] for k, v in g.meta["inplace"].items()}
    return g, pairs


def _planner(g, pairs):
    return RematPlanner(g, list(range(len(g.ops))), "roofline", g.meta["flops"], inplace=pairs)


def _budget(g, planner, share):
    """``share`` of the activation bytes (the unbudgeted peak less the always-live bytes)."""
    a = g.always_live_bytes
    return int(a + (planner.unbudgeted_peak - a) * share)


def _hoisted(plan) -> int:
    """Copies whose output feeds both another copy and an original op, made before that copy reads it."""
    ops, n0 = plan.graph.ops, min(plan.source)
    step = {o: i for i, o in enumerate(plan.order)}
    readers: dict[int, list[int]] = {}
    for op in ops:
        for t in op.inputs:
            readers.setdefault(t, []).append(op.id)
    n = 0
    for c in plan.source:
        rs = readers.get(ops[c].outputs[0], [])
        n += any(r >= n0 for r in rs) and any(r < n0 for r in rs) and all(step[c] < step[r] for r in rs)
    return n


def test_hoisting_lowers_the_overhead_on_resnet50(resnet, monkeypatch):
    g, pairs = resnet
    planner = _planner(g, pairs)
    b = _budget(g, planner, 0.40)
    plan = planner.plan(b)
    check_plan(g, plan, b, planner.base_order)
    st = planner.states[plan.report["path_index"]]
    for o, x, y in plan.inplace:  # every in-place write is one its kernel allows (names repeat: use origins)
        assert (st.origin_t[x], st.origin_t[y]) in set(pairs.get(st.origin_op[o], ())), plan.graph.ops[o].name
    assert _hoisted(plan)
    monkeypatch.setattr(moves.Context, "later_copy", lambda self, v, at: None)
    without = _planner(g, pairs).plan(b)
    assert plan.overhead < without.overhead - 0.01  # more than a point of the step


@pytest.mark.slow  # about 20 s of budgets on ResNet-50
def test_resnet50_plans_are_monotone_and_above_the_bounds(resnet):
    from roam_tvm.remat.lp_bound import RelaxedBound

    g, pairs = resnet
    planner = _planner(g, pairs)
    xb = CrossingBound(g, planner.costs, "roofline", planner.inplace)
    lp = RelaxedBound(g, planner.base_order, planner.costs, planner.inplace)
    top, fl = planner.unbudgeted_peak, planner.floor().bytes
    costs = []
    for k in range(20):
        b = fl + (top - fl) * k // 19
        plan = planner.plan(b)
        assert plan.peak <= b
        assert xb.overhead(b) <= plan.overhead + 1e-12
        if k % 4 == 0:  # the LP over the planner's moves (with private inputs held or made again)
            assert lp.overhead(b) <= plan.overhead + 1e-9
        costs.append(plan.cost)
    assert all(costs[k + 1] <= costs[k] for k in range(19)), costs
    for share in (0.535, 0.325):  # the 53% and 33% targets, as activation shares
        b = _budget(g, planner, share)
        check_plan(g, planner.plan(b), b, planner.base_order)
