"""ROAM's piecewise layout: solve time windows separately, then join them.

1. Long-lived buffers (those crossing a window boundary) are stacked first from
   offset 0, longest-lived lowest (best fit).
2. Each window's remaining buffers are placed on top of what is already there,
   with the best greedy order found for that window alone.
3. Conflicts (there should be none by construction, but a caller may pass
   pieces solved elsewhere) are repaired by re-placing the smaller buffer.
4. Compaction: every buffer, lowest first, slides down to its lowest free offset.
5. The result is validated; an invalid join is never returned.
"""
from __future__ import annotations

import time

import numpy as np

from .heuristics import Arrays, OverlapIndex, lowest_fit
from .problem import Problem, Solution
from .validate import is_valid


def compact(arr: Arrays, index: OverlapIndex, offsets: np.ndarray, rounds: int = 2,
            deadline: float | None = None) -> np.ndarray:
    """Slide every buffer (lowest first) down to the lowest free aligned offset.

    Always valid: stopping at ``deadline`` keeps the moves made so far.
    """
    offs = offsets.copy()
    ends = offs + arr.size
    act = np.nonzero(arr.active)[0]
    for _ in range(rounds):
        moved = False
        for c, i in enumerate(act[np.argsort(offs[act], kind="stable")].tolist()):
            if deadline is not None and c % 256 == 255 and time.perf_counter() > deadline:
                return offs
            cand = index.overlapping(i)
            o = lowest_fit(offs[cand], ends[cand], int(arr.size[i]), int(arr.align[i]))
            if o < offs[i]:
                offs[i] = o
                ends[i] = o + arr.size[i]
                moved = True
        if not moved:
            break
    return offs


def repair(arr: Arrays, index: OverlapIndex, offsets: np.ndarray,
           deadline: float | None = None) -> np.ndarray | None:
    """Re-place the smaller buffer of every conflicting pair at its lowest free offset (None past deadline)."""
    offs = offsets.copy()
    ends = offs + arr.size
    act = np.nonzero(arr.active)[0]
    for c, i in enumerate(act[np.argsort(-arr.size[act], kind="stable")].tolist()):
        if deadline is not None and c % 256 == 255 and time.perf_counter() > deadline:
            return None
        cand = index.overlapping(i)
        clash = cand[(offs[cand] < ends[i]) & (offs[i] < ends[cand]) & (arr.size[cand] >= arr.size[i])]
        if len(clash):
            keep = cand[arr.size[cand] >= arr.size[i]]
            o = lowest_fit(offs[keep], ends[keep], int(arr.size[i]), int(arr.align[i]))
            offs[i] = o
            ends[i] = o + arr.size[i]
    return offs


def windows(arr: Arrays, pieces: int) -> list[tuple[int, int]]:
    """Cut the time span into ``pieces`` windows with equal numbers of buffer starts."""
    act = np.nonzero(arr.active)[0]
    if not len(act):
        return []
    starts = np.sort(arr.lower[act])
    t0, t1 = int(starts[0]), int(arr.upper[act].max())
    cuts = sorted({int(starts[int(len(starts) * k / pieces)]) for k in range(1, pieces)} - {t0})
    bounds = [t0] + cuts + [t1]
    return list(zip(bounds[:-1], bounds[1:]))


def join_solve(problem: Problem, pieces: int = 4, arr: Arrays | None = None,
               index: OverlapIndex | None = None, deadline: float | None = None) -> Solution | None:
    """Piecewise layout (see module doc); None if it does not validate or ``deadline`` passes."""
    arr = arr or Arrays(problem)
    index = index or OverlapIndex(arr)
    act = np.nonzero(arr.active)[0]
    wins = windows(arr, pieces)
    lo, up = arr.lower, arr.upper
    # A buffer belongs to the window holding its start; it is long-lived if it crosses a boundary.
    win_of = np.zeros(arr.n, np.int64)
    crosses = np.zeros(arr.n, bool)
    for k, (a, b) in enumerate(wins):
        sel = act[(lo[act] >= a) & (lo[act] < b)] if k < len(wins) - 1 else act[lo[act] >= a]
        win_of[sel] = k
        crosses[sel] = up[sel] > b
    long_ = act[crosses[act]]
    order = list(long_[np.lexsort((-arr.size[long_], -arr.length[long_]))])
    for k in range(len(wins)):
        local = act[(win_of[act] == k) & ~crosses[act]]
        order += list(local[np.argsort(-arr.size[local], kind="stable")])
    from .heuristics import place
    offs = place(arr, np.array(order, np.int64), "best", index, deadline)
    if offs is None:
        return None
    offs = repair(arr, index, offs, deadline)
    if offs is None:
        return None
    offs = compact(arr, index, offs, deadline=deadline)
    sol = arr.solution(offs, f"join-{pieces}")
    return sol if is_valid(problem, sol) else None
