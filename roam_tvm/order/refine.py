"""Step 3 of :func:`~roam_tvm.order.planner.plan_order`: one refinement pass over a window grid.

The current order is cut into windows (segments between fixed-position ops, chunked to
``node_budget`` around the peak). Windows whose peak is above the pass's floor are solved in
decreasing order of their peak, exactly by the down-set DP when small enough, else by the HiGHS
MIP, in a process pool; structurally identical windows are solved once. Each solved window is
checked before it replaces its span, and the pass never returns a worse order.
"""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from ..graph.model import Graph, GraphError
from .dp import dp_search
from .mip import solve_piece
from .piece import LivenessIndex, Piece, make_piece, piece_peak
from .repeat import piece_key
from .result import OrderResult
from .segments import segments
from .tree import center_of, windows

__all__ = ["refine_pass", "peak_segment", "peak_segment_proved", "valid_and_no_worse"]


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


def refine_pass(g: Graph, order: list[int], peak: int, lb: int, fixed: list[int], node_budget: int,
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
    new, new_peak = valid_and_no_worse(g, new, order, peak)
    if new is order:  # nothing applied: only the earlier proofs still hold
        proved.clear()
        proved |= was_proved
    else:  # earlier proofs hold where this pass left the span unchanged
        proved |= {w for w in was_proved if new[w[0]:w[1]] == order[w[0]:w[1]]}
    info["peak"] = new_peak
    info["deadline_hit"] = deadline_hit
    return new, new_peak, info, pool


def peak_segment_proved(g: Graph, order: list[int], fixed: list[int], proved: set[tuple[int, int]]) -> bool:
    """True when ``order``'s peak is provably the least any order of ``g`` can reach.

    The ops between two fixed-position ops are the same in every order, and the bytes live there
    depend only on how those ops are ordered. So the peak is a lower bound when it is reached at
    a fixed op, or inside a whole segment whose order a pass solved to its true optimum (a window
    in ``proved`` spanning the segment).
    """
    prof = g.live_profile(order)
    peak = max(prof, default=0)
    at_peak = [i for i, v in enumerate(prof) if v == peak]
    pos = {v: i for i, v in enumerate(order)}
    pos_fixed = {pos[v] for v in fixed}
    for lo, hi in segments(g, order, fixed):
        if (lo, hi) in proved and any(lo <= i < hi for i in at_peak):
            return True
    return any(i in pos_fixed for i in at_peak)


def peak_segment(g: Graph, order: list[int], fixed: list[int]) -> tuple[int, int] | None:
    """The segment ``[lo, hi)`` holding ``order``'s first peak position (None: it is a fixed op)."""
    prof = g.live_profile(order)
    at = prof.index(max(prof)) if prof else -1
    return next(((lo, hi) for lo, hi in segments(g, order, fixed) if lo <= at < hi), None)


def valid_and_no_worse(g: Graph, order: list[int], fallback: list[int], fallback_peak: int) -> tuple[list[int], int]:
    """``(order, its peak)`` when ``order`` passes ``g.check_order`` and peaks no higher than
    ``fallback_peak``, else ``(fallback, fallback_peak)``."""
    try:
        g.check_order(order)
        peak = g.peak(order)
    except GraphError:
        return fallback, fallback_peak
    return (order, peak) if peak <= fallback_peak else (fallback, fallback_peak)
