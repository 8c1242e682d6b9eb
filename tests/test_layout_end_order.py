"""The ``end`` placement order (latest end first) on a big unrolled-RNN training trace.

``data/gru_realistic_layout.csv.gz`` is the offset problem RoamLayout handed the layout solver
for the zoo family ``gru_realistic`` (2 layers, hidden 1,024, batch 32 x 128 steps, Adam, roam's
order): 6,931 tensors with sizes rounded to the 64-byte alignment, live bytes at 0.96-1.0 x the
peak over most of the step. Too many for the search; every size order stays 9-15 % above the lower
bound there, so the arena was 187.2 MB for 171.6 MB of live tensors (roam 1.062 x `cut` with an
order proved optimal). Placed from the end of the step backwards it packs at the bound.
"""
from __future__ import annotations

import gzip
import os

from roam_tvm.layout import read_csv, solve, validate
from roam_tvm.layout.heuristics import LEAD_ORDERS, ORDERS, Arrays, OverlapIndex, best_heuristic, order_for, place
from roam_tvm.layout.problem import Buffer, Problem

GRU = os.path.join(os.path.dirname(__file__), "data", "gru_realistic_layout.csv.gz")


def gru_problem() -> Problem:
    with gzip.open(GRU, "rt") as f:
        return read_csv(f, alignment=64)


def _height(arr: Arrays, order: str, index: OverlapIndex) -> int:
    offs = place(arr, order_for(arr, order), "first", index)
    return int((offs + arr.size)[arr.active].max())


def test_end_order_sorts_by_latest_end_then_longest_then_largest():
    p = Problem([Buffer("a", 0, 5, 8), Buffer("b", 2, 9, 4), Buffer("c", 1, 9, 4), Buffer("d", 1, 9, 16),
                 Buffer("e", 3, 4, 0)])
    arr = Arrays(p)
    # e is empty (inactive); c and d end last and start first: the larger d leads
    assert [p.buffers[i].id for i in order_for(arr, "end")] == ["d", "c", "b", "a"]
    assert [p.buffers[i].id for i in order_for(arr, "size_end")] == ["d", "a", "c", "b"]


def test_end_order_packs_the_rnn_trace_at_the_bound_where_size_orders_do_not():
    p = gru_problem()
    arr, index = Arrays(p), OverlapIndex(Arrays(p))
    lb = p.lower_bound()
    assert _height(arr, "end", index) == lb
    for order in ("size", "size_long"):  # the trace is hard for the orders that were there before
        assert _height(arr, order, index) > 1.05 * lb


def test_end_is_among_the_leading_orders():
    assert "end" in ORDERS[:LEAD_ORDERS]
    p = gru_problem()
    best = best_heuristic(p, stop_at=p.lower_bound())  # stops at the first pass at the bound
    methods = [m for m, _ in best.stats["heuristics"]]
    assert methods.index("greedy-end-first") < LEAD_ORDERS
    assert best.height == p.lower_bound()


def test_solver_reaches_the_bound_on_the_rnn_trace_within_its_limit():
    p = gru_problem()
    sol = solve(p, time_limit=10.0)
    assert validate(p, sol) == []
    assert sol.height == p.lower_bound()
