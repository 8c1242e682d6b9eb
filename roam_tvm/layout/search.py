"""Branch-and-bound over canonical placements, in the spirit of google/minimalloc.

Ideas (from the MiniMalloc paper, Moffitt 2023), re-implemented in plain Python:

* **Canonical solutions.** Any valid layout can be slid down until every buffer
  rests on 0 or on a time-overlapping buffer. Listing such a layout by offset,
  each buffer sits exactly at its *minimum offset* (the top of the highest placed
  buffer overlapping it). So the search places buffers in non-decreasing offset
  order, each at its minimum offset; ties are broken by a static preorder.
* **Section inference.** Time is cut into sections at lifespan endpoints. For a
  section, ``floor`` is the lowest offset still usable and ``total`` the unplaced
  bytes live there; ``max(floor, last offset) + total > capacity`` prunes.
  The floor also rises to the smallest minimum offset of any unplaced buffer
  in the section.
* **Dominance.** A buffer whose minimum offset is at or above the smallest
  ``minimum offset + size`` of the unplaced buffers would leave a gap that
  another buffer could fill first: skip it.
* **Decomposition.** Where no lifespan crosses a section boundary, the two sides
  are independent subproblems.
* **Restarts.** Several static preorders are run round-robin with a node limit
  that doubles each round.

The search answers a feasibility question ("fits in capacity C?"); the solver
drives C down from the heuristic height to the lower bound.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from . import native

PREORDERS = ("LAT", "TAL", "TLA", "TWA", "WTA", "TAW", "AWT", "SWT")


@dataclass
class SearchParams:
    """Knobs for :func:`search_fit` (all on by default).

    canonical_only: place buffers in non-decreasing offset order only.
    section_inference: prune when a section's floor plus unplaced bytes exceeds capacity.
    monotonic_floor: in that check, the floor is at least the last placed offset.
    unallocated_floor: raise a section's floor to its lowest unplaced minimum offset.
    check_dominance: skip placements that leave a gap another buffer would fill.
    decompose: split at time cuts that no lifespan crosses.
    suffix_check: energetic test per section: the buffers whose minimum offset
        is at least x need their total size above max(x, last offset).
    hatless: when the buffer just tried has no unplaced buffer beside it in
        time, its failure ends the node (any solution could place it first).
    memo: remember frontiers (unplaced buffers, their minimum offsets, the last
        offset) proved infeasible; a later path reaching the same frontier by
        a different arrangement below is cut at once. The key does not depend
        on the preorder (the tie rule enters as the set of buffers still allowed
        at the last offset), so refutations are shared by every preorder and
        restart (64-bit hashes: a collision could only hide a solution).
    preorders: static tie-break orders, each a string of keys applied in turn
        (T: peak total of its sections, W: number of sections, A: area,
        S: size, L: length of the lifespan), all descending; tried round-robin
        with a node limit starting at ``2 * n`` and doubling. The default
        leads with MiniMalloc's three (lifespan, area and section total in
        turn), then ours.
    native: run the compiled kernel (:mod:`.native`, same search, same rules;
        ``suffix_check`` is Python-only) when a C compiler is available.
    """

    canonical_only: bool = True
    section_inference: bool = True
    monotonic_floor: bool = True
    unallocated_floor: bool = True
    check_dominance: bool = True
    decompose: bool = True
    preorders: tuple[str, ...] = PREORDERS
    memo: bool = True
    suffix_check: bool = True
    hatless: bool = True
    native: bool = True


SUFFIX_CELLS = 1 << 15  # the energetic check is skipped where it would sort more cells than this


class _Timeout(Exception):
    pass


class _NodeLimit(Exception):
    pass


class _Sub:
    """Static data of one problem (buffers are local indices 0..m-1)."""

    def __init__(self, lower, upper, size, align, capacity):
        lower = np.asarray(lower, np.int64)
        upper = np.asarray(upper, np.int64)
        m = len(size)
        self.m = m
        self.size = np.asarray(size, np.int64)
        self.align = np.asarray(align, np.int64)
        self.capacity = int(capacity)
        pts = np.unique(np.concatenate((lower, upper)))
        self.sl = np.searchsorted(pts, lower)
        self.su = np.searchsorted(pts, upper)
        self.nsec = max(len(pts) - 1, 0)
        sec = np.arange(self.nsec)
        self.inc = (self.sl[:, None] <= sec[None, :]) & (sec[None, :] < self.su[:, None])
        self.ov = (lower[:, None] < upper[None, :]) & (lower[None, :] < upper[:, None])
        np.fill_diagonal(self.ov, False)
        self.total0 = (self.inc * self.size[:, None]).sum(0)
        self.length = upper - lower
        self.cuts0 = np.zeros(self.nsec + 1, np.int64)
        for a, b in zip(self.sl.tolist(), self.su.tolist()):
            if b - a > 1:
                self.cuts0[a + 1:b] += 1
        self.nbrs = [np.flatnonzero(self.ov[i]) for i in range(m)]
        cnt = self.inc.sum(0) if self.nsec else np.zeros(0, np.int64)
        width = max(int(cnt.max(initial=0)), 1)
        self.members = np.full((self.nsec, width), m, np.int64)
        for s in range(self.nsec):
            mem = np.flatnonzero(self.inc[:, s])
            self.members[s, :len(mem)] = mem
        self.key = list(zip(lower.tolist(), upper.tolist(), self.size.tolist(), self.align.tolist()))

    def twins(self, rank: np.ndarray) -> list[int]:
        """For each buffer, the previous identical buffer in rank order (-1 if none)."""
        prev: dict = {}
        out = [-1] * self.m
        for i in np.argsort(rank, kind="stable").tolist():
            k = self.key[i]
            out[i] = prev.get(k, -1)
            prev[k] = i
        return out

    def preorder(self, key: str, members: np.ndarray | None = None, total: np.ndarray | None = None) -> np.ndarray:
        """Rank of each buffer under a preorder key string (0 = first).

        With ``members`` and ``total`` (the unplaced bytes per section now): the
        ranks of just those buffers, T read from the current totals. A
        subproblem split off by a decomposition is re-sorted this way, as
        MiniMalloc does; on its hard instances the fresh order is what finds
        the packing.
        """
        idx = np.arange(self.m) if members is None else np.asarray(members)
        tot_now = self.total0 if total is None else total
        if self.nsec and len(idx):
            tot = np.where(self.inc[idx], tot_now[None, :], 0).max(1)
        else:
            tot = np.zeros(len(idx), np.int64)
        feats = {
            "T": tot,
            "W": (self.su - self.sl)[idx],
            "A": (self.size * self.length)[idx],
            "S": self.size[idx],
            "L": self.length[idx],
        }
        return preorder_rank(key, feats, len(idx))


def preorder_rank(key: str, feats: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Rank (0 = first) of ``n`` items sorted by ``feats[c]`` for each letter ``c`` of ``key`` in
    turn, all descending, ties in input order."""
    order = np.lexsort([np.arange(n)] + [-feats[c] for c in reversed(key)])
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    return rank


