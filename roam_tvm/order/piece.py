"""A piece: a window of consecutive positions of a valid order, as plain data.

Reordering the ops of a window ``order[lo:hi]`` among themselves (respecting
their dependencies) keeps the whole order valid and leaves the live bytes
outside the window unchanged. Inside the window the live bytes depend only on
the window's order and on four classes of tensors:

* created and freed inside (all users in the window);
* created inside, needed after (``has_after``: a later user, or returned);
* created before, freed inside (``has_before``);
* passing through (created before, needed after) -- constant, forced live at
  both boundaries, folded into ``const`` when the window does not touch them.

Windows that do not overlap are therefore independent and can be solved in
parallel; the peak of the combined order is the max of the window peaks and of
the untouched positions.

A :class:`Piece` is small, picklable and free of the graph, so it can be sent to
a worker process and hashed (see :mod:`roam_tvm.order.repeat`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..graph.model import Graph

__all__ = ["Piece", "make_piece", "piece_peak", "local_windows", "LivenessIndex"]


@dataclass
class Piece:
    """One window of an order, as plain data.

    Attributes
    ----------
    ops : list of int
        Global op ids in their current order.
    lo : int
        Position of ``ops[0]`` in the full order.
    preds : list of list of int
        Local predecessors (indices into ``ops``).
    ws : list of int
        Workspace of each op.
    tensors : list of (size, users, has_before, has_after)
        Allocated roots the window touches: ``users`` are local op indices.
    const : int
        Bytes live during the whole window and not touched by it (always-live
        included).
    labels : list of str
        ``kind:name`` of each op (used by the structural hash only).
    """

    ops: list[int]
    lo: int
    preds: list[list[int]]
    ws: list[int]
    tensors: list[tuple[int, tuple[int, ...], bool, bool]]
    const: int
    labels: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.ops)


class LivenessIndex:
    """Positions and lifetimes of one order, to cut many pieces from it quickly."""

    def __init__(self, g: Graph, order: Sequence[int]):
        self.g = g
        self.order = list(order)
        n = len(order)
        self.pos = [0] * n
        for i, o in enumerate(order):
            self.pos[o] = i
        self.alloc = {r: k for k, r in enumerate(g.allocated)}
        self.life = g.lifetimes(order)
        # live bytes of roots spanning each position (prefix sums over starts/ends)
        delta = [0] * (n + 2)
        for r, (a, b) in self.life.items():
            delta[a] += g.tensors[r].size
            delta[b + 1] -= g.tensors[r].size
        self.live = []
        cur = 0
        for i in range(n):
            cur += delta[i]
            self.live.append(cur)
        self.profile = [self.live[i] + g.always_live_bytes + g.ops[order[i]].workspace for i in range(n)]


def make_piece(idx: LivenessIndex, lo: int, hi: int) -> Piece:
    """The piece for positions ``[lo, hi)`` of ``idx.order``."""
    g = idx.g
    ops = idx.order[lo:hi]
    local = {o: i for i, o in enumerate(ops)}
    preds = [[local[u] for u in g.predecessors[o] if u in local] for o in ops]
    touched: dict[int, None] = {}
    for o in ops:
        for t in (*g.ops[o].inputs, *g.ops[o].outputs):
            r = g.roots[t]
            if r in idx.alloc and g.tensors[r].size > 0:
                touched.setdefault(r, None)
    tensors = []
    pinned = g.pinned_to_end
    for r in touched:
        us = g.users[r]
        loc = tuple(sorted({local[u] for u in us if u in local}))
        before = any(idx.pos[u] < lo for u in us)
        after = r in pinned or any(idx.pos[u] >= hi for u in us)
        tensors.append((g.tensors[r].size, loc, before, after))
    # const = bytes live at every position of the window that the window does not touch
    spanning = 0
    for r, (a, b) in idx.life.items():
        if a < lo and b >= hi - 1 and r not in touched:
            spanning += g.tensors[r].size
    labels = [f"{g.ops[o].kind}:{g.ops[o].name}" for o in ops]
    return Piece(ops, lo, preds, [g.ops[o].workspace for o in ops], tensors,
                 spanning + g.always_live_bytes, labels)


def local_windows(piece: Piece) -> tuple[list[int], list[int]]:
    """Earliest and latest local position of each op over all orders of the piece."""
    m = piece.size
    anc = [0] * m
    for v in range(m):  # current order is topological
        b = 0
        for u in piece.preds[v]:
            b |= anc[u] | (1 << u)
        anc[v] = b
    succ: list[list[int]] = [[] for _ in range(m)]
    for v, ps in enumerate(piece.preds):
        for u in ps:
            succ[u].append(v)
    desc = [0] * m
    for v in reversed(range(m)):
        b = 0
        for w in succ[v]:
            b |= desc[w] | (1 << w)
        desc[v] = b
    return [a.bit_count() for a in anc], [m - 1 - d.bit_count() for d in desc]


def piece_peak(piece: Piece, local_order: Sequence[int] | None = None) -> int:
    """Peak bytes inside the window when its ops run in ``local_order`` (default: as given)."""
    m = piece.size
    local_order = list(range(m)) if local_order is None else list(local_order)
    pos = [0] * m
    for i, o in enumerate(local_order):
        pos[o] = i
    delta = [0] * (m + 1)
    for size, users, before, after in piece.tensors:
        ps = [pos[u] for u in users]
        a = 0 if before else min(ps)
        b = m - 1 if after else max(ps)
        delta[a] += size
        delta[b + 1] -= size
    cur, best = piece.const, 0
    for i, o in enumerate(local_order):
        cur += delta[i]
        best = max(best, cur + piece.ws[o])
    return best if m else piece.const
