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
from roam_tvm.remat.inplace_order import readers_first


def cross_entropy():
    """Logits read by max, by exp(x - max) (which may overwrite them) and by the target gather."""
    b = GraphBuilder("xent")
    h = b.tensor(100, "input")
    (x,) = b.op([h], [1000], name="logits")
    (m,) = b.op([x], [10], name="max")
    (e,) = b.op([x, m], [1000], name="exp")
    (p,) = b.op([x], [10], name="gather")   # the scheduler ran it after exp
    (s,) = b.op([e], [10], name="sum")
    (loss,) = b.op([s, p, m], [4], name="loss")
    b.tensors[loss].is_output = True
    return b.build(), {2: [(x, e)]}


def test_the_gather_moves_before_exp_and_the_logits_are_overwritten():
    g, allowed = cross_entropy()
    order = [0, 1, 2, 3, 4, 5]
    assert readers_first(g, order, InplaceModel(g, allowed)) == [0, 1, 3, 2, 4, 5]
    planner = RematPlanner(g, order, inplace=allowed)
    plan = planner.plan(planner.unbudgeted_peak)
    check_inplace(g, plan, allowed)
    assert [o for o, _, _ in plan.inplace] == [2] and not plan.source
    # sum's step: h, the logits' storage holding exp, and the outputs of max, gather and sum
    assert plan.peak == sim_peak(plan.graph.ops, plan.graph.tensors, plan.order) == 100 + 1000 + 3 * 10
    # the scheduler's order, nothing in place: the logits and exp live together at the gather
    assert planner.unbudgeted_peak == 100 + 2000 + 10 + 10


def test_a_reader_that_needs_the_writer_stays_after_it():
    b = GraphBuilder("fork")
    h = b.tensor(100, "input")
    (x,) = b.op([h], [1000], name="f")
    (e,) = b.op([x], [1000], name="exp")
    (d,) = b.op([x, e], [10], name="mix")  # reads exp's output: cannot run before exp
    b.tensors[d].is_output = True
    g = b.build()
    assert readers_first(g, [0, 1, 2], InplaceModel(g, {1: [(x, e)]})) == [0, 1, 2]