def _search(sub: _Sub, rank: np.ndarray, params: SearchParams, deadline: float, node_limit: int,
            counter: list[int], memo: set | None = None, key: str | None = None) -> np.ndarray | None:
    """Depth-first search for one static preorder; offsets or None (proved infeasible).

    All per-node work is O(neighbours + sections) numpy on small arrays: minimum
    offsets live in ``mo`` (placed buffers hold a huge sentinel so they drop out
    of every minimum), a section's floor is a gather over a padded member table.
    """
    m, cap, nsec = sub.m, sub.capacity, sub.nsec
    size, align, sl, su = sub.size, sub.align, sub.sl, sub.su
    sizel, sll, sul = size.tolist(), sl.tolist(), su.tolist()
    nbrs, members, twin = sub.nbrs, sub.members, sub.twins(rank)
    rank = rank.copy()  # subproblems re-rank their own buffers in place
    BIG = np.int64(1) << np.int64(60)
    mo = np.zeros(m + 1, np.int64)  # index m: padding, always BIG
    mo[m] = BIG
    placed = [False] * m
    off = np.full(m, -1, np.int64)
    total = sub.total0.copy()
    cuts = sub.cuts0.copy()  # cuts[b]: unplaced buffers crossing the boundary before section b
    best = np.zeros(m, np.int64)
    nodes = [0]
    if nsec and int(total.max()) > cap:
        return None
    if int((size).max(initial=0)) > cap:
        return None
    mono, infer, unfloor = params.monotonic_floor, params.section_inference, params.unallocated_floor
    canon, dom, decomp = params.canonical_only, params.check_dominance, params.decompose
    capv = np.int64(cap)
    suffix = params.suffix_check
    width = members.shape[1]
    rows = np.arange(max(nsec, 1))[:, None]
    unaligned = bool((align == 1).all())
    log2 = np.zeros(nsec + 2, np.int64)  # floor(log2(L)) for range lengths L >= 1
    for L in range(2, nsec + 2):
        log2[L] = log2[L >> 1] + 1
    hatless_on = params.hatless
    sizep = np.append(size, 0)

    def rec(part: np.ndarray, slo: int, shi: int, last_off: int, last_rank: int) -> bool:
        nodes[0] += 1
        if time.perf_counter() > deadline:
            raise _Timeout
        if nodes[0] > node_limit:
            raise _NodeLimit
        mp = mo[part]
        live = mp < BIG
        if not live.any():
            best[:] = np.where(off >= 0, off, best)
            return True
        part = part[live]
        mp = mp[live]
        if memo is not None:
            # preorder-free key: which buffers may still sit at last_off replaces last_rank
            tie = (mp == last_off) & (rank[part] > last_rank)
            key = hash((part.tobytes(), mp.tobytes(), slo, shi, last_off, tie.tobytes()))
            if key in memo:
                return False
        ok = _expand(part, mp, slo, shi, last_off, last_rank)
        if not ok and memo is not None:
            memo.add(key)
        return ok

    def _expand(part, mp, slo, shi, last_off, last_rank) -> bool:
        heights = mp + size[part]
        if int(heights.max()) > cap:
            return False
        min_height = int(heights.min())
        sel = mp < min_height if dom else np.ones(len(part), bool)
        cp, cm = part[sel], mp[sel]
        order = np.lexsort((rank[cp], cm))
        cp, cm = cp[order], cm[order]
        if canon:
            keep = (cm > last_off) | ((cm == last_off) & (rank[cp] > last_rank))
            cp, cm = cp[keep], cm[keep]
        if mono and infer and len(cp):
            # The monotonic test needs no state change, so it runs for every candidate
            # at once: after placing i at o, each section's unplaced bytes must fit
            # above o (i's own sections lose i's size). Range maxima: a sparse table.
            T = total[slo:shi]
            nT = len(T)
            ra, rb = sl[cp] - slo, su[cp] - slo
            kk = log2[rb - ra]
            table = np.zeros((int(kk.max()) + 1, nT), np.int64)
            table[0] = T
            for k in range(1, len(table)):
                h = 1 << (k - 1)
                np.maximum(table[k - 1, :nT - h], table[k - 1, h:], out=table[k, :nT - h])
            worst = np.maximum(table[kk, ra], table[kk, rb - (1 << kk)]) - size[cp]
            pre = np.maximum.accumulate(T)
            suf = np.maximum.accumulate(T[::-1])[::-1]
            np.maximum(worst, np.where(ra > 0, pre[ra - 1], 0), out=worst)
            np.maximum(worst, np.where(rb < nT, suf[np.minimum(rb, nT - 1)], 0), out=worst)
            keep = cm + worst <= cap
            cp, cm = cp[keep], cm[keep]
        for i, o in zip(cp.tolist(), cm.tolist()):
            tw = twin[i]
            if tw >= 0 and not placed[tw]:
                continue
            sz = sizel[i]
            top = o + sz
            a, b = sll[i], sul[i]
            placed[i] = True
            off[i] = o
            mo[i] = BIG
            total[a:b] -= sz
            nb = nbrs[i]
            old = mo[nb]
            ch = old < top
            if ch.any():
                nj = nb[ch]
                if unaligned:
                    mo[nj] = top
                else:
                    aj = align[nj]
                    mo[nj] = -(-top // aj) * aj
            else:
                nj = None
            if not infer:
                ok = True
            elif unfloor:
                # only sections whose floor or total changed need the floor test
                lo_a, hi_a = a, b
                if nj is not None:
                    lo_a = min(lo_a, int(sl[nj].min()))
                    hi_a = max(hi_a, int(su[nj].max()))
                lo_a, hi_a = max(lo_a, slo), min(hi_a, shi)
                f = mo[members[lo_a:hi_a]].min(1)
                np.minimum(f, capv, out=f)
                f += total[lo_a:hi_a]
                ok = not (f > capv).any()
                if ok and suffix and (hi_a - lo_a) * width <= SUFFIX_CELLS:
                    # energetic check: buffers whose minimum offset is at least x need
                    # their sizes' worth of room above x (x = each minimum offset)
                    memb = members[lo_a:hi_a]
                    g = mo[memb]
                    srt = np.argsort(-g, axis=1, kind="stable")
                    rix = rows[:hi_a - lo_a]
                    gs = g[rix, srt]
                    live_g = gs < BIG
                    cs = np.cumsum(np.where(live_g, sizep[memb[rix, srt]], 0), axis=1)
                    np.maximum(gs, o, out=gs)
                    gs += cs
                    ok = not ((gs > capv) & live_g).any()
            else:
                ok = True
            if ok:
                zeros = []
                if decomp and b - a > 1:
                    cuts[a + 1:b] -= 1
                    zeros = (np.flatnonzero(cuts[a + 1:b] == 0) + a + 1).tolist()
                if zeros:
                    bounds = [slo] + zeros + [shi]
                    rest = part[mo[part] < BIG]
                    rsl, rsu = sl[rest], su[rest]
                    for lo_s, hi_s in zip(bounds[:-1], bounds[1:]):
                        sp = rest[(rsl >= lo_s) & (rsu <= hi_s)]
                        if not len(sp):
                            continue
                        saved = rank[sp]
                        if key is not None:
                            rank[sp] = sub.preorder(key, sp, total)
                        try:
                            ok = rec(sp, lo_s, hi_s, 0, -1)
                        finally:
                            rank[sp] = saved
                        if not ok:
                            break
                    if ok:
                        best[:] = np.where(off >= 0, off, best)
                else:
                    ok = rec(part, slo, shi, o, int(rank[i]))
                if decomp and b - a > 1:
                    cuts[a + 1:b] += 1
            if nj is not None:
                mo[nb] = old
            total[a:b] += sz
            mo[i] = o
            off[i] = -1
            placed[i] = False
            if ok:
                return True
            if hatless_on and not (old < BIG).any():
                # nothing unplaced lives beside i: any solution could put i right here first
                return False
        return False

    old_lim = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_lim, 4 * m + 1000))
    try:
        found = rec(np.arange(m), 0, nsec, 0, -1)
    finally:
        counter[0] += nodes[0]
        sys.setrecursionlimit(old_lim)
    return best if found else None


