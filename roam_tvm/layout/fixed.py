"""Buffers with a fixed offset (a filled ``offset`` cell in the CSV): kept, or refused.

Fixed buffers that overlap in time and in address cannot all keep their offsets; they are
refused with the rows that conflict. Otherwise every fixed buffer keeps its offset and the
free ones are placed around them by the greedy heuristics (each order and fit, the lowest
layout kept), since the exact stages of :func:`.solver.solve` move every buffer.
"""
from __future__ import annotations

import bisect
import heapq
import time

import numpy as np

from .heuristics import ORDERS, Arrays, OverlapIndex, order_for, place
from .problem import LayoutError, Problem, Solution
from .solver import solve


def fixed_conflicts(problem: Problem, limit: int = 6) -> list[tuple[str, str]]:
    """Pairs of fixed buffers live at the same time that share addresses (the first ``limit``).

    A sweep over start times keeps the live fixed buffers sorted by offset and pairwise disjoint (a
    buffer that conflicts is reported and left out), so only the neighbours of a new buffer can meet
    it: O(n log n) on solved traces with every offset filled.
    """
    fixed = sorted((b for b in problem.buffers if b.offset is not None and b.size > 0 and b.upper > b.lower),
                   key=lambda b: b.lower)
    out: list[tuple[str, str]] = []
    keys: list[tuple[int, int]] = []  # (offset, index into fixed) of the live ones, sorted
    expiry: list[tuple[int, int, int]] = []  # (upper, offset, index)
    for i, b in enumerate(fixed):
        while expiry and expiry[0][0] <= b.lower:
            _, o, k = heapq.heappop(expiry)
            del keys[bisect.bisect_left(keys, (o, k))]
        j = bisect.bisect_left(keys, (b.offset, -1))
        hits = [keys[j - 1]] if j and keys[j - 1][0] + fixed[keys[j - 1][1]].size > b.offset else []
        while j < len(keys) and keys[j][0] < b.offset + b.size:
            hits.append(keys[j])
            j += 1
        out += [(fixed[k].id, b.id) for _, k in hits]
        if len(out) >= limit:
            return out[:limit]
        if not hits:
            bisect.insort(keys, (b.offset, i))
            heapq.heappush(expiry, (b.upper, b.offset, i))
    return out


def check_fixed(problem: Problem, lines: dict[str, int] | None = None, name: str = "") -> None:
    """Raise LayoutError naming the rows whose fixed offsets conflict or break the alignment."""
    lines = lines or {}
    where = f"{name}: " if name else ""

    def row(i: str) -> str:
        return f"{i!r} (line {lines[i]})" if i in lines else repr(i)

    by_id = {b.id: b for b in problem.buffers}
    for b in problem.buffers:
        if b.offset is not None and b.offset % problem.align_of(b):
            raise LayoutError(f"{where}fixed offset {b.offset} of {row(b.id)} is not a multiple of the alignment "
                              f"{problem.align_of(b)}")
    pairs = fixed_conflicts(problem)
    if pairs:
        def show(i: str) -> str:
            b = by_id[i]
            return f"{row(i)} at [{b.offset}, {b.offset + b.size}) live [{b.lower}, {b.upper})"

        listed = "; ".join(f"{show(a)} and {show(b)}" for a, b in pairs[:5])
        more = " (and more)" if len(pairs) > 5 else ""
        raise LayoutError(f"{where}fixed offsets overlap in time and address: {listed}{more}. Change or clear "
                          "the offset cell of one row of each pair (an empty cell lets the solver place it)")


def solve_with_fixed(problem: Problem, time_limit: float = 60.0, **solve_options) -> Solution:
    """Solve ``problem`` keeping every fixed offset (plain :func:`solve` when none is fixed).

    Raises LayoutError (via :func:`check_fixed`) if the fixed offsets conflict.
    """
    arr = Arrays(problem)
    mask = np.fromiter((b.offset is not None for b in problem.buffers), bool, arr.n)
    if not mask.any():
        return solve(problem, time_limit=time_limit, **solve_options)
    check_fixed(problem)
    t0 = time.perf_counter()
    fixed = (np.fromiter((b.offset or 0 for b in problem.buffers), np.int64, arr.n), mask)
    index = OverlapIndex(arr)
    best = None
    for order in ORDERS:
        for fit in ("first", "best"):
            offs = place(arr, order_for(arr, order), fit, index, fixed=fixed)
            offs[mask] = fixed[0][mask]  # inactive fixed buffers keep their offset too
            sol = arr.solution(offs, f"greedy-{order}-{fit} around {int(mask.sum())} fixed")
            if best is None or sol.height < best.height:
                best = sol
        if time.perf_counter() - t0 > time_limit:
            break
    best.stats.update(lower_bound=problem.lower_bound(), seconds=time.perf_counter() - t0, fixed=int(mask.sum()))
    return best
