"""An improvement stage for layouts too big for the branch-and-bound.

On the big real traces (tens of thousands of buffers, one time-connected group)
the plain greedy orders stop 0.4-3 % above the lower bound, and the buffer that
sets the height is nearly always a *small, long-lived* one: placed last by a
size order, it needs one offset that is free over thousands of time steps, and
the only such offset is on top of everything. Stacking those buffers first, at
the bottom, longest lowest, costs almost nothing (they are small) and lets the
big buffers pack above them. Which buffers count as "small and long-lived" is
trace dependent (on S_1 it takes the ratio from 1.029 to 1.0025, on pangu the
same thresholds make it worse), so :func:`improve` is an iterated greedy over
that family of orders:

* ``base``: the order of the other buffers (largest first, ties by input order
  or by longest lifespan);
* ``min_len``: the lifespan, as a fraction of the whole span, from which a
  buffer is long-lived;
* ``max_size``: the size, as a fraction of the lower bound, up to which it is
  small.

It first tries a fixed list of settings that worked across the traces, then
random settings and jitters of the best one so far, until the deadline. Every
pass is a plain greedy placement, exact by construction; the caller validates.
Numpy only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import native
from .heuristics import Arrays, OverlapIndex, order_for, place
from .search import preorder_rank

BASES = ("size", "size_long")


@dataclass(frozen=True)
class Setting:
    """One member of the order family (see the module docstring)."""

    base: str
    min_len: float
    max_size: float
    fit: str = "first"

    @property
    def name(self) -> str:
        return f"small-long-first({self.base},{self.min_len:.3g},{self.max_size:.3g},{self.fit})"


# Tried first, in this order: good settings on the idealloc traces, then a spread.
SEEDS = (
    Setting("size_long", 0.05, 0.01),
    Setting("size", 0.01, 0.01),
    Setting("size_long", 0.05, 0.003),
    Setting("size", 0.1, 0.01),
    Setting("size_long", 0.2, 0.001),
    Setting("size", 0.2, 1e-4),
    Setting("size_long", 0.01, 0.02),
)


def small_long_first(arr: Arrays, setting: Setting, lb: int, base: np.ndarray | None = None) -> np.ndarray:
    """Placement order: small long-lived buffers (longest first), then the rest in ``base`` order.

    Parameters
    ----------
    arr : Arrays
        The problem.
    setting : Setting
        The thresholds and the base order.
    lb : int
        The lower bound; ``max_size`` is a fraction of it.
    base : np.ndarray, optional
        The base order if already computed (``order_for(arr, setting.base)``).

    Returns
    -------
    np.ndarray
        Active buffer indices in placement order.
    """
    base = order_for(arr, setting.base) if base is None else base
    act = arr.active
    if not act.any():
        return base
    span = int(arr.upper[act].max() - arr.lower[act].min())
    small_long = act & (arr.length >= setting.min_len * span) & (arr.size <= setting.max_size * lb)
    first = np.nonzero(small_long)[0]
    # Longest lowest: the longer a buffer lives, the more it needs an offset no one else wants.
    first = first[np.lexsort((arr.lower[first], -arr.length[first]))]
    return np.concatenate((first, base[~small_long[base]]))


def _jitter(rng: np.random.Generator, s: Setting) -> Setting:
    """A neighbour of ``s``: thresholds scaled by up to ~2x either way, sometimes the other base."""
    base = s.base if rng.random() < 0.8 else BASES[1 - BASES.index(s.base)]
    return Setting(base, float(min(1.0, s.min_len * 2.0 ** rng.normal(0, 0.7))),
                   float(min(1.0, s.max_size * 2.0 ** rng.normal(0, 0.7))), s.fit)


def _random(rng: np.random.Generator) -> Setting:
    return Setting(BASES[int(rng.integers(2))], float(10.0 ** rng.uniform(-2.5, -0.3)),
                   float(10.0 ** rng.uniform(-4.5, -1.3)), "first" if rng.random() < 0.85 else "best")


def improve(arr: Arrays, index: OverlapIndex, lb: int, deadline: float, height: int | None = None,
            goal: int | None = None, seed: int = 0, stats: dict | None = None,
            ) -> tuple[np.ndarray, str] | None:
    """Iterated greedy over the small-long-lived-first orders until ``deadline``.

    Parameters
    ----------
    arr, index : Arrays, OverlapIndex
        The problem as arrays and its lifespan index.
    lb : int
        The lower bound (peak of live bytes).
    deadline : float
        ``time.perf_counter()`` value; a pass that would not finish by then is
        not started (its length is estimated from the passes so far) and a pass
        that runs over is abandoned.
    height : int, optional
        The height to beat (the best layout the caller has); default: beat nothing.
    goal : int, optional
        Stop as soon as the height is at most this (default ``lb``).
    seed : int
        Random seed for the settings after the fixed list.
    stats : dict, optional
        Filled with ``passes`` and ``tried`` (setting name, height) pairs.

    Returns
    -------
    tuple of (np.ndarray, str) or None
        The best offsets found and their method name, or None if no pass beat
        ``height``.
    """
    goal = lb if goal is None else goal
    rng = np.random.default_rng(seed)
    bases = {b: order_for(arr, b) for b in BASES}
    best: tuple[np.ndarray, str] | None = None
    best_h = height if height is not None else None
    best_s: Setting | None = None
    own_h = 0
    tried: list[tuple[str, int]] = []
    seen: set[Setting] = set()
    t_start = time.perf_counter()
    k = 0
    while best_h is None or best_h > goal:
        now = time.perf_counter()
        if now >= deadline or (k and now + 1.2 * (now - t_start) / k > deadline):
            break
        if k < len(SEEDS):
            s = SEEDS[k]
        elif best_s is not None and rng.random() < 0.6:
            s = _jitter(rng, best_s)  # exploit: the best setting's neighbourhood
        else:
            s = _random(rng)
        k += 1
        order = small_long_first(arr, s, lb, bases[s.base])
        key = Setting(s.base, round(s.min_len, 4), round(s.max_size, 6), s.fit)
        if key in seen:
            continue
        seen.add(key)
        offs = place(arr, order, s.fit, index, deadline)
        if offs is None:
            break
        h = int((offs + arr.size)[arr.active].max()) if arr.active.any() else 0
        tried.append((s.name, h))
        if best_s is None or h < own_h:
            best_s, own_h = s, h  # jitter around our best even while the caller's layout is better
        if best_h is None or h < best_h:
            best, best_h = (offs, s.name), h
    if stats is not None:
        stats.update(passes=len(tried), tried=tried)
    return best


# Tie-break keys for the skyline passes (all descending): size then length, area.
SKYLINE_KEYS = ("SL", "A")


def skyline_passes(arr: Arrays, deadline: float, height: int | None = None, goal: int = 0,
                   keys: tuple[str, ...] = SKYLINE_KEYS, stats: dict | None = None) -> tuple[np.ndarray, str] | None:
    """Bottom-up skyline placements (compiled kernel), one per tie-break key.

    The opposite of a size order: it always fills the lowest point of the
    skyline next, which on long traces with many mid-sized buffers (Y_1) leaves
    fewer holes than any largest-first order. Needs the compiled kernel
    (:func:`native.available`); returns None without it.

    Parameters
    ----------
    arr : Arrays
        The problem.
    deadline : float
        ``time.perf_counter()`` value; a pass past it is abandoned.
    height : int, optional
        The height to beat.
    goal : int
        Stop once a pass reaches this height.
    keys : tuple of str
        Tie-break keys: S size, L lifespan length, A area, each descending.
    stats : dict, optional
        Filled with ``tried`` (name, height) pairs.

    Returns
    -------
    tuple of (np.ndarray, str) or None
        The best offsets (all buffers) and the method name, or None if no pass beat ``height``.
    """
    if not native.available() or not arr.active.any():
        return None
    act = np.nonzero(arr.active)[0]
    lo, up, sz = arr.lower[act], arr.upper[act], arr.size[act]
    feats = {"S": sz, "L": up - lo, "A": sz * (up - lo)}
    best, best_h, tried = None, height, []
    for key in keys:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        offs = native.skyline(lo, up, sz, arr.align[act], preorder_rank(key, feats, len(act)), left)
        if offs is None:
            break
        full = np.zeros(arr.n, np.int64)
        full[act] = offs
        h = int((offs + sz).max())
        tried.append((f"skyline-{key}", h))
        if best_h is None or h < best_h:
            best, best_h = (full, f"skyline-{key}"), h
        if h <= goal:
            break
    if stats is not None:
        stats["tried"] = tried
    return best
