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
   (:func:`~roam_tvm.graph.bounds.pair_cut_bound`), then the first-of-set bound
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
   bound.
5. Guarantees: the result passes ``g.check_order`` and its peak is never above
   program order's (else program order is returned).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Sequence

from ..graph.bounds import cut_profile, pair_cut_bound
from ..graph.set_bound import set_cut_bound
from ..graph.model import Graph, GraphError
from .cutrepair import cut_guided_repair
from .dp import dp_search
from .heuristics import HEURISTICS, best_heuristic, heuristic_orders
from .mip import solve_piece
from .piece import LivenessIndex, Piece, make_piece, piece_peak
from .repeat import piece_key
from .segments import fixed_positions, segments
from .tree import center_of, windows
from .updates import DEFAULT_DELAY_RADIUS, schedule_updates

__all__ = ["plan_order", "OrderResult", "default_total_time_limit"]

#: Fraction of the total budget the cut bound may use.
BOUND_SHARE = 0.25


def default_total_time_limit(n_ops: int, time_limit: float) -> float:
    """Default overall budget in seconds: ``min(30 * time_limit, max(6 * time_limit, n_ops / 50))``.

    With the default ``time_limit=10``: 60 s up to 3,000 ops (gpt2-small with
    Adam, fused, is ~2,500), 240 s at 12,000 ops, 300 s from 15,000 ops on
    (GPT2-XL).
    """
    return float(min(30.0 * time_limit, max(6.0 * time_limit, n_ops / 50.0)))


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
        Piece outcomes: proved optimal (or reached the floor), stopped by the
        time limit with a solution, solver failure (heuristic kept).
    reused : int
        Pieces that took the solution of a structurally identical piece
        instead of being solved (see ``report["repeats"]``).
    seconds : float
    report : dict
        JSON-able details (bound, heuristic peaks, passes, repeats, budget, ...).
    """

    order: list[int]
    peak: int
    program_peak: int
    pieces: int = 0
    optimal: int = 0
    time_limited: int = 0
    fallback: int = 0
    reused: int = 0
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
        for key in ("pair", "set"):
            tighter = self.report.get(f"{key}_bound")
            if tighter is not None and lb is not None and tighter > lb:
                s += f", {key} bound {tighter / mib:.1f} MiB"
        s += (f", {self.pieces} pieces ({self.optimal} optimal, {self.time_limited} time-limited, "
              f"{self.fallback} fallback, {self.reused} reused), {self.seconds:.1f} s")
        stop = self.report.get("stopped")
        if stop:
            s += f" [{stop}]"
        return s

    __str__ = summary


def _solve_one(args: tuple[Piece, float, int, float]) -> tuple[list[int], int, str, bool]:
    """Worker: exact DP within ``time_limit``; if it gives up, the MIP within ``time_limit``.

    Both together stay within ``budget`` seconds (the time left before the deadline).

    Returns (local order, its peak, status, proved): ``proved`` when the order is
    the piece's true optimum (not merely down to ``floor``).
    """
    piece, time_limit, floor, budget = args
    t0 = time.perf_counter()
    cur = piece_peak(piece)
    if cur <= floor:
        return list(range(piece.size)), cur, "optimal", False
    try:
        # CPU seconds for the DP (same answer however loaded the machine is), and
        # the wall-clock budget left before the overall deadline
        got = dp_search(piece, floor=floor, upper=cur, max_states=1_000_000,
                        time_limit=time_limit, wall_limit=budget)
    except Exception:  # noqa: BLE001
        got = None
    if got is not None and got[2]:
        # optimal; a true optimum of the piece unless it merely reached the floor
        return got[0], got[1], "optimal", got[1] > floor
    if got is not None:  # improved, then out of budget: let the MIP try to beat it
        cur_order, cur = got[0], got[1]
        piece = _reordered(piece, cur_order)
    else:
        cur_order = list(range(piece.size))
    left = min(time_limit, budget - (time.perf_counter() - t0))
    if left < 2.0:  # building the MIP alone takes about that long: not worth starting
        return cur_order, cur, "time_limit", False
    res = solve_piece(piece, time_limit=left, floor=floor)
    status = {"trivial": "optimal"}.get(res.status, res.status)
    if res.peak > cur:  # cannot happen (solve_piece never returns worse), but never trust it
        return cur_order, cur, "time_limit", False
    return ([cur_order[i] for i in res.local_order], res.peak, status,
            res.status == "optimal" and res.peak > floor)


def _reordered(piece: Piece, local_order: list[int]) -> Piece:
    """The same piece with its ops renumbered in ``local_order`` (so it is the current order)."""
    from dataclasses import replace

    new_of = [0] * piece.size
    for i, o in enumerate(local_order):
        new_of[o] = i
    preds = [sorted(new_of[u] for u in piece.preds[o]) for o in local_order]
    tensors = [(s, tuple(sorted(new_of[u] for u in us)), b, a) for s, us, b, a in piece.tensors]
    return replace(piece, ops=[piece.ops[o] for o in local_order], preds=preds,
                   ws=[piece.ws[o] for o in local_order], tensors=tensors,
                   labels=[piece.labels[o] for o in local_order] if piece.labels else [])


def _check_local(pc: Piece, loc: list[int] | None) -> bool:
    """``loc`` is a valid local order of ``pc`` and not worse than its current order."""
    if loc is None or sorted(loc) != list(range(pc.size)):
        return False
    posl = [0] * pc.size
    for i, o in enumerate(loc):
        posl[o] = i
    if any(posl[u] > posl[v] for v, ps in enumerate(pc.preds) for u in ps):
        return False
    return piece_peak(pc, loc) <= piece_peak(pc)


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
        cand, cand_peak, rounds = cut_guided_repair(g, start, lb, deadline)
        try:
            g.check_order(cand)
        except GraphError:
            rounds = -1  # recorded; this start is dropped
        else:
            if cand_peak < best_peak:
                best, best_peak = cand, cand_peak
        runs[name] = {"rounds": rounds, "peak": int(cand_peak)}
        if best_peak <= lb:
            break
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
        for p in range(passes):
            if stopped:
                break
            if time.perf_counter() >= deadline:
                stopped = "time budget"
                report["budget"]["deadline_hit"] = True
                break
            new, new_peak, info, pool = _refine_pass(
                g, order, peak, lb, fixed, node_budget, (node_budget // 2) * (p % 2), time_limit,
                deadline, jobs, pool, cache, proved, res, progress, p)
            report["passes"].append(info)
            if info.get("deadline_hit"):
                report["budget"]["deadline_hit"] = True
            improved = new_peak < peak
            if new_peak <= peak:
                order, peak = new, new_peak
            if peak <= lb:
                stopped = "bound reached"
            elif info.get("deadline_hit"):
                stopped = "time budget"
            elif not improved and p >= 1:
                stopped = "no improvement"
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    rep = report["repeats"]
    uses = sorted(rep.pop("_uses", {}).values(), reverse=True)
    # windows per structure that was solved once and used more than once
    rep["groups"] = [u for u in uses if u > 1][:50]
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
    report["stopped"] = stopped or "passes done"
    report["seconds"] = res.seconds
    return res


def _refine_pass(g: Graph, order: list[int], peak: int, lb: int, fixed: list[int], node_budget: int,
                 shift: int, time_limit: float, deadline: float, jobs: int,
                 pool: ProcessPoolExecutor | None, cache: dict[str, list[int]],
                 proved: set[tuple[int, int]], res: OrderResult, progress: bool, p: int):
    """One refinement pass over a window grid; returns (order, peak, info, pool)."""
    idx = LivenessIndex(g, order)
    prof = idx.profile
    segs = segments(g, order, fixed)
    wins = windows(segs, node_budget, center=center_of(prof), shift=shift)
    cand = [(lo, hi) for lo, hi in wins if hi - lo > 1]
    # floor: the peak at positions no window of this pass can change, and the bound
    changeable = [False] * len(order)
    for lo, hi in cand:
        changeable[lo:hi] = [True] * (hi - lo)
    floor = max([lb] + [v for v, c in zip(prof, changeable) if not c])
    wpk = {w: max(prof[w[0]:w[1]]) for w in cand}
    # A window of the same span as one solved to optimality in an earlier pass is
    # the same sub-problem (no op crosses a window boundary): nothing to gain.
    todo = sorted((w for w in cand if wpk[w] > floor and w not in proved),
                  key=lambda w: (-wpk[w], w[0]))
    was_proved = proved.copy()
    proved.clear()
    pieces = {w: make_piece(idx, *w) for w in todo}
    keys = {w: piece_key(pieces[w]) for w in todo}
    groups: dict[str, list[tuple[int, int]]] = {}
    for w in todo:
        groups.setdefault(keys[w], []).append(w)
    info: dict = {"windows": len(wins), "above_floor": len(todo), "unique": len(groups), "solved": 0,
                  "reused": 0, "skipped_below_floor": 0, "floor": floor}
    rep = res.report["repeats"]
    results: dict[str, list[int]] = {}
    reached: dict[tuple[int, int], int] = {}  # window -> its peak after this pass
    queue = list(groups)  # keys, by decreasing peak of their first window
    bar = None
    if progress and queue:
        from tqdm import tqdm

        bar = tqdm(total=len(queue), desc=f"order pass {p + 1}", unit="piece", leave=False)

    def current_floor() -> int:
        return max([floor] + list(reached.values()))

    def accept(k: str, loc: list[int] | None, status: str | None, exact: bool = False) -> None:
        if status is not None:
            res.pieces += 1
            info["solved"] += 1
            rep["solved"] += 1
            if status == "optimal":
                res.optimal += 1
            elif status == "time_limit":
                res.time_limited += 1
            else:
                res.fallback += 1
        if loc is not None:
            cache[k] = loc
            results[k] = loc
        ws = groups[k]
        uses = rep.setdefault("_uses", {})
        uses[k] = uses.get(k, 0) + len(ws)
        for i, w in enumerate(ws):
            pc = pieces[w]
            rep["pieces"] += 1
            if status is None or i > 0:
                res.reused += 1
                info["reused"] += 1
                rep["reused"] += 1
            use = results.get(k)
            ok = _check_local(pc, use)
            reached[w] = piece_peak(pc, use) if ok else wpk[w]
            if ok and exact:
                proved.add(w)
        if bar is not None:
            bar.update(1)

    def eligible(k: str) -> bool:
        return max(wpk[w] for w in groups[k]) > current_floor()

    in_flight: dict = {}
    deadline_hit = False
    try:
        while queue or in_flight:
            # dispatch
            while queue and len(in_flight) < max(1, jobs):
                k = queue[0]
                if k in cache:  # solved in an earlier pass: reuse
                    queue.pop(0)
                    accept(k, cache[k], None)
                    continue
                if not eligible(k):
                    queue.pop(0)
                    info["skipped_below_floor"] += len(groups[k])
                    if bar is not None:
                        bar.update(1)
                    continue
                left = deadline - time.perf_counter()
                if left <= 0.2:
                    deadline_hit = True
                    queue.clear()
                    break
                queue.pop(0)
                args = (pieces[groups[k][0]], float(time_limit), current_floor(), float(left))
                if jobs > 1:
                    if pool is None:
                        pool = ProcessPoolExecutor(max_workers=jobs)
                    in_flight[pool.submit(_solve_one, args)] = k
                else:
                    loc, _pk, status, exact = _solve_one(args)
                    accept(k, loc, status, exact)
            if not in_flight:
                continue
            done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            for fut in done:
                k = in_flight.pop(fut)
                try:
                    loc, _pk, status, exact = fut.result()
                except Exception:  # noqa: BLE001 -- a crashed worker keeps the heuristic order
                    loc, status, exact = None, "fallback", False
                accept(k, loc, status, exact)
    finally:
        if bar is not None:
            bar.close()
    new = list(order)
    for w, k in keys.items():
        loc = results.get(k)
        pc = pieces[w]
        if not _check_local(pc, loc):
            continue
        new[w[0]:w[1]] = [pc.ops[i] for i in loc]
    try:
        g.check_order(new)
        new_peak = g.peak(new)
    except GraphError:
        new, new_peak = order, peak
    if new_peak > peak:
        new, new_peak = order, peak
    if new is order:  # nothing applied: only the earlier proofs still hold
        proved.clear()
        proved |= was_proved
    else:  # earlier proofs hold where this pass left the span unchanged
        proved |= {w for w in was_proved if new[w[0]:w[1]] == order[w[0]:w[1]]}
    info["peak"] = new_peak
    info["deadline_hit"] = deadline_hit
    return new, new_peak, info, pool
