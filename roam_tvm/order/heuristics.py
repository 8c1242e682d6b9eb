"""Fast ordering heuristics (no solver).

Every function returns a valid topological order of ``g.ops`` (a list of op
ids). :func:`best_heuristic` runs them all and keeps the one with the least
``g.peak``.

* :func:`program_order` -- the order the ops came in.
* :func:`deferred_program_order` -- program order, but *source ops* (ops with no
  dependencies whose inputs are all always-live, e.g. weight transposes or zero
  fills) are moved to just before their first reader.
* :func:`list_schedule` -- memory-aware list scheduling: at each step run the
  ready op that frees the most bytes net of what it allocates
  (``key="freed"``), or the one whose momentary footprint is least
  (``key="peak"``, least-peak-first). With ``defer=True`` (the fix from
  headroom.md) source ops are never picked on their own; they are emitted just
  before the first op that reads them, and that op's score includes them.
* :func:`dfs_order` -- DFS post-order from the graph's sinks (each op runs right
  after its inputs are computed, like a recursive evaluator).
"""
from __future__ import annotations

import heapq
from typing import Callable, Sequence

from ..graph.model import Graph

__all__ = ["program_order", "deferred_program_order", "list_schedule", "dfs_order",
           "best_heuristic", "heuristic_orders", "source_ops", "HEURISTICS"]


def program_order(g: Graph) -> list[int]:
    """Program order (``0..n-1``)."""
    return list(range(len(g.ops)))


def source_ops(g: Graph) -> list[bool]:
    """Per op: no dependencies, only always-live inputs, at least one dependent, not an update."""
    alloc = set(g.allocated)
    preds, succ = g.predecessors, g.successors
    out = []
    for op in g.ops:
        ok = (not preds[op.id] and bool(succ[op.id]) and op.kind != "update"
              and all(g.roots[t] not in alloc for t in op.inputs))
        out.append(ok)
    return out


def deferred_program_order(g: Graph, base: Sequence[int] | None = None) -> list[int]:
    """``base`` (default program order) with source ops moved just before their first reader."""
    base = list(range(len(g.ops))) if base is None else list(base)
    src = source_ops(g)
    preds = g.predecessors
    done = [False] * len(g.ops)
    out: list[int] = []
    for v in base:
        if src[v]:
            continue
        for u in preds[v]:
            if src[u] and not done[u]:
                done[u] = True
                out.append(u)
        done[v] = True
        out.append(v)
    return out


class _Sched:
    """Incremental liveness state for list scheduling."""

    def __init__(self, g: Graph):
        alloc = {r: k for k, r in enumerate(g.allocated)}
        self.size = [g.tensors[r].size for r in g.allocated]
        pinned = g.pinned_to_end
        self.pinned = [r in pinned for r in g.allocated]
        self.op_roots: list[list[int]] = []
        for op in g.ops:
            rs = {alloc[g.roots[t]] for t in (*op.inputs, *op.outputs) if g.roots[t] in alloc}
            self.op_roots.append(sorted(rs))
        self.users: list[list[int]] = [[] for _ in self.size]
        for o, rs in enumerate(self.op_roots):
            for k in rs:
                self.users[k].append(o)
        self.remaining = [len(u) for u in self.users]
        self.live = [False] * len(self.size)
        self.ws = [op.workspace for op in g.ops]
        self.cur = 0

    def group_score(self, group: Sequence[int]) -> tuple[int, int]:
        """(net bytes change, momentary peak above current) of running ``group`` in sequence."""
        rem: dict[int, int] = {}
        live: dict[int, bool] = {}
        cur = 0
        peak = 0
        for o in group:
            freed = 0
            for k in self.op_roots[o]:
                if not live.get(k, self.live[k]):
                    live[k] = True
                    cur += self.size[k]
                r = rem.get(k, self.remaining[k]) - 1
                rem[k] = r
                if r == 0 and not self.pinned[k]:
                    freed += self.size[k]
            peak = max(peak, cur + self.ws[o])
            cur -= freed
        return cur, peak

    def run(self, o: int) -> list[int]:
        """Schedule ``o``; return the roots whose state changed."""
        for k in self.op_roots[o]:
            if not self.live[k]:
                self.live[k] = True
                self.cur += self.size[k]
            self.remaining[k] -= 1
            if self.remaining[k] == 0 and not self.pinned[k]:
                self.cur -= self.size[k]
        return self.op_roots[o]


