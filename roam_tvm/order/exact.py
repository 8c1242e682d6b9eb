"""Exact whole-graph ordering: the test oracle for small graphs (up to ~60 ops).

An exact dynamic program over down-sets (:mod:`roam_tvm.order.dp`) is tried
first -- it proves optimality quickly on narrow graphs, where a MIP's LP
relaxation is weak. When the graph is too wide for it, one whole-graph MIP
(:mod:`roam_tvm.order.mip`, HiGHS) is solved instead, warm-started by the best
heuristic (as an upper bound) and stopped at the cut bound.
"""
from __future__ import annotations

from ..graph.bounds import cut_bound
from ..graph.model import Graph, GraphError
from .heuristics import best_heuristic
from .dp import dp_order
from .mip import solve_piece
from .piece import LivenessIndex, make_piece

__all__ = ["exact_order"]


def exact_order(g: Graph, time_limit: float = 60.0, verbose: bool = False,
                method: str = "auto", max_states: int = 2_000_000) -> tuple[list[int], int, bool]:
    """Order all ops of ``g`` with one MIP (HiGHS), warm-started by the best heuristic.

    Parameters
    ----------
    g : Graph
        Meant for graphs of up to ~60 ops; larger ones work but may time out.
    time_limit : float
        Solver time limit in seconds (> 0).
    verbose : bool
        Solver log.
    method : {"auto", "dp", "mip"}
        ``auto``: DP, then the MIP if the DP state space is too big.
    max_states : int
        State limit of the DP.

    Returns
    -------
    order : list of int
    peak : int
        ``g.peak(order)``.
    optimal : bool
        True when optimality was proved (solver optimum, or the cut bound reached).
    """
    if not time_limit > 0:
        raise ValueError(f"time_limit must be > 0, got {time_limit!r}")
    g.topological_order()  # GraphError on cycles
    n = len(g.ops)
    if n == 0:
        return [], g.always_live_bytes, True
    start, peak, _ = best_heuristic(g)
    lb = cut_bound(g, orders=[start])
    if peak <= lb:
        return start, peak, True
    idx = LivenessIndex(g, start)
    piece = make_piece(idx, 0, n)
    if method in ("auto", "dp"):
        import time as _time

        t0 = _time.perf_counter()
        got = dp_order(piece, upper=peak, max_states=max_states, time_limit=time_limit)
        if got is not None:
            order = [piece.ops[i] for i in got[0]]
            g.check_order(order)
            return order, g.peak(order), True
        if method == "dp":
            return start, peak, False
        time_limit = max(1.0, time_limit - (_time.perf_counter() - t0))
    res = solve_piece(piece, time_limit=time_limit, floor=lb, verbose=verbose)
    order = [piece.ops[i] for i in res.local_order]
    try:
        g.check_order(order)
    except GraphError:
        return start, peak, False
    pk = g.peak(order)
    if pk > peak:
        return start, peak, False
    return order, pk, res.status in ("optimal", "trivial") or pk <= lb
