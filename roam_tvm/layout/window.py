"""Exact packing where it matters: the search on the peak window of a big trace.

On the big real traces the lower bound is set by a short stretch of time: on
pangu_2.6B a single step is above 0.99x the bound and everything outside
[4830, 6300] is below 0.9x. A layout is at the bound only if that stretch is
packed perfectly, while everywhere else there is room to spare. So this stage

1. takes the *window*: the span of times whose live bytes are at least
   ``frac`` times the peak;
2. packs every buffer live in the window with the branch-and-bound
   (:func:`.search.search_fit`) at the target capacity, buffers that cross the
   window's edges included. Their lifespans outside the window are either
   *clipped* to it, or *compressed*: their endpoints outside are replaced by
   their rank among the crossing buffers' endpoints, which keeps the order in
   which they start and end (so the preorders still put the longest-lived
   lowest, and crossing buffers do not overlap outside the window);
3. fixes those offsets and places the rest greedily around them
   (:func:`.heuristics.place` with ``fixed``), largest first.

Step 3 can fail where the window's packing strands a long crossing buffer high
up (a big buffer outside the window then finds no gap), so several windows,
both lifespan modes and two search settings are tried, each packing giving a
different layout, until one reaches the goal or the time is spent. Per window,
both modes run with the cheap setting before either runs with the costly one
(S_1: the compressed light packing meets the bound; tried before it, the
clipped full search cost ~8 s, and where it packed, three fills that did not). The search
runs first *light* (no unallocated floors or energetic test: those cost
O(span x members) per node and prune nothing when, as here, the search packs
without backtracking), then with every test. Every layout is exact by
construction; the caller validates it. Numpy and the search only.
"""
from __future__ import annotations

import time

import numpy as np

from .heuristics import Arrays, OverlapIndex, order_for, place
from .search import SearchParams, search_fit

#: Live-bytes thresholds (fractions of the peak) that define the windows tried, in turn.
FRACTIONS = (0.95, 0.98, 0.9)
#: The most buffers a window may hold (the search's tables are dense in them).
MAX_WINDOW = 6000
#: Placement orders for the buffers outside the window.
FILL_ORDERS = ("size", "long_lived", "size_long")
LIGHT = SearchParams(suffix_check=False, unallocated_floor=False)
#: (name, search parameters, share of the time left) of the settings tried on each window.
SETTINGS = (("light", LIGHT, 0.15), ("full", SearchParams(), 0.3))


def live_profile(arr: Arrays) -> tuple[np.ndarray, np.ndarray]:
    """(times, live bytes from each time to the next) over the active buffers."""
    act = arr.active
    lo, up, sz = arr.lower[act], arr.upper[act], arr.size[act]
    times = np.unique(np.concatenate((lo, up)))
    delta = np.zeros(len(times) + 1, np.int64)
    np.add.at(delta, np.searchsorted(times, lo), sz)
    np.add.at(delta, np.searchsorted(times, up), -sz)
    return times, np.cumsum(delta)[:len(times)]


def hot_window(times: np.ndarray, live: np.ndarray, frac: float) -> tuple[int, int]:
    """[t0, t1): from the first to the end of the last section with live bytes >= frac x peak."""
    hot = np.flatnonzero(live >= frac * live.max())
    return int(times[hot[0]]), int(times[hot[-1] + 1])


def window_lifespans(arr: Arrays, t0: int, t1: int, mode: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The buffers live in [t0, t1) and their lifespans for the window's search (see module doc)."""
    if mode not in ("clip", "compress"):
        raise ValueError(f"unknown window mode {mode!r}; use 'clip' or 'compress'")
    w = np.flatnonzero(arr.active & (arr.lower < t1) & (arr.upper > t0))
    lo, up = arr.lower[w].copy(), arr.upper[w].copy()
    left, right = lo < t0, up > t1
    if mode == "clip":
        lo[left], up[right] = t0, t1
    else:
        starts = np.unique(lo[left])
        lo[left] = t0 - (len(starts) - np.searchsorted(starts, lo[left]))
        ends = np.unique(up[right])
        up[right] = t1 + 1 + np.searchsorted(ends, up[right])
    return w, lo, up


def peak_window(arr: Arrays, index: OverlapIndex, goal: int, deadline: float, height: int | None = None,
                stats: dict | None = None, settings: tuple[str, ...] = ("light", "full"),
                max_buffers: int = MAX_WINDOW) -> tuple[np.ndarray, str] | None:
    """The best layout found by packing a peak window exactly and filling around it.

    Parameters
    ----------
    arr, index : Arrays, OverlapIndex
        The problem and its overlap index.
    goal : int
        The capacity the window is packed into; stop once a layout reaches it.
    deadline : float
        ``time.perf_counter()`` value; every search and fill stops by then.
    height : int, optional
        The height to beat (default: any layout counts).
    stats : dict, optional
        Filled with ``tried``: (window, mode, setting, outcome) tuples.
    settings : tuple of str
        The search settings tried on each window, in turn: ``light`` and/or ``full``
        (a trace the whole search can take needs only ``full``: where the light search
        packs a window, the whole search usually packs the trace).
    max_buffers : int
        Windows holding more buffers are skipped (the search's tables are dense in them;
        a window holding nearly every buffer is the whole search again).

    Returns
    -------
    tuple of (np.ndarray, str) or None
        Offsets of all buffers and the method name, or None if nothing beat ``height``.
    """
    unknown = [x for x in settings if x not in dict((n, p) for n, p, _ in SETTINGS)]
    if unknown:
        raise ValueError(f"peak_window: unknown search settings {unknown}; use 'light' and/or 'full'")
    tried: list[tuple] = []
    if stats is not None:
        stats["tried"] = tried
    if not arr.active.any():
        return None
    times, live = live_profile(arr)
    best, best_h, seen = None, height, set()
    orders = {name: order_for(arr, name) for name in FILL_ORDERS}
    for frac in FRACTIONS:
        t0, t1 = hot_window(times, live, frac)
        if (t0, t1) in seen:
            continue
        seen.add((t0, t1))
        spans = {mode: window_lifespans(arr, t0, t1, mode) for mode in ("clip", "compress")}
        # both lifespan modes with the cheap setting before either with the costly one
        for setting, params, share in SETTINGS:
            if setting not in settings:
                continue
            for mode, (w, lo, up) in spans.items():
                if len(w) > min(max_buffers, MAX_WINDOW):
                    continue
                left = deadline - time.perf_counter()
                if left <= 0:
                    return best
                offs_w = search_fit(lo, up, arr.size[w], arr.align[w], goal, time_limit=share * left,
                                    params=params, max_group=MAX_WINDOW)
                if offs_w is None:
                    tried.append(((t0, t1), mode, setting, "not packed"))
                    continue
                fixed = np.zeros(arr.n, bool)
                fixed[w] = True
                offsets = np.zeros(arr.n, np.int64)
                offsets[w] = offs_w
                for name, order in orders.items():
                    full = place(arr, order, "best", index, deadline, fixed=(offsets, fixed))
                    if full is None:
                        return best
                    h = int((full + arr.size)[arr.active].max())
                    tried.append(((t0, t1), mode, setting, f"fill-{name}", h))
                    if best_h is None or h < best_h:
                        best, best_h = (full, f"window-{mode}-{name}"), h
                    if h <= goal:
                        return best
    return best
