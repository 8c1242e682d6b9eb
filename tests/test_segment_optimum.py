"""The planner's second proof of optimality (``report["segment_optimum"]``): the ops between two
fixed-position ops are the same in every order, so a peak reached inside such a segment, once that
whole segment is solved exactly, is the least any order can reach, even where ``cut`` is below it."""
from __future__ import annotations

from roam_tvm.graph import GraphBuilder
from roam_tvm.order import plan_order
from roam_tvm.order.refine import peak_segment, peak_segment_proved
from roam_tvm.order.segments import fixed_positions

from test_bounds import all_orders, small_graphs


def test_proved_peaks_are_the_exhaustive_optimum():
    # A weak start (program order, windows of 2 ops, one pass) leaves most peaks above the
    # optimum after the pass; a proof that trusted an unsolved segment would stop there.
    proved_by_segment = 0
    for seed, g in enumerate(small_graphs(200)):
        if len(g.ops) > 10:
            continue
        res = plan_order(g, node_budget=2, jobs=1, progress=False, heuristics=["program"], repair=False,
                         passes=1)
        opt = min(g.peak(o) for o in all_orders(g))
        assert res.peak >= opt, seed
        if res.report["optimal_proved"]:
            assert res.peak == opt, seed
        if "segment_optimum" in res.report:
            assert res.report["segment_optimum"] == res.peak == opt, seed
            proved_by_segment += 1
    assert proved_by_segment >= 2


def _chain_with_branches():
    """in -> a -> {b, c} -> d: b and c may run in either order; d and a are fixed."""
    b = GraphBuilder("branches")
    [x] = b.op([], [8])
    [y] = b.op([x], [8])
    [p] = b.op([y], [16])
    [q] = b.op([y], [4])
    [out] = b.op([p, q], [1])
    b.tensors[out].is_output = True
    return b.build()


def test_a_peak_at_a_fixed_op_needs_no_solved_segment():
    g = _chain_with_branches()
    fixed = fixed_positions(g)
    order = list(range(len(g.ops)))
    prof = g.live_profile(order)
    at = prof.index(max(prof))
    assert (order[at] in fixed) == peak_segment_proved(g, order, fixed, set())


def test_an_unsolved_segment_proves_nothing():
    g = _chain_with_branches()
    fixed = fixed_positions(g)
    for order in all_orders(g):
        seg = peak_segment(g, order, fixed)
        if seg is None:
            continue
        assert not peak_segment_proved(g, order, fixed, set())
        assert peak_segment_proved(g, order, fixed, {seg})
        assert not peak_segment_proved(g, order, fixed, {(seg[0], seg[1] + 1)})
