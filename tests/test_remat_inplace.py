"""In-place outputs where the input dies, planned with recomputation (no TVM).

The checks share no code with the planner: peaks come from ``sim_peak`` of
test_remat (written for these tests), values from its symbolic evaluation,
and the overwrite rule is checked here on the plan's raw ops.
"""
from __future__ import annotations

import random

import pytest
from test_remat import GRAPHS, check_plan, sim_peak

from roam_tvm.graph.model import GraphBuilder
from roam_tvm.graph.random import random_dag
from roam_tvm.remat import RematPlanner


def equal_size_pairs(g, seed: int, share: float = 0.7) -> dict:
    """Random in-place pairs (input, output of the same size) for compute ops."""
    rng = random.Random(seed)
    out = {}
    for op in g.ops:
        if op.kind != "compute" or op.inplace:
            continue
        ps = [(x, y) for y in op.outputs for x in op.inputs
              if g.tensors[x].size == g.tensors[y].size and rng.random() < share]
        if ps:
            out[op.id] = ps
    return out


def check_inplace(g, plan, allowed: dict) -> None:
    """Each in-place write is allowed, and nothing reads the overwritten input afterwards."""
    ops, tensors, order = plan.graph.ops, plan.graph.tensors, plan.order
    step = {o: i for i, o in enumerate(order)}
    for o, x, y in plan.inplace:
        src = plan.source.get(o, o)
        ox, oy = _origin(g, plan, x), _origin(g, plan, y)
        assert (ox, oy) in set(allowed.get(src, ())), (ops[o].name, x, y)
        assert tensors[y].alias_of == x and x in ops[o].inplace
        chained = any(yy == x for _, _, yy in plan.inplace)  # x is itself an earlier in-place result
        assert (tensors[x].alias_of is None or chained) and not tensors[x].is_output
        for u in ops:
            if u.id != o and x in u.inputs:
                assert step[u.id] < step[o], f"{u.name} reads {tensors[x].name} after {ops[o].name} overwrote it"
        assert not any(t.alias_of == x for t in tensors if t.id != y), "the overwritten input has views"


def _origin(g, plan, t):
    name = plan.graph.tensors[t].name
    return t if t < len(g.tensors) else next(u.id for u in g.tensors if name.startswith(u.name + ".re"))


def test_dying_input_is_overwritten_and_the_peak_drops():
    b = GraphBuilder("chain")
    x = b.tensor(100, "input")
    (a,) = b.op([x], [1000], name="f")
    (c,) = b.op([a], [1000], name="relu")  # a dies here
    (d,) = b.op([c], [10], name="sum")
    b.tensors[d].is_output = True
    g = b.build()
    plain = RematPlanner(g, [0, 1, 2])
    ip = RematPlanner(g, [0, 1, 2], inplace={1: [(a, c)]})
    assert plain.unbudgeted_peak == ip.unbudgeted_peak == 100 + 2000
    plan = ip.plan(ip.unbudgeted_peak)
    assert plan.inplace == [(1, a, c)] and plan.peak == 100 + 1010 and not plan.source
    assert sim_peak(plan.graph.ops, plan.graph.tensors, plan.order) == plan.peak
    assert ip.lower_bound == 100 + 1010 < plain.lower_bound == 100 + 2000


def test_input_read_later_is_not_overwritten():
    b = GraphBuilder("fork")
    x = b.tensor(100, "input")
    (a,) = b.op([x], [1000], name="f")
    (c,) = b.op([a], [1000], name="relu")
    (d,) = b.op([a, c], [10], name="mix")  # a is still read after relu
    b.tensors[d].is_output = True
    g = b.build()
    plan = RematPlanner(g, [0, 1, 2], inplace={1: [(a, c)]}).plan("1")
    assert plan.inplace == [] and plan.peak == 2110


def test_returned_or_viewed_tensors_are_never_overwritten():
    b = GraphBuilder("ret")
    x = b.tensor(100, "input")
    (a,) = b.op([x], [1000], name="f")
    b.tensors[a].is_output = True
    (c,) = b.op([a], [1000], name="relu")
    b.tensors[c].is_output = True
    g = b.build()
    assert RematPlanner(g, [0, 1], inplace={1: [(a, c)]}).plan("1").inplace == []


@pytest.mark.parametrize("make", GRAPHS + [lambda: random_dag(60, 5, size_range=(2, 3))],
                         ids=range(len(GRAPHS) + 1))
