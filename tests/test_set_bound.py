"""The first-of-set and ordered-set lower bounds (roam_tvm/graph/set_bound.py): valid against exhaustive
search, tighter than ``cut`` and the pair bound where an RNN's weight-gradient accumulators
each want to be created last, and used by the planner to stop at a proved optimum."""
from __future__ import annotations

from itertools import combinations

import pytest
from scipy.sparse.csgraph import breadth_first_order

from roam_tvm.graph import GraphBuilder
from roam_tvm.graph.bounds import _cut_data, cut_profile
from roam_tvm.graph.pair_bound import pair_cut_bound
from roam_tvm.graph.model import Graph
from roam_tvm.graph.set_bound import first_of_set, ordered_set_bound, set_cut_bound
from roam_tvm.order import exact_order, plan_order

from test_bounds import all_orders, small_graphs
from test_rnn_order import _gru_step, rnn_through_time


def _descendants(g: Graph, up: bool = False) -> dict:
    data = _cut_data(g)
    return {j: breadth_first_order(data.pred if up else data.succ, j, directed=True, return_predecessors=False)
            for j in range(len(g.ops))}


def _unrelated(desc: dict, ops) -> bool:
    return all(b not in set(desc[a].tolist()) for a in ops for b in ops if a != b)


def test_every_unrelated_set_bounds_the_optimum_brute_force():
    """On small random graphs, the first-of-set value of every unrelated set of up to three
    ops is at most the exhaustive optimum, and so is the bound."""
    for seed, g in enumerate(small_graphs(30)):
        if len(g.ops) > 10:
            continue
        opt = min(g.peak(o) for o in all_orders(g))
        desc, anc = _descendants(g), _descendants(g, up=True)
        for k in (2, 3):
            for ops in combinations(range(len(g.ops)), k):
                if _unrelated(desc, ops):
                    first = first_of_set(g, list(ops), desc)
                    assert first <= ordered_set_bound(g, list(ops), desc, anc) <= opt, (seed, ops)
        prof = cut_profile(g, full=True)
        bound = set_cut_bound(g, prof, top=len(g.ops))
        assert prof.bound <= bound <= opt, seed


def _rnn_three_sums(steps: int = 4, small: int = 4, big: int = 64) -> Graph:
    """Backward through time, then three weight-gradient sums over the steps, each an
    accumulator created from the first step's gate gradient and added into per step."""
    b = GraphBuilder("rnn3")
    xs, hs, dgs = rnn_through_time(b, steps, small, big)
    for sources in (hs[::-1], xs[::-1], hs[::-1]):
        [acc] = b.op([dgs[0], sources[0]], [big])
        for dg, src in zip(dgs[1:], sources[1:]):
            [acc] = b.op([acc, dg, src], [big])
        [out] = b.op([acc], [1])
        b.tensors[out].is_output = True
    return b.build()


def test_three_accumulators_reach_the_exact_optimum():
    g = _rnn_three_sums()
    _, opt, proved = exact_order(g, time_limit=60)
    assert proved
    prof = cut_profile(g, full=True)
    assert prof.bound < opt  # each accumulator alone would be created last
    assert set_cut_bound(g, prof) == opt


def test_related_ops_are_refused():
    g = _rnn_three_sums()
    desc = _descendants(g)
    a = 0
    b = int(desc[a][1])  # a descendant of op 0
    with pytest.raises(ValueError, match="pairwise unrelated"):
        first_of_set(g, [a, b], desc)
    with pytest.raises(ValueError, match="pairwise unrelated"):
        ordered_set_bound(g, [a, b], desc, _descendants(g, up=True))


def test_planner_proves_the_tiny_gru_optimal():
    """The tiny GRU family's step (tests/data): ``cut`` and the pair bound leave the planned
    order 5.6% above them; the set bound proves it optimal, so planning stops at once."""
    g = _gru_step()
    prof = cut_profile(g)
    pair = pair_cut_bound(g, prof)
    res = plan_order(g, time_limit=10, jobs=1, progress=False)
    g.check_order(res.order)
    assert res.report["set_bound"] > pair >= prof.bound
    assert res.peak == res.report["set_bound"]
    assert res.report["optimal_proved"] and res.report["stopped"] == "bound reached"
