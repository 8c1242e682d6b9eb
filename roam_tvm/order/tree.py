"""ROAM-style decomposition of an order into pieces of at most ``node_budget`` ops.

ROAM groups the cut points outward from the loss: a forward span is paired with
its mirrored backward span, giving nested shells around the loss, and the tail
(backward + optimizer) is chunked to the budget. Here every piece is a window
of *consecutive positions* of the current order (see
:mod:`roam_tvm.order.piece`): in a training step's order (forward, loss,
backward) the innermost window straddles the loss, so it pairs the last forward
ops with the first backward ops, and windows are then laid outward on both
sides of it. This keeps pieces independent (they can be solved in parallel and
recombined exactly); tensors crossing a window boundary are live at that
boundary (they are ``has_before`` / ``has_after`` / pass-through tensors of the
piece). Non-paired shells (a forward span with a *distant* backward span) are
not formed: moving an op across the loss is left to the heuristics (deferral of
source ops, update scheduling).

Segments between fixed-position ops are never merged, since no order can move
an op across a fixed one.
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["windows", "center_of"]


def center_of(profile: Sequence[int]) -> int:
    """Position to build windows around: the first position of the peak (the loss, typically)."""
    if not profile:
        return 0
    m = max(profile)
    return next(i for i, p in enumerate(profile) if p == m)


def windows(segs: Sequence[tuple[int, int]], node_budget: int = 100, center: int = 0,
            shift: int = 0) -> list[tuple[int, int]]:
    """Cut segments into windows of at most ``node_budget`` positions.

    Parameters
    ----------
    segs : sequence of (lo, hi)
        Free segments (see :func:`roam_tvm.order.segments.segments`).
    node_budget : int
        Maximum ops per window (ROAM's NL; default 100).
    center : int
        Position the windows are laid around (one window is centred on it when
        it falls inside a segment).
    shift : int
        Offset the window grid by this many positions (a second pass with
        ``node_budget // 2`` lets ops move across the first pass's boundaries).

    Returns
    -------
    list of (lo, hi)
        Sorted, disjoint windows covering every segment.
    """
    if node_budget < 2:
        raise ValueError("node_budget must be >= 2")
    out: list[tuple[int, int]] = []
    for lo, hi in segs:
        if hi - lo <= node_budget:
            out.append((lo, hi))
            continue
        c = min(max(center, lo), hi - 1)
        anchor = c - node_budget // 2 + shift
        # grid points anchor + k * budget, clipped to the segment
        k0 = -((anchor - lo) // node_budget) - 1
        cuts = []
        k = k0
        while True:
            p = anchor + k * node_budget
            if p >= hi:
                break
            if p > lo:
                cuts.append(p)
            k += 1
        bounds = [lo] + cuts + [hi]
        for a, b in zip(bounds, bounds[1:]):
            if b > a:
                out.append((a, b))
    return sorted(out)