def _native_runner(sub: _Sub, cache: dict | None, gi: int, use_memo: bool):
    """A drop-in for :func:`_search` that runs the compiled kernel on the same group."""
    key = ("native", gi)
    tables = cache.get(key) if cache is not None else None
    if tables is None:
        tables = native.Tables(sub)
        if cache is not None:
            cache[key] = tables
    memo = np.zeros(native.MEMO_SLOTS, np.uint64) if use_memo else None  # one per capacity, shared by preorders

    def run(sub, rank, params, deadline, node_limit, counter, _memo, key):
        left = deadline - time.perf_counter()
        if left <= 0:
            raise _Timeout
        twin = np.asarray(sub.twins(rank), np.int32)
        status, offs, nodes = native.search(sub, tables, rank, twin, sub.capacity, min(node_limit, 1 << 62), left,
                                            memo, key, params.suffix_check, params.unallocated_floor)
        counter[0] += nodes
        if status == native.NODE_LIMIT:
            raise _NodeLimit
        if status == native.TIME_LIMIT:
            raise _Timeout
        return offs if status == native.FOUND else None
    return run


def _partitions(lower: np.ndarray, upper: np.ndarray) -> list[np.ndarray]:
    """Groups of buffer indices whose lifespans chain together (time cuts between groups)."""
    order = np.argsort(lower, kind="stable")
    groups, cur, reach = [], [], None
    for i in order:
        i = int(i)
        if cur and lower[i] >= reach:
            groups.append(np.array(cur))
            cur = []
        if not cur:
            reach = upper[i]
        cur.append(i)
        reach = max(reach, upper[i])
    if cur:
        groups.append(np.array(cur))
    # input order inside a group: ties in the preorders fall back to it (file order, as in MiniMalloc)
    return [np.sort(g) for g in groups]


