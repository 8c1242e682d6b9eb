"""``plan_order``: heuristics, lower bound, then exact/MIP refinement of pieces.

Pipeline
--------
1. Candidates: every heuristic of :mod:`roam_tvm.order.heuristics`, plus update
   scheduling (:mod:`roam_tvm.order.updates`) on the best ones; keep the least
   ``g.peak``.
2. Lower bound ``cut_bound`` (pruned by the candidates' profiles). If the best
   candidate reaches it, stop: it is optimal.
3. Refinement passes: cut the current order into windows (segments between
   fixed-position ops, chunked to ``node_budget`` around the peak, see
   :mod:`roam_tvm.order.tree`); every window whose peak is above the bound is
   solved -- exactly by the down-set DP when small enough, else by the HiGHS MIP
   with a per-piece time limit -- in a process pool. Structurally identical
   pieces are solved once (:mod:`roam_tvm.order.repeat`). A second pass uses a
   grid shifted by half a window.
4. Guarantees: the result passes ``g.check_order`` and its peak is never above
   program order's (else program order is returned).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from ..graph.bounds import cut_profile
from ..graph.model import Graph, GraphError
from .dp import dp_order
from .heuristics import HEURISTICS, best_heuristic
from .mip import solve_piece
from .piece import LivenessIndex, Piece, make_piece, piece_peak
from .repeat import piece_key
from .segments import fixed_positions, segments
from .tree import center_of, windows
from .updates import DEFAULT_DELAY_RADIUS, schedule_updates

__all__ = ["plan_order", "OrderResult"]


@dataclass
class OrderResult:
    """Result of :func:`plan_order`.

    Attributes
    ----------
    order : list of int
        Valid order of all ops.
    peak : int
        ``g.peak(order)``.
    program_peak : int
        ``g.peak()`` (program order).
    pieces : int
        Pieces solved (repeats counted once).
    optimal, time_limited, fallback : int
        Piece outcomes: proved optimal (or reached the bound), stopped by the
        time limit with a solution, solver failure (heuristic kept).
    seconds : float
    report : dict
        JSON-able details (bound, heuristic peaks, passes, ...).
    """

    order: list[int]
    peak: int
    program_peak: int
    pieces: int = 0
    optimal: int = 0
    time_limited: int = 0
    fallback: int = 0
    seconds: float = 0.0
    report: dict = field(default_factory=dict)

    def summary(self) -> str:
        """One line: peak vs program order, bound, pieces, time."""
        mib = 1 << 20
        lb = self.report.get("cut_bound")
        red = 100.0 * (1 - self.peak / self.program_peak) if self.program_peak else 0.0
        s = (f"order: peak {self.peak / mib:.1f} MiB (program {self.program_peak / mib:.1f} MiB, "
             f"-{red:.1f}%)")
        if lb is not None:
            s += f", cut bound {lb / mib:.1f} MiB"
        s += (f", {self.pieces} pieces ({self.optimal} optimal, {self.time_limited} time-limited, "
              f"{self.fallback} fallback), {self.seconds:.1f} s")
        return s

    __str__ = summary


def _solve_one(args: tuple[Piece, float, int]) -> tuple[list[int], int, str]:
    """Worker: exact DP within ``time_limit``; if it gives up, the MIP within ``time_limit``."""
    piece, time_limit, floor = args
    cur = piece_peak(piece)
    if cur <= floor:
        return list(range(piece.size)), cur, "optimal"
    try:
        got = dp_order(piece, upper=cur, max_states=2_000_000, time_limit=time_limit)
    except Exception:  # noqa: BLE001
        got = None
    if got is not None:
        return got[0], got[1], "optimal"
    res = solve_piece(piece, time_limit=time_limit, floor=floor)
    status = {"trivial": "optimal"}.get(res.status, res.status)
    return res.local_order, res.peak, status


def plan_order(g: Graph, time_limit: float = 10.0, node_budget: int = 100,
               delay_radius: int = DEFAULT_DELAY_RADIUS, jobs: int | None = None, seed: int = 0,
               progress: bool = True, passes: int = 2) -> OrderResult:
    """Choose an order of ``g``'s ops with a low peak.

    Parameters
    ----------
    g : Graph
    time_limit : float
        Solver time limit per piece, seconds (> 0).
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
        Refinement passes (the second uses a half-shifted window grid).

    Returns
    -------
    OrderResult

    Raises
    ------
    ValueError
        ``time_limit <= 0`` or ``node_budget < 2``.
    GraphError
        The graph is cyclic or malformed.
    """
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if node_budget < 2:
        raise ValueError(f"node_budget must be >= 2, got {node_budget!r}")
    t0 = time.perf_counter()
    try:
        g.topological_order()
    except GraphError:
        raise
    except Exception as e:  # malformed structure
        raise GraphError(f"malformed graph {g.name!r}: {e}") from e
    n = len(g.ops)
    program = list(range(n))
    program_peak = g.peak(program)
    report: dict = {"graph": g.name, "ops": n, "program_peak": program_peak}
    if n == 0:
        return OrderResult([], program_peak, program_peak, seconds=time.perf_counter() - t0,
                           report=report)
    # 1. heuristics
    order, peak, peaks = best_heuristic(g)
    extra = {}
    if any(op.kind == "update" for op in g.ops):
        for name in sorted(peaks, key=peaks.get)[:3]:
            cand = schedule_updates(g, HEURISTICS[name](g), delay_radius)
            extra[f"{name}+updates"] = cand
            peaks[f"{name}+updates"] = g.peak(cand)
        best_extra = min(extra, key=peaks.get)
        if peaks[best_extra] < peak:
            order, peak = extra[best_extra], peaks[best_extra]
    report["heuristics"] = peaks
    # 2. bound
    prof = cut_profile(g, [order])
    lb = prof.bound
    report["cut_bound"] = lb
    report["cut_solved"] = prof.solved
    res = OrderResult(order, peak, program_peak, report=report)
    # 3. refinement
    jobs = (os.cpu_count() or 1) if jobs is None else max(1, int(jobs))
    fixed = fixed_positions(g) if peak > lb else []
    cache: dict[str, list[int]] = {}
    report["passes"] = []
    for p in range(passes):
        if peak <= lb:
            break
        idx = LivenessIndex(g, order)
        segs = segments(g, order, fixed)
        wins = windows(segs, node_budget, center=center_of(idx.profile),
                       shift=(node_budget // 2) * (p % 2))
        todo = [(lo, hi) for lo, hi in wins if hi - lo > 1 and max(idx.profile[lo:hi]) > lb]
        pieces = [make_piece(idx, lo, hi) for lo, hi in todo]
        keys = [piece_key(pc) for pc in pieces]
        uniq: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in cache:
                uniq.setdefault(k, i)
        work = [(pieces[i], float(time_limit), lb) for i in uniq.values()]
        results: dict[str, tuple[list[int], int, str]] = {}
        bar = None
        if progress and work:
            from tqdm import tqdm

            bar = tqdm(total=len(work), desc=f"order pass {p + 1}", unit="piece", leave=False)
        if jobs > 1 and len(work) > 1:
            with ProcessPoolExecutor(max_workers=min(jobs, len(work))) as ex:
                for k, out in zip(uniq, ex.map(_solve_one, work)):
                    results[k] = out
                    if bar is not None:
                        bar.update(1)
        else:
            for k, w in zip(uniq, work):
                results[k] = _solve_one(w)
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        for k, (loc, _pk, status) in results.items():
            cache[k] = loc
            res.pieces += 1
            if status == "optimal":
                res.optimal += 1
            elif status == "time_limit":
                res.time_limited += 1
            else:
                res.fallback += 1
        new = list(order)
        for (lo, hi), pc, k in zip(todo, pieces, keys):
            loc = cache.get(k)
            if loc is None or sorted(loc) != list(range(pc.size)):
                continue
            posl = {o: i for i, o in enumerate(loc)}
            if any(posl[u] > posl[v] for v, ps in enumerate(pc.preds) for u in ps):
                continue
            if piece_peak(pc, loc) > piece_peak(pc):
                continue
            new[lo:hi] = [pc.ops[i] for i in loc]
        try:
            g.check_order(new)
            new_peak = g.peak(new)
        except GraphError:
            new_peak = peak + 1
        report["passes"].append({"windows": len(wins), "solved": len(todo), "unique": len(work),
                                 "peak": min(new_peak, peak)})
        if new_peak <= peak:
            improved = new_peak < peak
            order, peak = new, new_peak
            if not improved and p >= 1:
                break
    # 4. guarantees
    try:
        g.check_order(order)
        peak = g.peak(order)
    except GraphError:
        order, peak = program, program_peak
    if peak > program_peak:
        order, peak = program, program_peak
    res.order, res.peak = order, peak
    res.seconds = time.perf_counter() - t0
    report["peak"] = peak
    report["optimal_proved"] = peak <= lb
    report["seconds"] = res.seconds
    return res
