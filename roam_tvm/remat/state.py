"""A training step with recomputations, and its live bytes (no TVM).

A :class:`State` is the original graph's ops and tensors plus copies of
forward ops, with an order over all of them. Its memory model is the one of
:class:`~roam_tvm.graph.model.Graph` (perfect packing; a root lives from its
first to its last user, to the end if returned; always-live roots throughout;
workspace while its op runs). It is recomputed here with numpy over flat
(op, tensor) edge arrays, because the planner evaluates thousands of
candidate states and building a ``Graph`` for each is too slow; the planner
checks the states it returns with ``Graph`` itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph.model import ALWAYS_LIVE_KINDS, Graph, Op, Tensor
from .inplace import InplaceModel, active_pairs, materialise

__all__ = ["State", "Liveness", "initial_state", "liveness", "peak_count", "op_edges", "interval_arrays"]


@dataclass
class State:
    """Ops (originals first, then copies; ``ops[i].id == i``), tensors and an order.

    Attributes
    ----------
    ops, tensors : list
    order : list of int
        Op ids in execution order.
    origin_op : list of int
        Op id -> the original op it computes.
    origin_t : list of int
        Tensor id -> the original tensor whose value it holds.
    cost : float
        Summed cost of the copies.
    edge_op, edge_t : numpy arrays
        The distinct (op, tensor) pairs an op reads or defines.
    alias : numpy array
        Tensor id -> ``alias_of`` (itself when None).
    inplace : InplaceModel or None
        Allowed in-place pairs (:mod:`roam_tvm.remat.inplace`); the state's
        order decides which are active, and its live bytes count them.
    """

    ops: list[Op]
    tensors: list[Tensor]
    order: list[int]
    origin_op: list[int]
    origin_t: list[int]
    cost: float
    edge_op: np.ndarray
    edge_t: np.ndarray
    alias: np.ndarray
    inplace: InplaceModel | None = None

    def graph(self, name: str, active: list[tuple[int, int, int]] = ()) -> Graph:
        """The state as a checked ``Graph`` (program order = op ids; use ``order`` to run it),
        with the ``active`` in-place pairs (op, x, y) as real aliases."""
        ops, tensors = materialise(self.ops, self.tensors, list(active))
        return Graph(ops, tensors, name=name)


@dataclass
class Liveness:
    """Live bytes per step of a state, and where each root is used."""

    profile: list[int]
    root: list[int]
    users: dict[int, list[int]]  # allocated root -> sorted positions of its users
    peak: int
    at_peak: list[int]  # positions whose live bytes equal the peak
    pinned: set[int]  # roots returned by the step (live to the end)
    inplace: list[tuple[int, int, int]] = ()  # active (op, x, y): y written into x


class _Static:
    """Per-tensor facts that no move changes (copies inherit them from their source)."""

    def __init__(self, tensors: list[Tensor], ops: list[Op]):
        self.size = np.array([t.size for t in tensors], dtype=np.int64)
        self.alloc = np.array([t.kind == "intermediate" for t in tensors], dtype=bool)
        self.out = np.array([t.is_output for t in tensors], dtype=bool)
        self.ws = np.array([op.workspace for op in ops], dtype=np.int64)
        self.base = int(sum(t.size for t in tensors if t.alias_of is None and t.kind in ALWAYS_LIVE_KINDS))


def op_edges(op: Op) -> list[int]:
    """Distinct tensors an op reads or defines."""
    return list(dict.fromkeys((*op.inputs, *op.outputs)))


def initial_state(g: Graph, order: list[int], inplace: InplaceModel | None = None) -> State:
    """The unbudgeted step: ``g`` run in ``order``, no copies (in-place pairs where allowed)."""
    eo, et = [], []
    for op in g.ops:
        for t in op_edges(op):
            eo.append(op.id)
            et.append(t)
    alias = np.array([t.id if t.alias_of is None else t.alias_of for t in g.tensors], dtype=np.int64)
    return State(list(g.ops), list(g.tensors), list(order), list(range(len(g.ops))),
                 list(range(len(g.tensors))), 0.0, np.array(eo, dtype=np.int64),
                 np.array(et, dtype=np.int64), alias, inplace or None)


def _static(st: State) -> _Static:
    # Facts per tensor/op of the state, extended (not rebuilt) as copies are added.
    s = getattr(st, "_static", None)
    if s is None or len(s.size) != len(st.tensors) or len(s.ws) != len(st.ops):
        s = _Static(st.tensors, st.ops)
        object.__setattr__(st, "_static", s)
    return s


def _roots(alias: np.ndarray) -> np.ndarray:
    root = alias.copy()
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            return root
        root = nxt


def _intervals(st: State, sf: _Static) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per tensor: root, first and last position of the root's users (-1 when unused), positions."""
    n = len(st.order)
    order = np.asarray(st.order, dtype=np.int64)
    pos = np.empty(len(st.ops), dtype=np.int64)
    pos[order] = np.arange(n)
    root = _roots(st.alias)
    er = root[st.edge_t]
    ep = pos[st.edge_op]
    m = sf.alloc[er]
    er, ep = er[m], ep[m]
    first = np.full(len(root), n, dtype=np.int64)
    last = np.full(len(root), -1, dtype=np.int64)
    np.minimum.at(first, er, ep)
    np.maximum.at(last, er, ep)
    pinned = np.zeros(len(root), dtype=bool)
    pinned[root[sf.out]] = True
    last[pinned & (last >= 0)] = n - 1
    return root, first, last, pos


