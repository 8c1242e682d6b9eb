"""A lower bound on recomputation overhead that holds for every order and every plan (no TVM).

:mod:`roam_tvm.remat.lp_bound` bounds plans made of the planner's own moves
in roam's order. This one bounds any plan at all, whatever it reorders.

Argument
--------
Take any op ``o`` and look at the moment it first runs. Every op that must
precede it (its ancestors ``A(o)``: data and write-after-read edges) has run
at least once; none that must follow it (its descendants ``D(o)``) has.
So an allocated root ``r`` made by an op in ``A(o)`` and read by an op in
``D(o)`` (or returned by the step) is, at that moment, either live or will
be made again later. The
roots ``o`` reads and writes are live, as are the always-live bytes and
``o``'s workspace (less what ``o`` may write into its inputs in place). With
``fixed(o)`` those bytes and ``C(o)`` the crossing roots, a plan whose peak is
``<= B`` makes again crossing roots of at least ``fixed(o) + |C(o)| - B`` bytes.
Making a root again costs:

* ``same_kernels``: at least one run of its producer, the rule recomputation
  follows here (the same kernels on the same inputs). The least cost of
  freeing ``E`` bytes is then a fractional knapsack over the producers of
  ``C(o)``, cheapest per byte first. A producer's *private* inputs (roots
  read by that producer alone, such as the batch-norm output a ReLU reads,
  dead at ``o``) must then exist again too: either held across ``o`` (the
  producer frees only its bytes beyond theirs) or made again by their own
  producers (their cost added). Per producer, the least cost of freeing
  ``F`` of its ``b`` crossing bytes is convex in ``F`` (regenerate the
  private inputs cheapest per byte first; run the producer a fraction of a
  time): its segments are the knapsack's items, so the greedy knapsack is
  that LP's exact optimum;
* ``any_kernel``: at least the bytes written, ``E / bandwidth`` under the
  roofline (or ``E`` under the bytes model), even for a kernel fused to skip
  every intermediate, as long as it writes the value back to memory (a
  kernel that recomputes a value inside its consumer and never stores it is
  outside this model, where every value is a buffer).

The bound is the largest over ``o``, divided by the step's cost. Roots that
an op updates in place are left out of ``C(o)`` (their value at ``o`` need
not be their producer's), which only lowers the bound.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..graph.model import Graph
from .cost import H100_BANDWIDTH

__all__ = ["CrossingBound", "cost_segments", "private_inputs"]


def _closure(n: int, preds: Sequence[Sequence[int]], order: Sequence[int]) -> np.ndarray:
    """``m[o, p]``: ``p`` must run before ``o`` (transitively), for ``order`` topological."""
    m = np.zeros((n, n), dtype=bool)
    for o in order:
        for p in preds[o]:
            m[o] |= m[p]
            m[o, p] = True
    return m


class CrossingBound:
    """The bound above for one graph; :meth:`overhead` evaluates it at a budget.

    Parameters
    ----------
    g : Graph
    costs : sequence of float
        Cost per op under the planner's cost model.
    cost_model : str
        ``"roofline"``, ``"bytes"`` or ``"flops"``: how written bytes convert to
        cost for the ``any_kernel`` bound (``"flops"`` gives it no bytes term).
    inplace : InplaceModel, optional
        Outputs an op may write into its inputs (lowers ``fixed(o)``).
    """

    def __init__(self, g: Graph, costs: Sequence[float], cost_model: str = "roofline", inplace=None):
        if len(costs) != len(g.ops):
            raise ValueError(f"costs has {len(costs)} values for {len(g.ops)} ops")
        self.step_cost = float(sum(costs))
        self.per_byte = {"roofline": 1.0 / H100_BANDWIDTH, "bytes": 1.0}.get(cost_model, 0.0)
        n = len(g.ops)
        anc = _closure(n, g.predecessors, g.topological_order())
        desc = anc.T
        roots = np.array(g.allocated, dtype=np.int64)
        updated = {g.roots[t] for op in g.ops for t in op.inplace}
        keep = np.array([r not in updated and r in g.producer for r in roots], dtype=bool)
        roots = roots[keep]
        size = np.array([g.tensors[r].size for r in roots], dtype=np.float64)
        prod = np.array([g.producer[r] for r in roots], dtype=np.int64)
        index = {int(r): i for i, r in enumerate(roots)}
        read = np.zeros((len(roots), n), dtype=np.float32)  # root x op: the op reads it (any alias)
        for t in g.tensors:
            i = index.get(g.roots[t.id])
            if i is not None:
                read[i, g.readers[t.id]] = 1.0
        read_later = (desc.astype(np.float32) @ read.T) > 0  # op x root: a descendant reads it
        pinned = g.pinned_to_end
        read_later |= np.array([int(r) in pinned for r in roots], dtype=bool)  # returned: read at the end
        cross = anc[:, prod] & read_later
        self.private = private_inputs(g, updated, costs)
        base = float(g.always_live_bytes)
        self.fixed = np.zeros(n)
        self.items: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per op: sorted cum sizes, costs
        for o, op in enumerate(g.ops):
            touched = {g.roots[t] for t in (*op.inputs, *op.outputs)
                       if g.tensors[g.roots[t]].kind == "intermediate"}
            saving = inplace.max_saving(g, o) if inplace else 0
            self.fixed[o] = base + sum(g.tensors[r].size for r in touched) + op.workspace - saving
            c = cross[o].copy()
            for r in touched:
                if r in index:
                    c[index[r]] = False
            self.items.append(self._knapsack(size[c], prod[c], costs))

    def _knapsack(self, size: np.ndarray, prod: np.ndarray, costs: Sequence[float]):
        """Items (bytes, cost) per producer of crossing roots, cheapest per byte first:
        (cumulative bytes, cumulative cost, crossing bytes)."""
        if not len(size):
            return np.zeros(1), np.zeros(1), 0.0
        ps, inv = np.unique(prod, return_inverse=True)
        bs = np.bincount(inv, weights=size)
        items: list[tuple[float, float]] = []
        for p, b in zip(ps.tolist(), bs.tolist()):
            items += cost_segments(b, float(costs[p]), self.private.get(p, []))
        b = np.array([i[0] for i in items])
        c = np.array([i[1] for i in items])
        k = np.argsort(c / b, kind="stable")
        return np.concatenate([[0.0], np.cumsum(b[k])]), np.concatenate([[0.0], np.cumsum(c[k])]), float(bs.sum())

    def overhead(self, budget: int, kind: str = "same_kernels") -> float | None:
        """Least overhead (fraction of the step) any plan with peak ``<= budget`` has; None: none fits.

        ``kind`` is ``"same_kernels"`` or ``"any_kernel"`` (see the module docstring).
        """
        if kind not in ("same_kernels", "any_kernel"):
            raise ValueError(f"kind must be 'same_kernels' or 'any_kernel', got {kind!r}")
        if np.any(self.fixed > budget):
            return None  # some op alone does not fit
        best = 0.0
        for o, (cb, cc, total) in enumerate(self.items):
            excess = self.fixed[o] + total - budget
            if excess <= 0:
                continue
            if kind == "any_kernel":
                cost = excess * self.per_byte
            else:
                j = int(np.searchsorted(cb, excess))  # first prefix covering the excess
                if j >= len(cb):
                    return None
                frac = (excess - cb[j - 1]) / (cb[j] - cb[j - 1])
                cost = cc[j - 1] + frac * (cc[j] - cc[j - 1])
            best = max(best, cost)
        return best / self.step_cost if self.step_cost else 0.0


def cost_segments(b: float, cost: float, private: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(bytes, cost) segments of the least cost of freeing part of a producer's ``b`` crossing bytes.

    Freeing all of them with the private inputs in ``R`` made again (the rest
    held) frees ``b - (bytes held)`` at ``cost + cost(R)``; the best ``R`` of
    each size takes the inputs cheapest per byte first (breakpoints ``k``).
    Running the producer a fraction of a time scales a point towards (0, 0),
    so the envelope is the chord from (0, 0) to the breakpoint of least cost
    per byte, then the remaining inputs one by one.
    """
    ys = sorted(private, key=lambda yc: yc[1] / yc[0])
    held = sum(y for y, _ in ys)
    pts = [(b - held, cost)]
    for y, c in ys:
        pts.append((pts[-1][0] + y, pts[-1][1] + c))
    k = min((i for i, (f, _) in enumerate(pts) if f > 0), key=lambda i: pts[i][1] / pts[i][0])
    return [pts[k]] + [(y, c) for y, c in ys[k:]]


def private_inputs(g: Graph, updated: set, costs: Sequence[float]) -> dict[int, list[tuple[float, float]]]:
    """Op -> (bytes, producer's cost) of each private input: an allocated root only it reads
    (through any alias), made by a compute op, never updated in place, not returned."""
    readers: dict[int, set[int]] = {}
    for t in g.tensors:
        readers.setdefault(g.roots[t.id], set()).update(g.readers[t.id])
    pinned = g.pinned_to_end
    out: dict[int, list[tuple[float, float]]] = {}
    for y in g.allocated:
        rs = readers.get(y, set())
        p = g.producer.get(y)
        if len(rs) != 1 or p is None or y in updated or y in pinned or g.ops[p].kind != "compute":
            continue
        (q,) = rs
        if g.tensors[y].size:
            out.setdefault(q, []).append((float(g.tensors[y].size), float(costs[p])))
    return out