def test_twenty_budgets_with_inplace_fit_exactly_and_monotone(make):
    g = make()
    allowed = equal_size_pairs(g, 1)
    planner = RematPlanner(g, inplace=allowed)
    plain = RematPlanner(g, planner.base_order)
    top, floor = planner.unbudgeted_peak, planner.floor().bytes
    assert floor <= plain.floor().bytes and planner.lower_bound <= plain.lower_bound
    assert planner.lives[0].peak <= top
    budgets = [floor + (top - floor) * k // 19 for k in range(20)]
    costs = []
    for b in budgets:
        plan = planner.plan(b)  # the planner itself checks each step's predicted peak
        check_plan(g, plan, b, planner.base_order)
        check_inplace(g, plan, allowed)
        costs.append(plan.cost)
    assert all(costs[k + 1] <= costs[k] for k in range(19)), costs
    assert costs[-1] == 0


def test_some_random_plan_uses_inplace_and_recomputation_together():
    seen = 0
    for seed in range(6):
        g = random_dag(60, seed, size_range=(2, 3))
        planner = RematPlanner(g, inplace=equal_size_pairs(g, seed))
        plan = planner.plan(planner.floor().bytes)
        seen += bool(plan.inplace and plan.source and any(o in plan.source for o, _, _ in plan.inplace))
    assert seen, "no copy was ever written in place"


def _inplace_peak(g, st, allowed):
    """Peak of a planner state with its in-place writes, derived here from the rule itself."""
    from dataclasses import replace

    step = {o: i for i, o in enumerate(st.order)}
    last = {}
    for o in st.order:
        for t in st.ops[o].inputs:
            last[t] = max(last.get(t, -1), step[o])
    aliased = {t.alias_of for t in g.tensors if t.alias_of is not None}
    returned = {t.id for t in g.tensors if t.is_output}

    def ok(t):
        u = g.tensors[st.origin_t[t]]
        return (u.kind == "intermediate" and u.alias_of is None and u.id not in aliased and u.id not in returned
                and st.tensors[t].alias_of is None)

    ops, tensors = list(st.ops), list(st.tensors)
    for o in st.order:
        op = st.ops[o]
        used_x, used_y = set(), set()
        for ox, oy in sorted(allowed.get(st.origin_op[o], ()), key=lambda p: (g.ops[st.origin_op[o]].outputs.index(p[1]),
                                                                              g.ops[st.origin_op[o]].inputs.index(p[0]))):
            x = op.inputs[g.ops[st.origin_op[o]].inputs.index(ox)]
            y = op.outputs[g.ops[st.origin_op[o]].outputs.index(oy)]
            if (x in used_x or y in used_y or not ok(x) or not ok(y) or last.get(x) != step[o]
                    or g.tensors[ox].size != g.tensors[oy].size):
                continue
            used_x.add(x)
            used_y.add(y)
            tensors[y] = replace(tensors[y], alias_of=x)
    return sim_peak(ops, tensors, st.order)


@pytest.mark.parametrize("seed", range(4))
def test_predicted_peak_of_every_candidate_matches_the_built_state_with_inplace(seed):
    from roam_tvm.remat.delta import Frame, move_peak, plan_move
    from roam_tvm.remat.moves import Context, split
    from roam_tvm.remat.state import interval_arrays

    g = random_dag(50, seed, size_range=(2, 3)) if seed % 2 else GRAPHS[seed]()
    allowed = equal_size_pairs(g, seed)
    planner = RematPlanner(g, inplace=allowed)
    planner.floor()
    checked = 0
    for st, lv in list(zip(planner.states, planner.lives))[:8]:
        assert lv.peak == _inplace_peak(g, st, allowed)
        ctx = Context(st, lv)
        arr = interval_arrays(st)
        fr = Frame(ctx, arr["first"], arr["last"], arr["size"], arr["alloc"], arr["ws"], lv.profile, arr["pos"])
        for r, s in planner._candidates(ctx):
            for chain in (0, 1, 2):  # plain, chained, lean-chained
                mv = plan_move(ctx, r, s, chain)
                if mv is None:
                    continue
                nst = split(ctx, r, s, planner.costs, chain)
                assert move_peak(fr, mv, arr["base"])[0] == _inplace_peak(g, nst, allowed), (r, s, chain)
                checked += 1
    assert checked


@pytest.mark.parametrize("seed", range(4))
def test_lp_bound_with_inplace_is_below_every_plan(seed):
    from roam_tvm.remat.lp_bound import RelaxedBound

    g = random_dag(60, seed, size_range=(2, 3)) if seed % 2 else GRAPHS[seed]()
    planner = RematPlanner(g, inplace=equal_size_pairs(g, seed))
    bound = RelaxedBound(g, planner.base_order, planner.costs, planner.inplace)
    top, floor = planner.lives[0].peak, planner.floor().bytes
    assert bound.overhead(top) == 0.0
    for b in [floor + (top - floor) * k // 6 for k in range(6)]:
        low = bound.overhead(b)
        assert low is not None and low <= planner.plan(b).overhead + 1e-9, (b, low)
