"""Ordering core: heuristics, exact oracle, MIP, planner guarantees."""
from __future__ import annotations

import json

import pytest

from roam_tvm.graph.bounds import cut_bound
from roam_tvm.graph.model import GraphBuilder, GraphError, Op, Tensor, Graph
from roam_tvm.graph.bounds import cut_profile
from roam_tvm.graph.random import random_dag, random_training_graph, repeated_blocks
from roam_tvm.order import HEURISTICS, exact_order, plan_order, schedule_updates
from roam_tvm.order.dp import dp_order, dp_search
from roam_tvm.order.planner import default_total_time_limit
from roam_tvm.order.mip import solve_piece
from roam_tvm.order.piece import LivenessIndex, make_piece, piece_peak
from roam_tvm.order.repeat import piece_key
from roam_tvm.order.segments import segments
from roam_tvm.order.tree import windows

from test_bounds import all_orders


def _graphs(count, n=40):
    for seed in range(count):
        if seed % 2:
            yield random_dag(n, seed, output_prob=0.1)
        else:
            yield random_training_graph(n, seed, program="random")


def test_heuristics_valid():
    for g in _graphs(6, 60):
        for name, h in HEURISTICS.items():
            g.check_order(h(g))


def test_deferral_fixes_greedy_on_training_graph():
    g = random_training_graph(300, 1, program="updates_last")
    lb = cut_bound(g)
    assert g.peak(HEURISTICS["greedy_deferred"](g)) <= g.peak(HEURISTICS["greedy"](g))
    assert g.peak(HEURISTICS["least_peak"](g)) <= 1.01 * lb


def test_exact_matches_brute_force():
    for seed in range(40):
        g = random_dag(7 + seed % 3, seed, output_prob=0.2) if seed % 2 else \
            random_training_graph(9, seed, program="random")
        if len(g.ops) > 10:
            continue
        opt = min(g.peak(o) for o in all_orders(g))
        order, peak, proved = exact_order(g, time_limit=10)
        g.check_order(order)
        assert peak == opt and proved


def test_mip_matches_dp_on_small_pieces():
    for seed in range(3):
        g = random_dag(12, seed, output_prob=0.2)
        order = list(range(len(g.ops)))
        idx = LivenessIndex(g, order)
        pc = make_piece(idx, 2, len(order))
        dp = dp_order(pc)
        res = solve_piece(pc, time_limit=20)
        assert res.status in ("optimal", "trivial")
        assert res.peak == dp[1] == piece_peak(pc, dp[0])


def test_piece_peak_matches_graph():
    g = random_training_graph(80, 2, program="random")
    order = HEURISTICS["greedy"](g)
    idx = LivenessIndex(g, order)
    for lo, hi in [(0, 10), (5, 40), (30, len(order))]:
        assert piece_peak(make_piece(idx, lo, hi)) == max(idx.profile[lo:hi])


def test_plan_order_near_exact_fast_subset():
    # time_limit as in the slow test: the DP needs a few seconds on some of these
    # 40-op graphs when the machine is loaded.
    for g in _graphs(10):
        res = plan_order(g, time_limit=10, jobs=1, progress=False)
        g.check_order(res.order)
        _, opt, _ = exact_order(g, time_limit=30)
        assert res.peak <= g.peak()
        assert res.peak <= opt * 1.01
        json.dumps(res.report)
        assert "MiB" in res.summary()


@pytest.mark.slow
def test_plan_order_near_exact_200():
    worse = 0
    for g in _graphs(200):
        res = plan_order(g, time_limit=10, jobs=1, progress=False)
        _, opt, _ = exact_order(g, time_limit=60)
        assert res.peak <= g.peak()
        worse += res.peak > opt * 1.01
    assert worse == 0


def test_plan_order_errors():
    g = random_dag(10, 0)
    with pytest.raises(ValueError):
        plan_order(g, time_limit=0)
    with pytest.raises(ValueError):
        plan_order(g, time_limit=-1)
    with pytest.raises(ValueError, match="total_time_limit"):
        plan_order(g, total_time_limit=0)
    with pytest.raises(ValueError, match="heuristic"):
        plan_order(g, heuristics=["nope"])
    with pytest.raises(GraphError):
        Graph([Op(0, "a", [1], [0]), Op(1, "b", [0], [1])],
              [Tensor(0, "x", 4), Tensor(1, "y", 4)])


def test_plan_order_empty_and_single():
    assert plan_order(GraphBuilder().build(), progress=False).order == []
    b = GraphBuilder()
    x = b.tensor(4, kind="input")
    b.op([x], [8])
    assert plan_order(b.build(), progress=False).order == [0]


