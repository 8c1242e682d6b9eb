"""Greedy placement heuristics (no TVM).

Every heuristic places the buffers one at a time in some order. A buffer goes to
the lowest aligned offset (``fit="first"``) or to the tightest gap
(``fit="best"``) among the already placed buffers whose lifespans overlap its
own. Orders:

* ``size``: largest first (ties: input order -- on real traces the input order
  is allocation order, and keeping it beats every other tie-break we tried);
* ``size_long``: largest first (ties: longest first, then earliest start);
* ``length``: longest lifespan first;
* ``area``: largest size x length first;
* ``long_lived``: ROAM's rule -- buffers living at least half the span are
  stacked first from offset 0, longest-lived lowest, then the rest by size;
* ``start``: largest first, ties by start time (what an online allocator would see);
* ``end``: by end time, latest first (ties: longest first, then largest): a sweep
  backwards in time. A training step's activations are freed by the backward in about
  the reverse of the order the forward made them, and a backward's buffers come and go in
  its own order, so placed from the end each buffer meets the ones that outlive it already
  stacked. On an RNN's training trace (6,931 buffers, a long plateau at 0.96-1.0 x the
  peak) it packs at the lower bound where every size order stays 9-15 % above it;
* ``size_end``: largest first (ties: latest end first, then earliest start).

The overlap query uses an index over the lifespans (checkpointed live sets plus
a start-time sorted array), so each placement costs O(live) numpy work and
traces with tens of thousands of buffers are handled in seconds.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from .problem import Problem, Solution

INF = np.int64(1) << np.int64(62)
ORDERS = ("size", "end", "size_long", "area", "long_lived", "length", "start", "size_end")
#: The leading orders, run under every fit before the rest (on big traces only a few passes fit).
LEAD_ORDERS = 3


class Arrays:
    """Numpy views of a problem: lower, upper, size, alignment (int64)."""

    def __init__(self, problem: Problem):
        bufs = problem.buffers
        self.problem = problem
        self.n = len(bufs)
        self.lower = np.fromiter((b.lower for b in bufs), np.int64, self.n)
        self.upper = np.fromiter((b.upper for b in bufs), np.int64, self.n)
        self.size = np.fromiter((b.size for b in bufs), np.int64, self.n)
        self.align = np.fromiter((problem.align_of(b) for b in bufs), np.int64, self.n)
        self.active = (self.size > 0) & (self.upper > self.lower)
        self.length = self.upper - self.lower

    def solution(self, offsets: np.ndarray, method: str) -> Solution:
        offs = {b.id: int(o) for b, o in zip(self.problem.buffers, offsets)}
        h = int((offsets + self.size)[self.active].max()) if self.active.any() else 0
        return Solution(offs, h, method)


class OverlapIndex:
    """Answers "which buffers overlap buffer i in time" in O(live + K)."""

    def __init__(self, arr: Arrays, checkpoint_every: int = 256):
        self.arr = arr
        idx = np.nonzero(arr.active)[0]
        lo = arr.lower[idx]
        order = np.argsort(lo, kind="stable")
        self.by_lower = idx[order]
        self.lower_sorted = lo[order]
        m = len(self.by_lower)
        self.K = checkpoint_every
        self.cp_pos = np.arange(0, max(m, 1), self.K)
        self.cp_time = self.lower_sorted[self.cp_pos] if m else np.zeros(0, np.int64)
        self.cp_live: list[np.ndarray] = []
        self.cp_end: list[int] = []
        up_sorted = arr.upper[self.by_lower]
        for t in self.cp_time:
            end = int(np.searchsorted(self.lower_sorted, t, "right"))
            sel = self.by_lower[:end][up_sorted[:end] > t]
            self.cp_live.append(sel)
            self.cp_end.append(end)

    def live_at(self, t: int) -> np.ndarray:
        """Active buffers with lower <= t < upper."""
        if not len(self.cp_time):
            return np.zeros(0, np.int64)
        k = int(np.searchsorted(self.cp_time, t, "right")) - 1
        if k < 0:
            return np.zeros(0, np.int64)
        up = self.arr.upper
        base = self.cp_live[k]
        base = base[up[base] > t]
        end = int(np.searchsorted(self.lower_sorted, t, "right"))
        extra = self.by_lower[self.cp_end[k]:end]
        if len(extra):
            extra = extra[up[extra] > t]
            return np.concatenate((base, extra))
        return base

    def overlapping(self, i: int) -> np.ndarray:
        """Active buffers other than ``i`` whose lifespans overlap buffer i's."""
        lo, hi = int(self.arr.lower[i]), int(self.arr.upper[i])
        live = self.live_at(lo)
        a = int(np.searchsorted(self.lower_sorted, lo, "right"))
        b = int(np.searchsorted(self.lower_sorted, hi, "left"))
        starting = self.by_lower[a:b]
        out = np.concatenate((live, starting)) if len(starting) else live
        return out[out != i]


