"""readers_first: a small reader of an input that an op may overwrite runs before that op (no TVM).

Peaks are checked with ``sim_peak`` of test_remat (written for the tests, shares no code with
the planner).
"""
from __future__ import annotations

from test_remat import sim_peak
from test_remat_inplace import check_inplace

from roam_tvm.graph.model import GraphBuilder
from roam_tvm.remat import RematPlanner
from roam_tvm.remat.inplace import InplaceModel
from roam_tvm.remat.inplace_order import _with_late_inputs, readers_first


def cross_entropy():
    """Logits read by max, by exp(x - max) (which may overwrite them) and by the target gather."""
    b = GraphBuilder("xent")
    h = b.tensor(100, "input")
    t = b.tensor(8, "input")
    (x,) = b.op([h], [1000], name="logits")
    (m,) = b.op([x], [10], name="max")
    (e,) = b.op([x, m], [1000], name="exp")
    (i,) = b.op([t], [10], name="index")     # the scheduler ran the gather and its index after exp
    (p,) = b.op([x, i], [10], name="gather")
    (s,) = b.op([e], [10], name="sum")
    (loss,) = b.op([s, p, m], [4], name="loss")
    b.tensors[loss].is_output = True
    return b.build(), {2: [(x, e)]}


def test_the_gather_moves_before_exp_and_the_logits_are_overwritten():
    g, allowed = cross_entropy()
    order = [0, 1, 2, 3, 4, 5, 6]
    assert readers_first(g, order, InplaceModel(g, allowed)) == [0, 1, 3, 4, 2, 5, 6]
    planner = RematPlanner(g, order, inplace=allowed, readers_first=True)
    plan = planner.plan(planner.unbudgeted_peak)
    check_inplace(g, plan, allowed)
    assert [o for o, _, _ in plan.inplace] == [2] and not plan.source
    # sum's step: h, t, the logits' storage holding exp, and the outputs of max, gather and sum
    assert plan.peak == sim_peak(plan.graph.ops, plan.graph.tensors, plan.order) == 108 + 1000 + 3 * 10
    # the scheduler's order, nothing in place: the logits and exp live together at the gather
    assert planner.unbudgeted_peak == 108 + 2000 + 3 * 10


def test_a_reader_that_needs_the_writer_stays_after_it():
    b = GraphBuilder("fork")
    h = b.tensor(100, "input")
    (x,) = b.op([h], [1000], name="f")
    (e,) = b.op([x], [1000], name="exp")
    (f,) = b.op([e], [10], name="sum")
    (d,) = b.op([x, f], [10], name="mix")  # needs exp's output through sum: cannot run before exp
    b.tensors[d].is_output = True
    g = b.build()
    assert _with_late_inputs(g, [0, 1, 2, 3], 1, [3]) is None
    assert readers_first(g, [0, 1, 2, 3], InplaceModel(g, {1: [(x, e)]})) == [0, 1, 2, 3]


def test_the_portfolio_grows_a_readers_first_path_only_where_it_moves_something():
    from roam_tvm.remat.portfolio import RematPortfolio

    g, allowed = cross_entropy()
    pf = RematPortfolio(g, list(range(len(g.ops))), inplace=allowed, time_limit=8.0)
    assert pf.names[-1] == "lean+hoist+readers-first+siblings" and len(pf.paths) == 4
    assert all(p.time_limit == 2.0 for p in pf.paths)
    assert pf.initial_peak == 108 + 1000 + 3 * 10
    plan = pf.plan(pf.initial_peak)  # met by the in-place write alone on that path
    assert plan.report["path"] == "lean+hoist+readers-first+siblings" and plan.cost == 0 and plan.inplace
    # the gather already first: the order moves nothing, the path would repeat lean+hoist
    order = [0, 1, 3, 4, 2, 5, 6]
    pf = RematPortfolio(g, order, inplace=allowed, time_limit=6.0, paths=((True, True), (True, True, True)))
    assert pf.names == ["lean+hoist"] and pf.paths[0].time_limit == 6.0