def test_plan_order_parallel_training_graph():
    g = random_training_graph(600, 5, program="updates_last")
    res = plan_order(g, time_limit=2, jobs=2, progress=False, node_budget=60)
    g.check_order(res.order)
    assert res.peak <= res.program_peak
    assert res.peak >= cut_bound(g)


def test_update_scheduling_valid():
    g = random_training_graph(200, 4, program="updates_last")
    o = schedule_updates(g, list(range(len(g.ops))))
    g.check_order(o)


def test_segments_and_windows_cover():
    g = random_training_graph(300, 2)
    segs = segments(g)
    wins = windows(segs, 50, center=100)
    assert all(hi - lo <= 50 for lo, hi in wins)
    covered = sum(hi - lo for lo, hi in wins)
    assert covered == sum(hi - lo for lo, hi in segs)


def test_repeat_key_ignores_layer_index():
    g = random_training_graph(400, 1, transposes=False, skip_prob=0.0, views=False)
    # same structure, different sizes: keys differ; identical piece: keys equal
    idx = LivenessIndex(g, list(range(len(g.ops))))
    a = make_piece(idx, 10, 20)
    assert piece_key(a) == piece_key(make_piece(idx, 10, 20))


# ------------------------------------------------------------- budget, early stop
def test_default_total_time_limit():
    assert default_total_time_limit(2500, 10) == 60
    assert default_total_time_limit(12000, 10) == 240
    assert default_total_time_limit(20000, 10) == 300
    assert default_total_time_limit(40, 5) == 30


def test_total_time_limit_respected_and_never_worse():
    # an unstructured DAG: many wide windows whose pieces each could take 2 x time_limit
    g = random_dag(800, 0)
    res = plan_order(g, time_limit=10, total_time_limit=4, jobs=1, progress=False)
    g.check_order(res.order)
    assert res.peak <= g.peak()
    assert res.seconds < 4 + 3  # no piece starts after the deadline; each is cut to the time left
    assert res.report["budget"]["total_time_limit"] == 4


def test_stops_at_bound_without_refinement():
    g = random_training_graph(600, 5, program="updates_last")
    res = plan_order(g, progress=False, jobs=1)
    assert res.peak == res.report["cut_bound"]
    assert res.report["stopped"] == "bound reached" and res.report["passes"] == []
    assert res.pieces == 0 and res.report["optimal_proved"]


def test_cut_profile_time_limit_is_still_a_bound():
    g = random_dag(300, 3)
    full = cut_profile(g)
    quick = cut_profile(g, time_limit=1e-9)
    assert quick.solved >= 1 and quick.bound <= full.bound
    assert not quick.complete or quick.bound == full.bound


def test_dp_search_matches_dp_order():
    for seed in range(8):
        g = random_dag(14, seed, output_prob=0.2)
        idx = LivenessIndex(g, list(range(len(g.ops))))
        pc = make_piece(idx, 0, len(g.ops))
        lb = cut_bound(g)
        exact = dp_order(pc, max_states=10**6, time_limit=60)
        got = dp_search(pc, floor=lb, max_states=10**6, time_limit=60)
        assert got[2] and got[1] == exact[1] == piece_peak(pc, got[0])


# ----------------------------------------------------------------- repeated pieces
def test_repeated_blocks_solved_once():
    n = 8
    g = repeated_blocks(n)
    # the windows alone (the cut repair would otherwise reach the bound before them)
    res = plan_order(g, heuristics=["program"], jobs=1, progress=False, repair=False)
    g.check_order(res.order)
    assert res.peak < g.peak()
    rep = res.report["repeats"]
    # block 0 reads the input stream, blocks 1..n-1 are identical: two structures solved
    assert rep["solved"] == res.pieces == 2
    assert rep["reused"] == res.reused == n - 2
    assert rep["pieces"] == n
    assert rep["groups"] == [n - 1]
    # and the reused orders are optimal: same peak as solving every block
    small = repeated_blocks(2)
    _, opt, proved = exact_order(small, time_limit=30)
    assert proved
    assert plan_order(small, heuristics=["program"], jobs=1, progress=False).peak == opt
    assert "reused" in res.summary()


def test_repeated_blocks_parallel_same_answer():
    g = repeated_blocks(6, branches=3)
    a = plan_order(g, heuristics=["program"], jobs=1, progress=False, repair=False)
    b = plan_order(g, heuristics=["program"], jobs=2, progress=False, repair=False)
    assert a.peak == b.peak < g.peak()
    assert b.reused == a.reused >= 4


