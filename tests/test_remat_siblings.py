"""Sibling moves (roam_tvm.remat.group_moves): two roots made from one input dead at the peak,
recomputed at once. Checked with test_remat's independent simulator and value check."""
from __future__ import annotations

from test_remat import check_plan, sim_peak

from roam_tvm.graph.model import GraphBuilder
from roam_tvm.remat import RematPlanner


def layer_norm_like():
    """``x`` (from an op behind a control dependency: never recomputed) makes ``a`` (the norm)
    and ``d`` (x - mean), both read again after a large op; ``x`` itself is dead there."""
    b = GraphBuilder("ln")
    h = b.tensor(10, "input")
    b.op([], [0], name="effect")  # an op with side effects that the split must follow
    x, stat = b.op([h], [100, 4], name="split")
    b.ops[-1].after = [0]  # not a pure op: x is never remade
    (a,) = b.op([x, stat], [100], name="norm")
    (d,) = b.op([x, stat], [100], name="centre")
    (z,) = b.op([a], [10], name="matmul")
    (big,) = b.op([z], [1000], name="big")
    (w,) = b.op([big], [10], name="reduce")
    (ua,) = b.op([a, w], [10], name="weight_grad")
    (ud,) = b.op([d, ua], [10], name="norm_grad")
    b.tensors[ud].is_output = True
    return b.build()


def test_one_root_alone_trades_it_for_its_input_both_together_gain():
    g = layer_norm_like()
    order = list(range(len(g.ops)))
    plain = RematPlanner(g, order)
    assert plain.floor().bytes == plain.unbudgeted_peak == 10 + 100 + 100 + 10 + 1000  # h, a, d, z, big
    sib = RematPlanner(g, order, siblings=True)
    floor = sib.floor().bytes
    assert floor == 10 + 100 + 4 + 10 + 1000  # x and stat kept instead of a and d
    plan = sib.plan(floor)
    assert sorted(g.ops[o].name for o in plan.source.values()) == ["centre", "norm"]
    check_plan(g, plan, floor, order)
    assert sim_peak(plan.graph.ops, plan.graph.tensors, plan.order) == floor
