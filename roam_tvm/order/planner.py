"""``plan_order``: heuristics, lower bound, then exact/MIP refinement of pieces.

Pipeline
--------
1. Candidates: the heuristics of :mod:`roam_tvm.order.heuristics`, plus update
   scheduling (:mod:`roam_tvm.order.updates`) on the best ones; keep the least
   ``g.peak``.
2. Lower bound ``cut_bound`` (pruned by the candidates' profiles, and given at
   most a quarter of the time budget). If the best candidate reaches it, stop:
   it is optimal.
2b. Cut-guided repair (:mod:`roam_tvm.order.cutrepair`): at the peak step, run
   the min-cut prefix of that op first, keeping earlier repairs in place; repeat
   while the peak drops. This makes the long-distance moves (weight-gradient
   kernels pulled into the backward chain) that windows cannot.
2c. If the peak is still above the bound, the pairwise bound
   (:func:`~roam_tvm.graph.pair_bound.pair_cut_bound`), then the first-of-set bound
   (:func:`~roam_tvm.graph.set_bound.set_cut_bound`) may prove it optimal all the
   same; the larger replaces the bound from here on (``report["pair_bound"]``,
   ``report["set_bound"]``).
3. Refinement passes: cut the current order into windows (segments between
   fixed-position ops, chunked to ``node_budget`` around the peak, see
   :mod:`roam_tvm.order.tree`). Only windows whose peak is above the *floor*
   are solved: the floor is the largest of the bound, the peak at positions no
   window can change, and the best peak already reached by a solved window
   (the combined order can not go below any of them in this pass). Windows are
   solved in decreasing order of their peak -- exactly by the down-set DP when
   small enough, else by the HiGHS MIP with a per-piece time limit -- in a
   process pool. Structurally identical pieces are solved once
   (:mod:`roam_tvm.order.repeat`); the reuse is counted in ``report["repeats"]``.
   Later passes use a grid shifted by half a window.
4. Budget: everything (heuristics, bound, passes) runs within
   ``total_time_limit``; no piece is started after the deadline and each piece's
   limit is cut to the time left. Planning stops as soon as the peak equals the
   bound, or is proved optimal another way: reached inside a whole segment (the
   ops between two fixed-position ops) that a pass solved exactly
   (``report["segment_optimum"]``).
5. Guarantees: the result passes ``g.check_order`` and its peak is never above
   program order's (else program order is returned).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Sequence

from ..graph.bounds import cut_profile
from ..graph.pair_bound import pair_cut_bound
from ..graph.set_bound import set_cut_bound
from ..graph.model import Graph, GraphError
from .cutrepair import cut_guided_repair
from .heuristics import HEURISTICS, best_heuristic, heuristic_orders
from .refine import peak_segment, peak_segment_proved, refine_pass, valid_and_no_worse
from .result import OrderResult
from .segments import fixed_positions
from .updates import DEFAULT_DELAY_RADIUS, schedule_updates

__all__ = ["plan_order", "OrderResult", "default_total_time_limit"]

#: Fraction of the total budget the cut bound may use.
BOUND_SHARE = 0.25
#: Largest segment (ops between fixed-position ops) solved as one window when it holds the peak.
EXACT_SEGMENT_OPS = 400
#: Smallest window the refinement halves to after time-limited pieces (step 3a).
MIN_WINDOW_OPS = 25
#: CPU seconds the exact DP gets on that segment: below the 2 s a MIP needs to be worth
#: building, so none is started after it, and CPU time keeps the outcome independent of load.
EXACT_SEGMENT_SECONDS = 1.9
#: (lookahead, radius) of the repairs that continue the best repaired order, in turn, while above the bound
WIDER_REPAIRS = ((32, 16),)


def default_total_time_limit(n_ops: int, time_limit: float) -> float:
    """Default overall budget in seconds: ``min(30 * time_limit, max(6 * time_limit, n_ops / 50))``.

    With the default ``time_limit=10``: 60 s up to 3,000 ops (gpt2-small with
    Adam, fused, is ~2,500), 240 s at 12,000 ops, 300 s from 15,000 ops on
    (GPT2-XL).
    """
    return float(min(30.0 * time_limit, max(6.0 * time_limit, n_ops / 50.0)))


def _repair_into(g: Graph, start: list[int], lb: int, deadline: float, incumbent: tuple[list[int], int],
                 runs: dict, name: str, **options) -> tuple[list[int], int]:
    """One cut-guided repair of ``start`` (``options``: its lookahead / radius), recorded in ``runs[name]``;
    the better of its result (if it is a valid order) and ``incumbent``."""
    cand, cand_peak, rounds = cut_guided_repair(g, start, lb, deadline, **options)
    try:
        g.check_order(cand)
    except GraphError:
        rounds = -1  # recorded; this start is dropped
    else:
        if cand_peak < incumbent[1]:
            incumbent = (cand, cand_peak)
    runs[name] = {"rounds": rounds, "peak": int(cand_peak)}
    return incumbent


def _repair_candidates(g: Graph, cands: dict[str, list[int]], peaks: dict[str, int],
                       order: list[int], lb: int, deadline: float,
                       report: dict) -> tuple[list[int], int]:
    """Cut-guided repair of ``order`` and of every other distinct candidate; the best valid result.

    ``order`` (the best candidate) is repaired first, then the others in increasing order of
    peak while time is left before ``deadline``.
    """
    t_rep = time.perf_counter()
    best, best_peak = order, g.peak(order)
    starts = [("best", order)] + [(k, cands[k]) for k in sorted(cands, key=peaks.get)]
    seen: set[tuple[int, ...]] = set()
    runs: dict[str, dict] = {}
    for name, start in starts:
        key = tuple(start)
        if key in seen:
            continue
        seen.add(key)
        if runs and time.perf_counter() >= deadline:
            break
        best, best_peak = _repair_into(g, start, lb, deadline, (best, best_peak), runs, name)
        if best_peak <= lb:
            break
    # the repair stops where no chain of `lookahead` splits near the peak helps; a longer chain over
    # more merged blocks makes the longer moves (a time-major LSTM: 99,756 -> 98,156 B, cut 97,132)
    for lookahead, radius in WIDER_REPAIRS:
        if best_peak <= lb or time.perf_counter() >= deadline:
            break
        best, best_peak = _repair_into(g, best, lb, deadline, (best, best_peak), runs, f"wider{lookahead}",
                                       lookahead=lookahead, radius=radius)
    report["cut_repair"] = {"starts": runs, "seconds": round(time.perf_counter() - t_rep, 3)}
    return best, best_peak


def plan_order(g: Graph, time_limit: float = 10.0, node_budget: int = 100,
               delay_radius: int = DEFAULT_DELAY_RADIUS, jobs: int | None = None, seed: int = 0,
               progress: bool = True, passes: int = 2, total_time_limit: float | None = None,
               heuristics: Sequence[str] | None = None, repair: bool = True) -> OrderResult:
    """Choose an order of ``g``'s ops with a low peak.

    Parameters
    ----------
    g : Graph
    time_limit : float
        Solver time limit per piece, seconds (> 0): the exact DP gets this many
        CPU seconds (so its answer does not depend on the machine's load), then,
        if it gave up, the MIP this many wall-clock seconds; both are cut to the
        time left in ``total_time_limit``.
    node_budget : int
        Maximum ops per piece (ROAM's NL).
    delay_radius : int
        Update scheduling: how far an update may be delayed past its earliest slot.
    jobs : int, optional
        Worker processes (default: CPU count). 1 solves in-process.
    seed : int
        Reserved for randomised tie-breaking (the pipeline is deterministic).
    progress : bool
        tqdm progress bar over pieces.
    passes : int
        Maximum refinement passes (every other pass uses a half-shifted window grid).
    total_time_limit : float, optional
        Overall budget in seconds for the whole call (heuristics, bound and
        refinement); default :func:`default_total_time_limit`. The result is
        the best order found when it runs out.
    heuristics : sequence of str, optional
        Names of :data:`~roam_tvm.order.heuristics.HEURISTICS` to start from
        (default: all). ``["program"]`` refines the program order only.
    repair : bool
        Run the cut-guided repair (step 2b) before the window passes; False
        leaves every move to the windows.

    Returns
    -------
    OrderResult

    Raises
    ------
    ValueError
        ``time_limit <= 0``, ``total_time_limit <= 0``, ``node_budget < 2``
        or an unknown heuristic.
    GraphError
        The graph is cyclic or malformed.
    """
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if total_time_limit is not None and not (isinstance(total_time_limit, (int, float))
                                             and total_time_limit > 0):
        raise ValueError(f"total_time_limit must be a positive number of seconds, got {total_time_limit!r}")
    if node_budget < 2:
        raise ValueError(f"node_budget must be >= 2, got {node_budget!r}")
    names = list(HEURISTICS) if heuristics is None else list(heuristics)
    unknown = [h for h in names if h not in HEURISTICS]
    if unknown or not names:
        raise ValueError(f"unknown heuristic(s) {unknown}; choose from {', '.join(HEURISTICS)}")
    t0 = time.perf_counter()
    try:
        g.topological_order()
    except GraphError:
        raise
    except Exception as e:  # malformed structure
        raise GraphError(f"malformed graph {g.name!r}: {e}") from e
    n = len(g.ops)
    total = default_total_time_limit(n, time_limit) if total_time_limit is None else float(total_time_limit)
    # keep some time for what a deadline cannot interrupt: building the last MIPs
    # (not covered by HiGHS's time limit) and the final checks (~1 s at 20k ops)
    deadline = t0 + total - min(0.1 * total, 15.0)
    program = list(range(n))
    program_peak = g.peak(program)
    report: dict = {"graph": g.name, "ops": n, "program_peak": program_peak,
                    "budget": {"time_limit": time_limit, "total_time_limit": total, "deadline_hit": False},
                    "repeats": {"pieces": 0, "solved": 0, "reused": 0}}
    if n == 0:
        return OrderResult([], program_peak, program_peak, seconds=time.perf_counter() - t0,
                           report=report)
    # 1. heuristics
    cands = heuristic_orders(g, names)
    order, peak, peaks = best_heuristic(g, [], extra=cands)
    if any(op.kind == "update" for op in g.ops):
        for name in sorted(peaks, key=peaks.get)[:3]:
            cand = schedule_updates(g, cands[name], delay_radius)
            cands[f"{name}+updates"] = cand
            peaks[f"{name}+updates"] = g.peak(cand)
        best_extra = min(cands, key=lambda k: (peaks[k], k != "program"))
        if peaks[best_extra] < peak:
            order, peak = cands[best_extra], peaks[best_extra]
    report["heuristics"] = peaks
    report["heuristic_seconds"] = round(time.perf_counter() - t0, 3)
    # 2. bound
    prof = cut_profile(g, [order], time_limit=max(0.5, BOUND_SHARE * total))
    lb = prof.bound
    report["cut_bound"] = lb
    report["cut_solved"] = prof.solved
    report["cut_complete"] = prof.complete
    report["bound_seconds"] = round(time.perf_counter() - t0 - report["heuristic_seconds"], 3)
    # 2b. cut-guided repair at the peak step (long-distance moves); checked like every candidate.
    # The repair is greedy, so where it starts matters (an unrolled RNN: from the best
    # heuristic it keeps every weight-gradient matmul at the end, from program order it
    # reaches within 1% of the bound). Every distinct candidate is repaired, best first.
    if repair and peak > lb:
        order, peak = _repair_candidates(g, cands, peaks, order, lb,
                                         min(deadline, time.perf_counter() + 0.25 * total), report)
    # 2c. stronger bounds where the cut is loose: two ops that each want the other run first,
    # or several accumulators that each want to be created last
    if peak > lb:
        t_pair = time.perf_counter()
        pair = pair_cut_bound(g, prof, time_limit=max(0.5, 0.1 * total))
        report["pair_bound"] = pair
        report["pair_seconds"] = round(time.perf_counter() - t_pair, 3)
        lb = max(lb, pair)
    if peak > lb:
        t_set = time.perf_counter()
        report["set_bound"] = set_cut_bound(g, prof, time_limit=max(0.5, 0.05 * total))
        report["set_seconds"] = round(time.perf_counter() - t_set, 3)
        lb = max(lb, report["set_bound"])
    res = OrderResult(order, peak, program_peak, report=report)
    # 3. refinement
    jobs = (os.cpu_count() or 1) if jobs is None else max(1, int(jobs))
    report["passes"] = []
    stopped = "bound reached" if peak <= lb else None
    pool: ProcessPoolExecutor | None = None
    cache: dict[str, list[int]] = {}
    proved: set[tuple[int, int]] = set()  # windows whose current order is their optimum
    try:
        fixed = fixed_positions(g) if peak > lb else []

        def run_pass(p: int, window_ops: int, shift: int, piece_seconds: float) -> str | None:
            """One refinement pass; the reason to stop after it, if any."""
            nonlocal order, peak, pool
            new, new_peak, info, pool = refine_pass(
                g, order, peak, lb, fixed, window_ops, shift, piece_seconds,
                deadline, jobs, pool, cache, proved, res, progress, p)
            info["window_ops"] = window_ops
            report["passes"].append(info)
            if info.get("deadline_hit"):
                report["budget"]["deadline_hit"] = True
            improved = new_peak < peak
            if new_peak <= peak:
                order, peak = new, new_peak
            if peak <= lb:
                return "bound reached"
            if peak_segment_proved(g, order, fixed, proved):
                # the peak's whole segment was solved exactly: no order goes lower
                report["segment_optimum"] = peak
                return "segment optimum"
            if info.get("deadline_hit"):
                return "time budget"
            if not improved and p >= 1:
                return "no improvement"
            return None

        # Windows the solvers could not finish in their time, with no gain (wide graphs: attention
        # heads side by side, parallel experts), are halved for the next pass, which is added to
        # the planned ones: half-size windows are often solved exactly in a fraction of the time.
        window, planned = node_budget, passes
        p = grid = 0  # grid: passes at this window size (odd ones shifted by half a window)
        while p < planned and not stopped:
            if time.perf_counter() >= deadline:
                stopped = "time budget"
                report["budget"]["deadline_hit"] = True
                break
            limited, before = res.time_limited, peak
            stopped = run_pass(p, window, (window // 2) * (grid % 2), time_limit)
            grid += 1
            if res.time_limited > limited and peak >= before and window // 2 >= MIN_WINDOW_OPS \
                    and stopped in (None, "no improvement"):
                window, grid = window // 2, 0
                planned += 1
                report["budget"]["halved_windows"] = window
                stopped = None
            p += 1
        # 3b. windows smaller than the peak's segment cannot prove it optimal, nor make the
        # moves that span it: solve that segment as one window when it is small enough
        seg = peak_segment(g, order, fixed) if stopped in (None, "no improvement") else None
        if (seg is not None and node_budget < seg[1] - seg[0] <= EXACT_SEGMENT_OPS
                and time.perf_counter() < deadline):
            # a short try: the exact DP settles narrow segments in seconds; on wider ones (an
            # unrolled RNN) the MIP would spend its whole time limit for nothing, so it gets none
            stopped = run_pass(len(report["passes"]), seg[1] - seg[0], 0,
                               min(time_limit, EXACT_SEGMENT_SECONDS)) or stopped
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    rep = report["repeats"]
    uses = sorted(rep.pop("_uses", {}).values(), reverse=True)
    # windows per structure that was solved once and used more than once
    rep["groups"] = [u for u in uses if u > 1][:50]
    # 4. guarantees
    order, peak = valid_and_no_worse(g, order, program, program_peak)
    res.order, res.peak = order, peak
    res.seconds = time.perf_counter() - t0
    report["peak"] = peak
    report["optimal_proved"] = peak <= lb or peak == report.get("segment_optimum")
    report["stopped"] = stopped or "passes done"
    report["seconds"] = res.seconds
    return res