def _profile(st: State, sf: _Static, first: np.ndarray, last: np.ndarray, pos: np.ndarray,
             active: list[tuple[int, int, int]] | None = None) -> np.ndarray:
    n = len(st.order)
    used = last >= 0
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, first[used], sf.size[used])
    np.add.at(delta, last[used] + 1, -sf.size[used])
    prof = np.cumsum(delta[:n]) + sf.ws[np.asarray(st.order, dtype=np.int64)] + sf.base
    for o, _, y in (active_pairs(st, last, pos) if active is None else active):
        prof[pos[o]] -= sf.size[y]  # y shares x's storage: one buffer, not two, while o runs
    return prof


def peak_count(st: State, static_from: State | None = None) -> tuple[int, int]:
    """(peak bytes, number of positions at the peak) of ``st``."""
    sf = _extend_static(st, static_from)
    _, first, last, pos = _intervals(st, sf)
    prof = _profile(st, sf, first, last, pos)
    if not len(prof):
        return sf.base, 0
    pk = int(prof.max())
    return pk, int((prof == pk).sum())


def _extend_static(st: State, parent: State | None) -> _Static:
    """``parent``'s static facts plus the ops and tensors ``st`` added (copies inherit)."""
    if parent is None:
        return _static(st)
    ps = _static(parent)
    nt, no = len(st.tensors), len(st.ops)
    if len(ps.size) == nt and len(ps.ws) == no:
        return ps
    s = _Static.__new__(_Static)
    src_t = np.array(st.origin_t[len(ps.size):], dtype=np.int64)
    s.size = np.concatenate([ps.size, ps.size[src_t]]) if len(src_t) else ps.size
    s.alloc = np.concatenate([ps.alloc, ps.alloc[src_t]]) if len(src_t) else ps.alloc
    s.out = np.concatenate([ps.out, np.zeros(len(src_t), dtype=bool)])
    s.ws = np.concatenate([ps.ws, np.array([st.ops[o].workspace for o in range(len(ps.ws), no)],
                                           dtype=np.int64)])
    s.base = ps.base
    object.__setattr__(st, "_static", s)
    return s


def liveness(st: State, static_from: State | None = None) -> Liveness:
    """Live bytes at each position of ``st.order``, with each root's user positions."""
    sf = _extend_static(st, static_from)
    root, first, last, pos = _intervals(st, sf)
    active = active_pairs(st, last, pos)
    prof = _profile(st, sf, first, last, pos, active)
    users: dict[int, list[int]] = {}
    rr = root[st.edge_t]
    m = sf.alloc[rr]
    for r, p in sorted(set(zip(rr[m].tolist(), pos[st.edge_op[m]].tolist()))):
        users.setdefault(r, []).append(p)
    pinned = set(np.flatnonzero(np.zeros(len(root), dtype=bool) | _pinned(root, sf)).tolist())
    prof_l = prof.tolist()
    peak = max(prof_l) if prof_l else sf.base
    return Liveness(prof_l, root.tolist(), users, peak, [i for i, b in enumerate(prof_l) if b == peak], pinned,
                    active)


def _pinned(root: np.ndarray, sf: _Static) -> np.ndarray:
    p = np.zeros(len(root), dtype=bool)
    p[root[sf.out]] = True
    return p


def interval_arrays(st: State) -> dict[str, np.ndarray | int]:
    """Per root ``first``/``last`` user position (-1: unused), per tensor ``size`` and ``alloc``,
    per op ``ws``, and the always-live ``base``, for incremental peak updates."""
    sf = _static(st)
    _, first, last, pos = _intervals(st, sf)
    return {"pos": pos, "first": first, "last": last, "size": sf.size, "alloc": sf.alloc, "ws": sf.ws, "base": sf.base}
