"""Lower bounds on the peak memory of a training step (no TVM).

All bounds assume perfect packing (no fragmentation), as ``Graph.peak`` does.

* :func:`order_bound` -- the peak of one given order (an upper bound on the optimum).
* :func:`any_bound` -- always-live bytes + the largest single op footprint.
* :func:`cut_bound` -- the least peak any topological order can reach, computed as
  ``max_j`` of a min-cut problem per op ``j``.

Tighter bounds built on the same cuts live beside it: :mod:`.pair_bound` (two ops with the largest
cuts cannot both run last) and :mod:`.set_bound` (of several unrelated ops, one runs first).

The min-cut per op
------------------
For op ``j`` let ``S`` be the set of ops run before ``j``: ``S`` is closed under
predecessors, contains every ancestor of ``j`` and no descendant of ``j``. The
bytes live while ``j`` runs, in any order that runs exactly ``S`` before ``j``, are

    always-live + workspace(j) + sum of sizes of allocated roots ``r`` that have a
    user in ``S + {j}`` and are still needed (used by ``j``, by an op outside
    ``S + {j}``, or returned).

Every order runs *some* such ``S`` before ``j``, so ``cut_j = min_S live(S, j)``
is a lower bound on that order's peak, and ``max_j cut_j`` bounds every order.

The minimum over ``S`` is a project-selection min cut: source side = ``S``;
for each root ``r`` with a designated first user ``p`` (its producer) an
auxiliary node ``a_r`` with an edge ``p -> a_r`` of capacity ``size(r)`` and
edges ``a_r -> u`` of infinite capacity to each other user ``u`` (and to the
sink when ``r`` is returned); closure edges ``v -> u`` of infinite capacity for
every dependency ``u -> v``. Ancestors of ``j`` are merged into the source,
``j`` and its descendants into the sink, so each problem only spans the ops
that are incomparable with ``j``.

If a root has several users none of which precedes all others (no producer),
one of them is taken as ``p``; that can only *under*-count, so the bound stays
valid.

Integer capacities
------------------
``scipy.sparse.csgraph.maximum_flow`` needs int32 capacities. Sizes are
divided by their GCD; if the finite capacities of one problem still sum to
more than ``2**29`` they are further divided by a coarser unit and rounded
*down*. A cut with rounded-down capacities is never larger than the true cut,
so the result is still a valid (slightly weaker) lower bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from .model import Graph

__all__ = ["order_bound", "any_bound", "cut_bound", "cut_profile", "CutProfile", "op_footprint",
           "forced_cut"]

_INF = np.int32(2**31 - 1)
_CAP_LIMIT = 2**29


def order_bound(g: Graph, order: Sequence[int] | None = None) -> int:
    """Peak of ``order`` (default: program order) with perfect packing."""
    return g.peak(order)


def op_footprint(g: Graph, j: int) -> int:
    """Bytes of distinct allocated roots an op reads or defines, plus its workspace."""
    alloc = _alloc_set(g)
    roots = {g.roots[t] for t in (*g.ops[j].inputs, *g.ops[j].outputs)}
    return sum(g.tensors[r].size for r in roots if r in alloc) + g.ops[j].workspace


def any_bound(g: Graph) -> int:
    """Always-live bytes plus the largest footprint of a single op.

    Parameters
    ----------
    g : Graph

    Returns
    -------
    int
        A lower bound on the peak of every order (loose, but O(size of graph)).
    """
    if not g.ops:
        return g.always_live_bytes
    return g.always_live_bytes + max(op_footprint(g, j) for j in range(len(g.ops)))


def _alloc_set(g: Graph) -> set[int]:
    s = g.__dict__.get("_roam_alloc_set")
    if s is None:
        s = set(g.allocated)
        g.__dict__["_roam_alloc_set"] = s
    return s


@dataclass
class CutProfile:
    """Result of :func:`cut_profile`.

    Attributes
    ----------
    bound : int
        ``always_live + max_j cut_j`` over the ops examined (the lower bound).
    argmax : int
        An op attaining the bound (-1 for an empty graph).
    upper : list of int
        Per-op upper bound on ``cut_j`` (live bytes at ``j`` in the best known order).
    cut : dict of int to int
        ``cut_j`` (always-live included) for each op that was actually solved.
    solved : int
        Number of min-cut problems solved.
    coarsened : int
        Number of problems whose capacities had to be rounded down.
    complete : bool
        False when a time limit stopped the search before every op that could
        raise the bound was solved (the bound is still valid, maybe weaker).
    """

    bound: int
    argmax: int
    upper: list[int]
    cut: dict[int, int] = field(default_factory=dict)
    solved: int = 0
    coarsened: int = 0
    complete: bool = True


class _CutData:
    """Arrays shared by all per-op cut problems of one graph."""

    def __init__(self, g: Graph):
        n = len(g.ops)
        self.n = n
        topo = g.topological_order()
        tpos = np.empty(n, dtype=np.int64)
        tpos[np.array(topo, dtype=np.int64)] = np.arange(n)
        # dependency edges u -> v
        us, vs = [], []
        for v, ps in enumerate(g.predecessors):
            for u in ps:
                us.append(u)
                vs.append(v)
        self.eu = np.array(us, dtype=np.int64)
        self.ev = np.array(vs, dtype=np.int64)
        ones = np.ones(len(us), dtype=np.int8)
        self.succ = csr_matrix((ones, (self.eu, self.ev)), shape=(n, n))
        self.pred = csr_matrix((ones, (self.ev, self.eu)), shape=(n, n))
        pinned = g.pinned_to_end
        roots, sizes, firsts, pins = [], [], [], []
        pr, pu = [], []
        for r, users in g.users.items():
            if not users or g.tensors[r].size == 0:
                continue
            k = len(roots)
            roots.append(r)
            sizes.append(g.tensors[r].size)
            p = g.producer.get(r)
            if p is None or p not in users:
                p = min(users, key=lambda u: tpos[u])
            firsts.append(p)
            pins.append(r in pinned)
            for u in users:
                pr.append(k)
                pu.append(u)
        self.roots = np.array(roots, dtype=np.int64)
        self.size = np.array(sizes, dtype=np.int64)
        self.first = np.array(firsts, dtype=np.int64)
        self.pinned = np.array(pins, dtype=bool)
        self.pr = np.array(pr, dtype=np.int64)
        self.pu = np.array(pu, dtype=np.int64)
        self.nr = len(roots)
        self.ws = np.array([op.workspace for op in g.ops], dtype=np.int64)
        self.gcd = int(np.gcd.reduce(self.size)) if self.nr else 1
        self.gcd = max(self.gcd, 1)

    def relatives(self, ops) -> tuple[dict, dict]:
        """``(ancestors, descendants)`` of each op in ``ops``: op -> array of ops, itself included."""
        anc = {j: breadth_first_order(self.pred, j, directed=True, return_predecessors=False) for j in ops}
        desc = {j: breadth_first_order(self.succ, j, directed=True, return_predecessors=False) for j in ops}
        return anc, desc

    def cut_at(self, j: int, prefix: list | None = None,
               fixed: np.ndarray | None = None) -> tuple[int, bool]:
        """``cut_j`` without always-live bytes; second value: capacities were coarsened.

        If ``prefix`` is a list, the ops of a minimising set S (those to run before
        ``j``: its ancestors and the free ops on the source side of the min cut) are
        appended to it.

        ``fixed`` (int8 per op: 0 = must run before ``j``, 2 = must run after,
        1 = free) narrows the choice of S; the 0-ops must be closed under
        predecessors and the 2-ops under successors. The value is then the least
        live bytes at ``j`` among orders that respect ``fixed`` (not a bound on
        every order).
        """
        n, nr = self.n, self.nr
        # 0 = before j (source), 1 = free, 2 = j or after (sink)
        state = np.ones(n, dtype=np.int8) if fixed is None else np.array(fixed, dtype=np.int8)
        anc = breadth_first_order(self.pred, j, directed=True, return_predecessors=False)
        desc = breadth_first_order(self.succ, j, directed=True, return_predecessors=False)
        state[anc] = 0
        state[desc] = 2  # includes j
        ust = state[self.pu]
        has_j = np.zeros(nr, dtype=bool)
        has_j[self.pr[self.pu == j]] = True
        has_sink = np.bincount(self.pr, weights=(ust == 2), minlength=nr) > 0
        has_free = np.bincount(self.pr, weights=(ust == 1), minlength=nr) > 0
        fst = state[self.first]
        need_after = has_sink | self.pinned
        const_mask = has_j | ((fst == 0) & need_after)
        const = int(self.size[const_mask].sum()) + int(self.ws[j])
        # variable roots: first user before j with a free user (and no forced need), or first user free
        var_src = (~const_mask) & (fst == 0) & has_free
        var_free = (~const_mask) & (fst == 1)
        var = var_src | var_free
        if not var.any():
            if prefix is not None:
                prefix.extend(int(v) for v in np.flatnonzero(state == 0))
            return const, False
        free_ops = np.flatnonzero(state == 1)
        node = np.full(n, -1, dtype=np.int64)
        node[free_ops] = np.arange(2, 2 + len(free_ops))
        vidx = np.flatnonzero(var)
        aux = np.full(nr, -1, dtype=np.int64)
        aux[vidx] = np.arange(2 + len(free_ops), 2 + len(free_ops) + len(vidx))
        n_nodes = 2 + len(free_ops) + len(vidx)
        caps = self.size[vidx] // self.gcd
        total = int(caps.sum())
        coarse = False
        if total > _CAP_LIMIT:
            unit = math.ceil(total / _CAP_LIMIT)
            caps = caps // unit
            coarse = True
        else:
            unit = 1
        src_list, dst_list, cap_list = [], [], []
        # producer -> aux (source if producer is before j)
        tails = np.where(fst[vidx] == 0, 0, node[self.first[vidx]])
        src_list.append(tails)
        dst_list.append(aux[vidx])
        cap_list.append(caps)
        # aux -> free users (except the first user itself)
        m = var[self.pr] & (ust == 1) & (self.pu != self.first[self.pr])
        src_list.append(aux[self.pr[m]])
        dst_list.append(node[self.pu[m]])
        cap_list.append(np.full(int(m.sum()), _INF, dtype=np.int64))
        # aux -> sink for free-first roots needed after j
        m2 = var_free & need_after
        src_list.append(aux[m2])
        dst_list.append(np.ones(int(m2.sum()), dtype=np.int64))
        cap_list.append(np.full(int(m2.sum()), _INF, dtype=np.int64))
        # closure: v in S => u in S, for free u, v
        me = (state[self.eu] == 1) & (state[self.ev] == 1)
        src_list.append(node[self.ev[me]])
        dst_list.append(node[self.eu[me]])
        cap_list.append(np.full(int(me.sum()), _INF, dtype=np.int64))
        s = np.concatenate(src_list)
        d = np.concatenate(dst_list)
        c = np.concatenate(cap_list)
        keep = c > 0
        s, d, c = s[keep], d[keep], c[keep]
        if len(c) == 0:
            if prefix is not None:
                prefix.extend(int(v) for v in np.flatnonzero(state == 0))
            return const, coarse
        # merge duplicates without overflowing: max of the infinite ones
        key = s * n_nodes + d
        order = np.argsort(key, kind="stable")
        key, s, d, c = key[order], s[order], d[order], c[order]
        uniq = np.ones(len(key), dtype=bool)
        uniq[1:] = key[1:] != key[:-1]
        if not uniq.all():
            grp = np.cumsum(uniq) - 1
            csum = np.minimum(np.bincount(grp, weights=c.astype(np.float64)), float(_INF))
            s, d, c = s[uniq], d[uniq], csum.astype(np.int64)
        mat = csr_matrix((c.astype(np.int32), (s, d)), shape=(n_nodes, n_nodes))
        res = maximum_flow(mat, 0, 1, method="dinic")
        if prefix is not None:
            # Source side of the min cut: reachable from the source in the residual graph.
            residual = (mat - res.flow).tocsr()
            residual.data[residual.data < 0] = 0
            residual.eliminate_zeros()
            reach = breadth_first_order(residual, 0, directed=True, return_predecessors=False)
            on_source = np.zeros(n_nodes, dtype=bool)
            on_source[reach] = True
            chosen = free_ops[on_source[2:2 + len(free_ops)]]
            prefix.extend(int(v) for v in np.concatenate([np.flatnonzero(state == 0), chosen]))
        return const + int(res.flow_value) * unit * self.gcd, coarse


def _cut_data(g: Graph) -> _CutData:
    d = g.__dict__.get("_roam_cut_data")
    if d is None:
        d = _CutData(g)
        g.__dict__["_roam_cut_data"] = d
    return d


def cut_profile(g: Graph, orders: Iterable[Sequence[int]] = (), *, full: bool = False,
                progress: bool = False, time_limit: float | None = None) -> CutProfile:
    """Per-op min-cut lower bounds, pruned by known orders.

    Parameters
    ----------
    g : Graph
    orders : iterable of orders
        Extra known valid orders; the live bytes at ``j`` in any order bound
        ``cut_j`` from above. Program order is always used.
    full : bool
        Solve every op (no pruning); ``cut`` then has an entry for each op.
    progress : bool
        Show a tqdm progress bar over the solved ops.
    time_limit : float, optional
        Stop solving min-cut problems after this many seconds. Ops are solved
        in decreasing order of their known live bytes, and every ``cut_j`` is
        a lower bound on its own, so a truncated profile still gives a valid
        (possibly weaker) bound; ``complete`` is then False.

    Returns
    -------
    CutProfile
    """
    import time

    t0 = time.perf_counter()
    n = len(g.ops)
    al = g.always_live_bytes
    if n == 0:
        return CutProfile(al, -1, [])
    upper = np.array(g.live_profile(), dtype=np.int64)
    for order in orders:
        prof = np.array(g.live_profile(order), dtype=np.int64)
        pos = np.empty(n, dtype=np.int64)
        pos[np.array(order, dtype=np.int64)] = np.arange(n)
        upper = np.minimum(upper, prof[pos])
    data = _cut_data(g)
    cand = np.argsort(-upper, kind="stable")
    best, arg = al, -1
    out = CutProfile(al, -1, [int(x) for x in upper])
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, desc="cut bound", unit="op", leave=False)
    for j in cand:
        j = int(j)
        if not full and upper[j] <= best:
            break
        if time_limit is not None and out.solved and time.perf_counter() - t0 > time_limit:
            out.complete = False
            break
        val, coarse = data.cut_at(j)
        val += al
        val = min(val, int(upper[j]))  # exact cut never exceeds a realised live value
        out.cut[j] = val
        out.solved += 1
        out.coarsened += int(coarse)
        if val > best or arg < 0:
            best, arg = max(best, val), j
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    out.bound, out.argmax = best, arg
    return out


def cut_bound(g: Graph, progress: bool = False, orders: Iterable[Sequence[int]] = (),
              time_limit: float | None = None) -> int:
    """The min-cut lower bound: no topological order has a smaller peak.

    Parameters
    ----------
    g : Graph
    progress : bool
        Show a progress bar.
    orders : iterable of orders
        Known valid orders used to prune (program order is always used).
    time_limit : float, optional
        Seconds; a truncated search still returns a valid (maybe weaker) bound.

    Returns
    -------
    int
        Bytes, always-live included.
    """
    return cut_profile(g, orders, progress=progress, time_limit=time_limit).bound


def forced_cut(g: Graph, j: int, before: Iterable[np.ndarray] = (), after: Iterable[np.ndarray] = ()) -> int:
    """Always-live bytes + the least live bytes at ``j`` over orders that run the ops of each
    array in ``before`` ahead of ``j`` and those of each array in ``after`` behind it.

    Each ``before`` array must be closed under predecessors and each ``after`` array under
    successors (an op's ancestors or descendants, itself included). A lower bound on the
    live bytes at ``j`` in every order that respects them (see :meth:`_CutData.cut_at`).
    """
    fixed = np.ones(len(g.ops), dtype=np.int8)
    for ids in before:
        fixed[ids] = 0
    for ids in after:
        fixed[ids] = 2
    return g.always_live_bytes + _cut_data(g).cut_at(j, None, fixed)[0]