def lowest_fit(offs: np.ndarray, ends: np.ndarray, size: int, align: int, fit: str = "first",
               floor: int = 0) -> int:
    """Lowest (or tightest) aligned offset >= floor where [x, x+size) avoids all [offs, ends)."""
    if floor > 0:
        keep = ends > floor
        offs, ends = offs[keep], ends[keep]
    if not len(offs):
        return -(-floor // align) * align
    idx = np.argsort(offs, kind="stable")
    o = offs[idx]
    cm = np.maximum.accumulate(ends[idx])
    starts = np.empty(len(o) + 1, np.int64)
    starts[0] = floor
    np.maximum(cm, floor, out=starts[1:])
    if align > 1:
        starts = -(-starts // align) * align
    stops = np.empty(len(o) + 1, np.int64)
    stops[:-1] = o
    stops[-1] = INF
    ok = starts + size <= stops
    if fit == "best":
        gaps = np.where(ok, stops - starts, INF)
        return int(starts[int(np.argmin(gaps))])
    return int(starts[int(np.argmax(ok))])


def order_for(arr: Arrays, name: str, rng: np.random.Generator | None = None) -> np.ndarray:
    """Buffer indices in the named placement order (active buffers only)."""
    size, length, lower = arr.size, arr.length, arr.lower
    area = size * length
    idx = np.nonzero(arr.active)[0]
    if name == "size":
        keys = (-size[idx],)
    elif name == "size_long":
        keys = (lower[idx], -length[idx], -size[idx])
    elif name == "length":
        keys = (-size[idx], -length[idx])
    elif name == "area":
        keys = (-size[idx], -area[idx])
    elif name == "start":
        keys = (-size[idx], lower[idx])
    elif name == "end":
        keys = (-size[idx], lower[idx], -arr.upper[idx])
    elif name == "size_end":
        keys = (lower[idx], -arr.upper[idx], -size[idx])
    elif name == "long_lived":
        span = (arr.upper[idx].max() - lower[idx].min()) if len(idx) else 0
        long = length[idx] * 2 >= span
        # long-lived first (longest lowest), then the rest largest first
        keys = (lower[idx], -length[idx], -size[idx], np.where(long, -length[idx], 0), ~long)
    elif name == "random":
        rng = rng or np.random.default_rng()
        return idx[rng.permutation(len(idx))]
    elif name == "perturbed":
        # largest first with sizes jittered by up to ~3 %: a neighbour of "size"
        rng = rng or np.random.default_rng()
        noisy = size[idx] * (1.0 + 0.03 * rng.random(len(idx)))
        keys = (-noisy,)
    else:
        raise ValueError(f"unknown order {name!r}; use one of {ORDERS}")
    return idx[np.lexsort(keys)] if len(keys) > 1 else idx[np.argsort(keys[0], kind="stable")]


def place(arr: Arrays, order: Sequence[int], fit: str = "first", index: OverlapIndex | None = None,
          deadline: float | None = None, fixed: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray | None:
    """Place buffers in ``order``; returns offsets (inactive buffers get 0), None past deadline.

    ``fixed``: (offsets, mask) of buffers already placed; the others go around them.
    """
    index = index or OverlapIndex(arr)
    offsets = np.zeros(arr.n, np.int64)
    placed = np.zeros(arr.n, bool)
    if fixed is not None:
        placed[:] = fixed[1]
        offsets[placed] = fixed[0][placed]
    ends = np.where(placed, offsets + arr.size, 0)
    size, align = arr.size, arr.align
    for c, i in enumerate(order):
        i = int(i)
        if deadline is not None and c % 256 == 255 and time.perf_counter() > deadline:
            return None
        if placed[i]:
            continue
        cand = index.overlapping(i)
        cand = cand[placed[cand]]
        o = lowest_fit(offsets[cand], ends[cand], int(size[i]), int(align[i]), fit)
        offsets[i] = o
        ends[i] = o + size[i]
        placed[i] = True
    return offsets


def greedy(problem: Problem, order: str = "size", fit: str = "first",
           index: OverlapIndex | None = None, arr: Arrays | None = None) -> Solution:
    """One greedy placement with a named order."""
    arr = arr or Arrays(problem)
    offs = place(arr, order_for(arr, order), fit, index or OverlapIndex(arr))
    return arr.solution(offs, f"greedy-{order}-{fit}")


def greedy_by_size(problem: Problem) -> Solution:
    return greedy(problem, "size")


def greedy_by_lifetime(problem: Problem) -> Solution:
    return greedy(problem, "length")


def greedy_by_area(problem: Problem) -> Solution:
    return greedy(problem, "area")


def long_lived_first(problem: Problem) -> Solution:
    return greedy(problem, "long_lived")


def best_heuristic(problem: Problem, orders: Sequence[str] = ORDERS, fits: Sequence[str] = ("first", "best"),
                   time_limit: float | None = None, stop_at: int | None = None,
                   arr: Arrays | None = None, index: OverlapIndex | None = None) -> Solution:
    """Run every (order, fit) pair and keep the lowest height.

    Stops early when the height reaches ``stop_at`` (e.g. the lower bound) or the
    time limit passes (at least one placement always completes).
    """
    t0 = time.perf_counter()
    arr = arr or Arrays(problem)
    index = index or OverlapIndex(arr)
    best: Solution | None = None
    tried = []
    # The leading orders under every fit first (on big traces only a few passes fit in the time),
    # then the other orders.
    lead = orders[:LEAD_ORDERS]
    pairs = [(o, f) for f in fits for o in lead] + [(o, f) for o in orders[LEAD_ORDERS:] for f in fits]
    for order, fit in pairs:
        deadline = None if (best is None or time_limit is None) else t0 + time_limit
        offs = place(arr, order_for(arr, order), fit, index, deadline)
        if offs is None:
            break
        sol = arr.solution(offs, f"greedy-{order}-{fit}")
        tried.append((sol.method, sol.height))
        if best is None or sol.height < best.height:
            best = sol
        if stop_at is not None and best.height <= stop_at:
            break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
    assert best is not None
    best.stats["heuristics"] = tried
    return best
