"""The pair bound: of two unrelated ops with large cuts, one runs before the other (no TVM).

``cut`` (:mod:`roam_tvm.graph.bounds`) lets each op choose its own best set of ops to run before
it, so two ops can each ask to run after the other. :func:`pair_cut_bound` takes the ops with the
largest cuts (:func:`largest_cuts`, which solves the cuts a pruned profile only bounds) and, per
unrelated pair, the better of the two orders between them.
"""
from __future__ import annotations

import heapq
import time

import numpy as np

from .bounds import CutProfile, _cut_data, _CutData, forced_cut
from .model import Graph

__all__ = ["largest_cuts", "pair_cut_bound"]


def largest_cuts(g: Graph, profile: CutProfile, top: int, data: _CutData | None = None,
                 deadline: float | None = None) -> list[int]:
    """The ``top`` ops with the largest cuts, solving the cuts a pruned profile skipped.

    A pruned :func:`cut_profile` knows only an upper bound (the live bytes in an order) for
    most ops, and those bounds rank ops badly: an op can be live-heavy in every known order
    yet have a small cut. Ops are taken by their best known value; one known only by its
    upper bound is solved and put back, until the ``top`` largest are all exact (or
    ``deadline``, a ``time.perf_counter()`` value, passes: the best known then).
    """
    data = _cut_data(g) if data is None else data
    al = g.always_live_bytes
    exact = dict(profile.cut)
    heap = [(-exact.get(j, u), j) for j, u in enumerate(profile.upper)]
    heapq.heapify(heap)
    out: list[int] = []
    while heap and len(out) < top:
        neg, j = heapq.heappop(heap)
        if j in exact or (deadline is not None and time.perf_counter() > deadline):
            out.append(j)
            continue
        val, _coarse = data.cut_at(j)
        exact[j] = min(val + al, -neg)
        heapq.heappush(heap, (-exact[j], j))
    return out


def pair_cut_bound(g: Graph, profile: CutProfile, top: int = 8,
                   time_limit: float | None = None) -> int:
    """A lower bound at least ``profile.bound``, from pairs of ops with the largest cuts.

    ``cut_j`` lets each op choose its own best set of predecessors, so two ops
    can each ask to run after the other (two weight-gradient sums that each
    want the other's operands already consumed). For two incomparable ops
    ``a`` and ``b`` every order runs ``a`` before ``b`` or ``b`` before ``a``;
    with ``a`` first, the live bytes at ``a`` are at least the cut at ``a``
    with ``b`` and its descendants forced after it, and those at ``b`` at least
    the cut at ``b`` with ``a`` and its ancestors forced before it. The least,
    over the two cases, of the larger of the two is a lower bound on the peak
    of every order.

    Parameters
    ----------
    g : Graph
    profile : CutProfile
        From :func:`cut_profile`; the ``top`` ops with the largest cuts are paired
        (:func:`largest_cuts` solves the cuts a pruned profile skipped).
    top : int
        Ops paired (``top * (top - 1) / 2`` pairs, four min cuts each).
    time_limit : float, optional
        Seconds; pairs not reached are skipped (the result stays valid).

    Returns
    -------
    int
        Bytes, always-live included.
    """
    t0 = time.perf_counter()
    best = profile.bound
    data = _cut_data(g)
    deadline = None if time_limit is None else t0 + 0.5 * time_limit
    ops = largest_cuts(g, profile, top, data, deadline)
    if len(ops) < 2:
        return best
    anc, desc = data.relatives(ops)
    for i, a in enumerate(ops):
        for b in ops[i + 1:]:
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                return best
            if np.isin(b, desc[a]) or np.isin(a, desc[b]):
                continue  # comparable: the plain cuts already bound both
            a_first = max(forced_cut(g, a, after=[desc[b]]), forced_cut(g, b, before=[anc[a]]))
            if a_first <= best:
                continue
            b_first = max(forced_cut(g, b, after=[desc[a]]), forced_cut(g, a, before=[anc[b]]))
            best = max(best, min(a_first, b_first))
    return best