def list_schedule(g: Graph, key: str = "freed", defer: bool = True, tie: str = "program") -> list[int]:
    """Memory-aware list scheduling.

    Parameters
    ----------
    g : Graph
    key : {"freed", "peak"}
        ``"freed"``: run the ready op (with its deferred source ops) whose net
        change of live bytes is least; ``"peak"``: the one whose momentary
        footprint is least, then by net change.
    defer : bool
        Emit source ops only just before their first reader (headroom.md fix).
    tie : {"program", "late"}
        Tie-break by smallest program index, or by largest.

    Returns
    -------
    list of int
        A valid order.
    """
    if key not in ("freed", "peak"):
        raise ValueError(f"unknown key {key!r}")
    n = len(g.ops)
    preds, succ = g.predecessors, g.successors
    src = source_ops(g) if defer else [False] * n
    st = _Sched(g)
    # readiness counts only non-source predecessors
    cnt = [sum(1 for u in preds[v] if not src[u]) for v in range(n)]
    done = [False] * n
    version = [0] * n
    in_ready = [False] * n
    heap: list[tuple] = []
    sign = 1 if tie == "program" else -1

    def group_of(v: int) -> list[int]:
        return [u for u in preds[v] if src[u] and not done[u]] + [v]

    def push(v: int) -> None:
        version[v] += 1
        delta, pk = st.group_score(group_of(v))
        k = (delta, pk) if key == "freed" else (st.cur + pk, delta)
        heapq.heappush(heap, (k, sign * v, version[v], v))

    for v in range(n):
        if not src[v] and cnt[v] == 0:
            in_ready[v] = True
            push(v)
    order: list[int] = []
    while heap:
        _, _, ver, v = heapq.heappop(heap)
        if done[v] or ver != version[v]:
            continue
        touched: set[int] = set()
        for u in group_of(v):
            done[u] = True
            order.append(u)
            touched.update(st.run(u))
            for w in succ[u]:
                if src[u]:
                    continue
                cnt[w] -= 1
                if cnt[w] == 0 and not src[w]:
                    in_ready[w] = True
                    touched.add(-1 - w)  # marker: newly ready
        dirty = set()
        for k in touched:
            if k < 0:
                dirty.add(-1 - k)
                continue
            for w in st.users[k]:
                if in_ready[w] and not done[w]:
                    dirty.add(w)
                elif src[w] and not done[w]:
                    for x in succ[w]:
                        if in_ready[x] and not done[x]:
                            dirty.add(x)
        for w in dirty:
            push(w)
    # source ops nobody reads through a ready path (cannot happen for valid graphs)
    if len(order) != n:
        rest = [v for v in range(n) if not done[v]]
        order.extend(rest)
    return order


def dfs_order(g: Graph, reverse: bool = False) -> list[int]:
    """DFS post-order over predecessors, starting from sinks in program order.

    Parameters
    ----------
    g : Graph
    reverse : bool
        Visit predecessors (and sinks) in reverse program order.
    """
    n = len(g.ops)
    preds, succ = g.predecessors, g.successors
    sinks = [v for v in range(n) if not succ[v]]
    if reverse:
        sinks.reverse()
    seen = [False] * n
    order: list[int] = []
    for s in sinks:
        if seen[s]:
            continue
        seen[s] = True
        stack = [(s, iter(reversed(preds[s]) if reverse else preds[s]))]
        while stack:
            v, it = stack[-1]
            nxt = None
            for u in it:
                if not seen[u]:
                    nxt = u
                    break
            if nxt is None:
                stack.pop()
                order.append(v)
            else:
                seen[nxt] = True
                stack.append((nxt, iter(reversed(preds[nxt]) if reverse else preds[nxt])))
    return order


HEURISTICS: dict[str, Callable[[Graph], list[int]]] = {
    "program": program_order,
    "program_deferred": deferred_program_order,
    "greedy": lambda g: list_schedule(g, "freed", defer=False),
    "greedy_deferred": lambda g: list_schedule(g, "freed", defer=True),
    "greedy_deferred_late": lambda g: list_schedule(g, "freed", defer=True, tie="late"),
    "least_peak": lambda g: list_schedule(g, "peak", defer=True),
    "dfs": dfs_order,
    "dfs_reverse": lambda g: dfs_order(g, reverse=True),
}


def heuristic_orders(g: Graph, names: Sequence[str] | None = None) -> dict[str, list[int]]:
    """The order of each heuristic in ``names`` (default: all), by name."""
    names = list(HEURISTICS) if names is None else list(names)
    return {name: HEURISTICS[name](g) for name in names}


def best_heuristic(g: Graph, names: Sequence[str] | None = None,
                   extra: dict[str, list[int]] | None = None) -> tuple[list[int], int, dict[str, int]]:
    """Run heuristics and keep the order with the least peak.

    Parameters
    ----------
    g : Graph
    names : sequence of str, optional
        Keys of :data:`HEURISTICS` (default: all).
    extra : dict, optional
        More named candidate orders to compare (must be valid).

    Returns
    -------
    order : list of int
    peak : int
    peaks : dict of str to int
        Peak of every candidate, by name.
    """
    cands = heuristic_orders(g, names)
    cands.update(extra or {})
    peaks = {name: g.peak(o) for name, o in cands.items()}
    best = min(peaks, key=lambda k: (peaks[k], k != "program"))
    return cands[best], peaks[best], peaks
