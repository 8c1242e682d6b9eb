"""Several greedy paths, the cheapest plan per budget (roam_tvm.remat.portfolio), on ResNet-50's step.

The richest move set alone is worse than a plainer one at some budgets (a
big move with the best ratio must be paid in full by every budget it
spans); the portfolio is never worse than any path, stays monotone, and its
plans pass test_remat's independent checks.
"""
from __future__ import annotations

import pytest
from test_remat import check_plan
from test_remat_hoist import resnet  # noqa: F401 (fixture)

from roam_tvm.remat import BudgetError
from roam_tvm.remat.portfolio import RematPortfolio


def _cost(path, b):
    try:
        return path.plan(b).cost
    except BudgetError:
        return None


@pytest.mark.slow  # about 35 s of budgets on ResNet; benchmarks/remat.py reports monotone on every model
def test_portfolio_is_the_cheapest_path_and_monotone(resnet):  # noqa: F811
    g, pairs = resnet
    pf = RematPortfolio(g, list(range(len(g.ops))), "roofline", g.meta["flops"], inplace=pairs)
    top, fl = pf.unbudgeted_peak, pf.floor().bytes
    assert fl == min(p.floor().bytes for p in pf.paths)
    costs, richest_worse, checked = [], 0, set()
    for k in range(20):
        b = fl + (top - fl) * k // 19
        plan = pf.plan(b)
        assert plan.peak <= b
        path_costs = [_cost(p, b) for p in pf.paths]
        assert plan.cost == min(c for c in path_costs if c is not None)
        richest_worse += path_costs[0] is None or path_costs[0] > plan.cost
        if plan.report["path"] not in checked and plan.source:  # one exact check per path used
            checked.add(plan.report["path"])
            check_plan(g, plan, b, pf.path_of(plan).base_order)  # the order that path started from
        costs.append(plan.cost)
    assert all(costs[k + 1] <= costs[k] for k in range(19)), costs
    assert richest_worse  # the portfolio is needed: one path alone is worse somewhere
    assert len(checked) >= 2


def test_portfolio_error_below_the_floor_names_it(resnet):  # noqa: F811
    g, pairs = resnet
    pf = RematPortfolio(g, list(range(len(g.ops))), "roofline", g.meta["flops"], inplace=pairs,
                        paths=((True, False), (False, False)))
    fl = pf.floor().bytes
    with pytest.raises(BudgetError, match=str(fl)):
        pf.plan(fl - 1)
    with pytest.raises(ValueError, match="move set"):
        RematPortfolio(g, paths=())


def test_step_as_given_is_kept_when_its_measured_peak_fits():
    # Every path's first state writes in place; a layout may place that worse than the step
    # itself (here: much worse). A budget the step as given already meets, measured, needs
    # neither recomputation nor in-place writes, and must not be refused.
    from roam_tvm.graph.model import GraphBuilder

    b = GraphBuilder("chain")
    x = b.tensor(100, "input")
    (a,) = b.op([x], [1000], name="f")
    (c,) = b.op([a], [1000], name="relu")  # a dies here: relu may write into it
    (d,) = b.op([c], [10], name="sum")
    g = b.build()
    relu = next(op.id for op in g.ops if op.name == "relu")
    pf = RematPortfolio(g, list(range(len(g.ops))), inplace={relu: [(a, c)]})
    as_given = g.peak()

    def measure(plan):  # the step as given lays out at its perfect packing, anything else far over
        return as_given if not plan.source and not plan.inplace else 10 * as_given

    plan = pf.plan(as_given, measure)
    assert not plan.source and not plan.inplace and plan.cost == 0
    assert plan.report["measured_peak"] == as_given <= plan.budget
    with pytest.raises(BudgetError):  # below it, the measured walk still applies
        pf.plan(as_given - 1, measure)


def test_measured_floor_is_met_and_named_below():
    # A layout that adds a gap per copy: the perfect-packing floor is out of reach once
    # measured, and the plan with the most copies is not the lowest measured one. The floor
    # the portfolio reports with that measure is the least measured peak of all, met exactly,
    # and a byte below it is refused naming it.
    from test_remat import _chain

    g = _chain()
    pf = RematPortfolio(g, list(range(len(g.ops))))
    gap = 1024

    def measure(plan):
        return plan.peak + gap * len(plan.source)

    packed = pf.floor()
    fl = pf.floor(measure)
    assert fl.measured and fl.bytes > packed.bytes
    last = min(measure(p.plan_at(len(p.states) - 1)) for p in pf.paths)
    assert fl.bytes < last  # an earlier state of a path measures lower than its floor state
    plan = pf.plan(fl.bytes, measure)
    assert plan.source and plan.report["measured_peak"] <= fl.bytes
    with pytest.raises(BudgetError, match=f"below the floor .*at least {fl.bytes} bytes"):
        pf.plan(fl.bytes - 1, measure)
