"""Lean chains: a chained recomputation holds a small dead input rather than re-deriving it (no TVM).

A batch norm's variance is a few bytes read off the whole activation; when
the chain recomputes the normalised value it must not re-read the activation
for it. Checked with test_remat's independent simulator and value check.
"""
from __future__ import annotations

import pytest
from test_remat import check_plan

from roam_tvm.graph.model import GraphBuilder
from roam_tvm.remat import RematPlanner
from roam_tvm.remat import moves

ACT, STAT, PARAM = 1 << 20, 64, 4096


def _bn_relu(blocks: int = 3):
    """Blocks ``c = conv(x); v = var(c); s = rsqrt(v); a = relu(norm(c, v))``; backward reads c, s and a."""
    b = GraphBuilder("bn_relu")
    x = b.tensor(ACT, "input", "x")
    saved = []
    for i in range(blocks):
        w = b.tensor(PARAM, "param", f"w{i}")
        (c,) = b.op([x, w], [ACT], name=f"conv{i}")
        (v,) = b.op([c], [STAT], name=f"var{i}")
        (s,) = b.op([v], [STAT], name=f"rsqrt{i}")
        (n,) = b.op([c, v], [ACT], name=f"norm{i}")
        (x,) = b.op([n], [ACT], name=f"relu{i}")
        saved.append((w, c, s, x))
    (loss,) = b.op([x], [8], name="loss")
    b.tensors[loss].is_output = True
    (grad,) = b.op([loss, x], [ACT], name="loss_grad")
    for i in reversed(range(blocks)):
        w, c, s, a = saved[i]
        (gn,) = b.op([grad, a], [ACT], name=f"relu_grad{i}")
        (gc,) = b.op([gn, c, s], [ACT], name=f"norm_grad{i}")
        xin = saved[i - 1][3] if i else None
        grad, gw = b.op([gc, w] + ([xin] if xin is not None else []), [ACT, PARAM], name=f"conv_grad{i}")
        b.op([w, gw], [], name=f"sgd{i}", kind="update", inplace=[w])
    g = b.build()
    g.meta["flops"] = [1e12 if op.name.startswith("conv") else 0.0 for op in g.ops]  # convs: compute-bound
    return g


def _plan(g, budget, lean):
    return RematPlanner(g, cost_model="roofline", lean=lean).plan(budget)


def test_lean_chain_holds_the_statistic_instead_of_rereading_the_activation():
    g = _bn_relu()
    top = RematPlanner(g, cost_model="roofline").unbudgeted_peak
    budget = top - ACT  # one activation must go
    lean = _plan(g, budget, True)
    check_plan(g, lean, budget, list(range(len(g.ops))))
    copied = {g.ops[o].name.rstrip("0123456789") for o in lean.source.values()}
    assert "var" not in copied, copied
    full = _plan(g, budget, False)
    check_plan(g, full, budget, list(range(len(g.ops))))
    assert lean.cost < full.cost  # the variance copy re-read a whole activation


@pytest.mark.parametrize("blocks", [2, 3, 4])
def test_lean_chain_plans_are_exact_and_monotone(blocks):
    g = _bn_relu(blocks)
    planner = RematPlanner(g, cost_model="roofline")
    top, fl = planner.unbudgeted_peak, planner.floor().bytes
    costs = []
    for k in range(20):
        b = fl + (top - fl) * k // 19
        plan = planner.plan(b)
        check_plan(g, plan, b, planner.base_order)
        costs.append(plan.cost)
    assert all(costs[k + 1] <= costs[k] for k in range(19)), costs


def test_predicted_peak_of_lean_moves_matches_the_built_state():
    # The held statistic lives on until its copy reads it: the incremental peak must count that.
    from test_remat import sim_peak

    from roam_tvm.remat.delta import Frame, move_peak, plan_move
    from roam_tvm.remat.moves import Context, split
    from roam_tvm.remat.state import interval_arrays

    g = _bn_relu(3)
    planner = RematPlanner(g, cost_model="roofline")
    planner.floor()
    held = 0
    for st, lv in zip(planner.states, planner.lives):
        ctx = Context(st, lv)
        arr = interval_arrays(st)
        fr = Frame(ctx, arr["first"], arr["last"], arr["size"], arr["alloc"], arr["ws"], lv.profile, arr["pos"])
        for r, s in planner._candidates(ctx):
            mv, full = plan_move(ctx, r, s, moves.LEAN), plan_move(ctx, r, s, 1)
            if mv is None:
                continue
            held += len(mv.src) < len(full.src)
            nst = split(ctx, r, s, planner.costs, moves.LEAN)
            assert move_peak(fr, mv, arr["base"])[0] == sim_peak(nst.ops, nst.tensors, nst.order), (r, s)
    assert held  # some lean move did hold a statistic
