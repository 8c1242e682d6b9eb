"""Lower bounds: brute force on small random graphs."""
from __future__ import annotations

import pytest

from roam_tvm.graph.bounds import any_bound, cut_bound, cut_profile, order_bound
from roam_tvm.graph.model import GraphBuilder
from roam_tvm.graph.random import random_dag, random_training_graph


def all_orders(g):
    n = len(g.ops)
    preds = [set(p) for p in g.predecessors]
    out = []

    def rec(order, done):
        if len(order) == n:
            out.append(list(order))
            return
        for v in range(n):
            if v not in done and preds[v] <= done:
                order.append(v)
                done.add(v)
                rec(order, done)
                order.pop()
                done.remove(v)

    rec([], set())
    return out


def small_graphs(count):
    for seed in range(count):
        if seed % 2:
            yield random_dag(6 + seed % 3, seed, output_prob=0.2)
        else:
            yield random_training_graph(9, seed, program="random")


def test_bounds_sandwich_brute_force():
    tight = total = 0
    for g in small_graphs(120):
        if len(g.ops) > 10:
            continue
        opt = min(g.peak(o) for o in all_orders(g))
        a, c, o = any_bound(g), cut_bound(g), order_bound(g)
        assert a <= c <= opt <= o
        full = cut_profile(g, full=True)
        assert full.bound == c
        total += 1
        tight += c == opt
    assert total > 80
    assert tight >= 0.7 * total


def test_cut_profile_per_op_below_realised_live():
    g = random_training_graph(200, 3, program="updates_last")
    prof = cut_profile(g, full=True)
    live = g.live_profile()
    assert len(prof.cut) == len(g.ops)
    for j, v in prof.cut.items():
        assert v <= live[j]
    assert prof.bound == max(prof.cut.values())


def test_inplace_and_views():
    b = GraphBuilder("t")
    w = b.tensor(100, kind="param")
    x = b.tensor(10, kind="input")
    (a,) = b.op([x, w], [50])
    (g_,) = b.op([a], [100])
    b.op([w, g_], [], kind="update", inplace=[w], workspace=200)
    (out,) = b.op([a], [1])
    b.tensors[out].is_output = True
    g = b.build()
    opt = min(g.peak(o) for o in all_orders(g))
    assert any_bound(g) <= cut_bound(g) <= opt


def test_cut_bound_fast_on_large_graph():
    g = random_training_graph(2500, 1, program="updates_last")
    assert cut_bound(g) <= g.peak()


def test_empty_graph():
    g = GraphBuilder("e").build()
    assert cut_bound(g) == any_bound(g) == 0


def test_largest_cuts_are_exact_under_a_pruned_profile():
    # A pruned profile knows most ops only by their live bytes in some order; the pair bound
    # must pair the ops with the largest *cuts* (a real CNN's pair bound was missed this way).
    from roam_tvm.graph.bounds import CutProfile
    from roam_tvm.graph.pair_bound import largest_cuts

    for seed in range(20):
        g = random_training_graph(30, seed, program="random")
        full = cut_profile(g, full=True)
        want = sorted(full.cut.values(), reverse=True)[:4]
        pruned = cut_profile(g)
        assert sorted((full.cut[j] for j in largest_cuts(g, pruned, 4)), reverse=True) == want, seed
        # an upper bound far above every cut ranks nothing by itself
        inflated = CutProfile(pruned.bound, pruned.argmax, [u + 10**9 for u in pruned.upper], {})
        assert sorted((full.cut[j] for j in largest_cuts(g, inflated, 4)), reverse=True) == want, seed


def test_graph_optimum_is_the_brute_force_optimum():
    """The exhaustive search's optimum equals the least peak over every order, also where the cut is
    loose (each cut met by some order, never all at once), and is never below the cut."""
    from roam_tvm.order.dp import graph_optimum

    loose = total = 0
    for g in small_graphs(120):
        if len(g.ops) > 10:
            continue
        opt = min(g.peak(o) for o in all_orders(g))
        c = cut_bound(g)
        assert graph_optimum(g) == opt
        assert graph_optimum(g, floor=c) == opt
        total += 1
        loose += c < opt
    assert total > 80 and loose > 0


def test_graph_optimum_gives_up_on_a_tiny_budget():
    from roam_tvm.order.dp import graph_optimum

    g = random_training_graph(400, 5, program="random")
    assert graph_optimum(g, max_states=50) is None


def test_lower_bounds_add_exact_only_above_the_cuts():
    from roam_tvm.report.simulate import lower_bounds

    for g in small_graphs(120):
        if len(g.ops) > 10:
            continue
        opt = min(g.peak(o) for o in all_orders(g))
        above = lower_bounds(g, reached=opt)
        if max(above["cut"], above["pair"], above.get("set", 0)) < opt:
            break
    else:
        pytest.fail("no small graph that every cut bound leaves loose")
    assert above["exact"] == opt
    at_cut = lower_bounds(g, reached=above["cut"])
    assert "exact" not in at_cut
