"""The pair bound: of two unrelated ops with large cuts, one runs before the other (no TVM).

``cut`` (:mod:`roam_tvm.graph.bounds`) lets each op choose its own best set of ops to run before
it, so two ops can each ask to run after the other. :func:`pair_cut_bound` takes the ops with the
largest cuts (:func:`largest_cuts`, which solves the cuts a pruned profile only bounds) and, per
unrelated pair, the better of the two orders between them. Each of those ops is also paired
with its *partners* (:func:`prefix_partners`): the ops its own min cut runs before it without
having to, whatever their cut. An op's best prefix can pull in a weight-gradient matmul that
frees a saved activation, while that matmul, run there, holds its weight-sized output next to
every activation still saved (a GELU MLP: the matmul's own cut is small, so it is never among
the largest).
"""
from __future__ import annotations

import heapq
import time

import numpy as np

from .bounds import CutProfile, _cut_data, _CutData, forced_cut
from .model import Graph

__all__ = ["largest_cuts", "prefix_partners", "pair_cut_bound"]


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


def prefix_partners(g: Graph, j: int, limit: int, data: _CutData | None = None) -> list[int]:
    """The ops the min cut at ``j`` runs before ``j`` that are not its ancestors, the
    ``limit`` that allocate the most bytes first.

    Those are the ops ``cut_j`` chose to run early; where running one of them early costs
    more than ``cut_j`` at that op itself, no order has both, and the pair ``(j, k)`` shows it.
    """
    data = _cut_data(g) if data is None else data
    prefix: list[int] = []
    data.cut_at(j, prefix)
    anc = set(data.relatives([j])[0][j].tolist())
    alloc = set(g.allocated)
    made = {k: sum(g.tensors[t].size for t in g.ops[k].outputs if t in alloc)
            for k in set(prefix) - anc}
    return sorted(made, key=lambda k: (-made[k], k))[:limit]


def pair_cut_bound(g: Graph, profile: CutProfile, top: int = 8,
                   time_limit: float | None = None, partners: int = 8) -> int:
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
    partners : int
        Each of the ``top`` ops is also paired with up to this many of its
        :func:`prefix_partners` (0: none).

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
    if not ops:
        return best
    pairs = [(a, b) for i, a in enumerate(ops) for b in ops[i + 1:]]
    for a in ops if partners > 0 else ():
        if deadline is not None and time.perf_counter() > deadline:
            break  # one min cut per op: the pairs already listed still fit the time left
        pairs += [(a, k) for k in prefix_partners(g, a, partners, data) if k not in ops]
    anc, desc = data.relatives(sorted({x for p in pairs for x in p}))
    for a, b in pairs:
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