def test_repeat_cache_collision_is_harmless():
    # a cached order is re-checked against each window before it is used
    import roam_tvm.order.refine as refine

    g = repeated_blocks(4)
    real = refine.piece_key
    try:
        refine.piece_key = lambda pc: "same"  # every window collides
        res = plan_order(g, heuristics=["program"], jobs=1, progress=False)
    finally:
        refine.piece_key = real
    g.check_order(res.order)
    assert res.peak <= g.peak()


def test_repeat_key_distinguishes_structure():
    g = repeated_blocks(4)
    idx = LivenessIndex(g, list(range(len(g.ops))))
    segs = segments(g)
    keys = [piece_key(make_piece(idx, lo, hi)) for lo, hi in segs]
    assert len(set(keys[1:])) == 1 and keys[0] != keys[1]
    h = repeated_blocks(4, depth=2)
    idx2 = LivenessIndex(h, list(range(len(h.ops))))
    lo, hi = segments(h)[1]
    assert piece_key(make_piece(idx2, lo, hi)) not in keys


def test_cut_guided_repair_reaches_the_bound_where_windows_cannot():
    """A weight-gradient-like chain placed late: only a long-distance move reaches `cut`."""
    from roam_tvm.graph import GraphBuilder
    from roam_tvm.graph.bounds import cut_bound
    from roam_tvm.order.cutrepair import cut_guided_repair

    b = GraphBuilder()
    x = b.tensor(8, "input")
    acts = []
    h = x
    for _ in range(6):  # forward chain saving big activations
        [h] = b.op([h], [100])
        acts.append(h)
    grads = []
    g_ = h
    for a in reversed(acts):  # backward chain; each step also makes a big weight-gradient input
        [g_] = b.op([g_, a], [10])
        [w] = b.op([g_], [300])  # large temporary that dies only at its consumer below
        grads.append(w)
    for w in grads:  # consumers of those temporaries placed at the very end (program order is bad)
        [o] = b.op([w], [1])
        b.tensors[o].is_output = True
    g = b.build()
    lb = cut_bound(g)
    assert g.peak() > lb
    order, peak, rounds = cut_guided_repair(g, list(range(len(g.ops))), lb, deadline=float("inf"))
    g.check_order(order)
    assert peak == lb and rounds >= 1


def _with_views_and_inplace(g: Graph, seed: int) -> Graph:
    """``g`` with a view after some ops (half the readers read the view) and one in-place op."""
    import random

    rng = random.Random(seed)
    tensors = list(g.tensors)
    ops: list[Op] = []
    remap: dict[int, int] = {}  # tensor -> view read by some later ops
    for op in g.ops:
        ins = [remap.get(t, t) if rng.random() < 0.5 else t for t in op.inputs]
        ops.append(Op(len(ops), op.name, ins, list(op.outputs), op.workspace, op.kind))
        for t in op.outputs:
            if rng.random() < 0.5:
                v = Tensor(len(tensors), f"view{t}", tensors[t].size, alias_of=t)
                tensors.append(v)
                ops.append(Op(len(ops), f"view{t}", [t], [v.id], kind="view"))
                remap[t] = v.id
    # an in-place write into an intermediate that still has readers before it
    mids = [t.id for t in tensors if t.kind == "intermediate" and t.alias_of is None
            and any(t.id in o.inputs for o in ops)]
    t = rng.choice(mids)
    readers = [o.id for o in ops if t in o.inputs]
    out = Tensor(len(tensors), f"acc{t}", tensors[t].size, alias_of=t, is_output=True)
    tensors.append(out)
    ops.append(Op(len(ops), "accumulate", [t, next(iter(g.ops[-1].outputs), t)], [out.id],
                  inplace=[t], after=readers))
    return Graph(ops, tensors, name=f"{g.name}+views")


def test_dp_runs_free_ops_at_once_and_stays_exact():
    """Views and in-place writes open no tensor: the DP runs them as soon as they are
    ready instead of branching on them, and the optimum is unchanged."""
    from roam_tvm.order.dp import _DP

    checked = 0
    for seed in range(30):
        base = random_dag(5 + seed % 3, seed, output_prob=0.2) if seed % 2 else \
            random_training_graph(6, seed, program="random")
        g = _with_views_and_inplace(base, seed)
        if len(g.ops) > 10:
            continue
        order = list(range(len(g.ops)))
        pc = make_piece(LivenessIndex(g, order), 0, len(order))
        assert _DP(pc, 10**6, 60).free_mask, "the graph has views: some ops are free"
        opt = min(g.peak(o) for o in all_orders(g))
        got = dp_order(pc, upper=g.peak(order) + 1, max_states=10**6, time_limit=60)
        local, peak = got
        full = [pc.ops[i] for i in local]
        g.check_order(full)
        assert peak == opt == g.peak(full)
        checked += 1
    assert checked >= 10