MAX_GROUP = 3000


def too_big(lower, upper, limit: int = MAX_GROUP) -> bool:
    """True if some time-connected group of buffers has more than ``limit`` members."""
    return max((len(g) for g in _partitions(np.asarray(lower), np.asarray(upper))), default=0) > limit


def search_fit(lower, upper, size, align, capacity: int, time_limit: float = 10.0,
               params: SearchParams | None = None, stats: dict | None = None,
               cache: dict | None = None, max_group: int = MAX_GROUP) -> np.ndarray | None:
    """Offsets fitting every buffer below ``capacity``, or None (infeasible or out of time).

    Inputs are arrays over *active* buffers (size > 0, upper > lower). ``cache``:
    a dict kept by the caller between calls on the *same* buffers (for other
    capacities); it holds the per-group tables, which are costly on big groups.
    ``max_group``: None, at once, if a time-connected group has more buffers
    (the tables are dense: groups x sections and groups x groups).
    """
    params = params or SearchParams()
    lower = np.asarray(lower, np.int64)
    upper = np.asarray(upper, np.int64)
    size = np.asarray(size, np.int64)
    align = np.asarray(align, np.int64)
    n = len(size)
    out = np.zeros(n, np.int64)
    deadline = time.perf_counter() + time_limit
    counter = [0]
    groups = _partitions(lower, upper) if params.decompose else [np.arange(n)]
    if too_big(lower, upper, max_group) if params.decompose else n > max_group:
        return None
    try:
        for gi, g in enumerate(groups):
            if time.perf_counter() > deadline:
                raise _Timeout
            if cache is not None and gi in cache:
                sub, ranks = cache[gi]
            else:
                sub = _Sub(lower[g], upper[g], size[g], align[g], capacity)
                ranks = [sub.preorder(k) for k in params.preorders] or [np.arange(sub.m)]
                if cache is not None:
                    cache[gi] = (sub, ranks)
            sub.capacity = int(capacity)
            limit = 2 * max(sub.m, 1)
            run = _search
            if params.native and native.available():
                run = _native_runner(sub, cache, gi, params.memo)
            shared = set() if params.memo else None  # refutations hold for every preorder
            memos = [shared for _ in ranks]
            sol = None
            while sol is None:
                for rank, memo, key in zip(ranks, memos, params.preorders or [None]):
                    try:
                        sol = run(sub, rank, params, deadline, limit if len(ranks) > 1 else 1 << 62, counter, memo,
                                  key)
                    except _NodeLimit:
                        continue
                    if sol is None:  # proved infeasible
                        if stats is not None:
                            stats["proved_infeasible"] = True
                        return None
                    break
                limit *= 2
            out[g] = sol
    except _Timeout:
        return None
    finally:
        if stats is not None:
            stats["nodes"] = stats.get("nodes", 0) + counter[0]
    return out
