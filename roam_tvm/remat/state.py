"""A training step with recomputations, and the one move that adds one (no TVM).

A :class:`State` is the original graph's ops and tensors plus copies of
forward ops, with an order over all of them. Its memory model is the one of
:class:`~roam_tvm.graph.model.Graph` (perfect packing; a root lives from its
first to its last user, to the end if returned; always-live roots throughout;
workspace while its op runs), recomputed here on lists because the planner
evaluates thousands of candidate states and building a ``Graph`` for each is
too slow. The planner checks the states it returns with ``Graph`` itself.

The move, :func:`split`
-----------------------
Take an allocated root ``r`` that is live across step ``s`` but not used there.
Its users at positions ``< s`` keep ``r``; those at positions ``> s`` read a
fresh copy ``r'``, computed by a copy of ``r``'s producer inserted right
before the first of them. So ``r`` dies at its last early user instead of
living across ``s``. The copy reads, for each input of the producer, the
latest *version* of that value (the original or an earlier recomputation)
created before the insertion point, which may extend that version's life:
the simulated peak of the new state accounts for it. Views of ``r`` used late
are redirected or copied with it (they are free).

Only pure ops are copied: ``kind == "compute"``, a single output, no in-place
writes, no control dependencies. A version whose storage any op updates in
place is never read by a copy at a position after that update (conservative:
the copy must see the value it had in the forward pass).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..graph.model import ALWAYS_LIVE_KINDS, Graph, Op, Tensor

__all__ = ["State", "Liveness", "initial_state", "liveness", "split"]


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
    """

    ops: list[Op]
    tensors: list[Tensor]
    order: list[int]
    origin_op: list[int]
    origin_t: list[int]
    cost: float = 0.0

    def graph(self, name: str) -> Graph:
        """The state as a checked ``Graph`` (program order = op ids; use ``order`` to run it)."""
        return Graph(self.ops, self.tensors, name=name)


@dataclass
class Liveness:
    """Live bytes per step of a state, and where each root is used."""

    profile: list[int]
    root: list[int]
    users: dict[int, list[int]]  # allocated root -> sorted positions of its users
    peak: int
    at_peak: list[int]  # positions whose live bytes equal the peak
    pinned: set[int]  # roots returned by the step (live to the end)


def initial_state(g: Graph, order: list[int]) -> State:
    """The unbudgeted step: ``g`` run in ``order``, no copies."""
    return State(list(g.ops), list(g.tensors), list(order), list(range(len(g.ops))),
                 list(range(len(g.tensors))))


def _roots(tensors: list[Tensor]) -> list[int]:
    root = [-1] * len(tensors)
    for t in tensors:
        chain, x = [], t.id
        while root[x] < 0 and tensors[x].alias_of is not None:
            chain.append(x)
            x = tensors[x].alias_of
        r = root[x] if root[x] >= 0 else x
        root[x] = r
        for c in chain:
            root[c] = r
    return root


def liveness(st: State) -> Liveness:
    """Perfect-packing live bytes at each position of ``st.order``."""
    tensors = st.tensors
    root = _roots(tensors)
    users: dict[int, list[int]] = {}
    for i, o in enumerate(st.order):
        op = st.ops[o]
        for t in dict.fromkeys(root[x] for x in (*op.inputs, *op.outputs)):
            if tensors[t].kind == "intermediate":
                users.setdefault(t, []).append(i)
    n = len(st.order)
    pinned = {root[t.id] for t in tensors if t.is_output}
    delta = [0] * (n + 1)
    for r, ps in users.items():
        last = n - 1 if r in pinned else ps[-1]
        delta[ps[0]] += tensors[r].size
        delta[last + 1] -= tensors[r].size
    cur = sum(t.size for t in tensors if t.alias_of is None and t.kind in ALWAYS_LIVE_KINDS)
    prof = []
    for i, o in enumerate(st.order):
        cur += delta[i]
        prof.append(cur + st.ops[o].workspace)
    peak = max(prof) if prof else cur
    return Liveness(prof, root, users, peak, [i for i, b in enumerate(prof) if b == peak], pinned)


def splittable(st: State, lv: Liveness, producer: dict[int, int], r: int) -> bool:
    """``r`` is an allocated, unreturned root made by a pure op, aliased only by views."""
    t = st.tensors[r]
    if t.kind != "intermediate" or t.alias_of is not None or r not in producer:
        return False
    p = st.ops[producer[r]]
    if not _pure(p) or p.outputs != [r]:
        return False
    for x, tx in enumerate(st.tensors):
        if lv.root[x] != r:
            continue
        if tx.is_output:
            return False
        if x != r:
            w = st.ops[producer[x]] if x in producer else None
            if w is None or w.kind != "view" or len(w.outputs) != 1 or w.inplace:
                return False
    return not any(lv.root[x] == r for op in st.ops for x in op.inplace)


def split(st: State, lv: Liveness, producer: dict[int, int], r: int, s: int,
          costs: list[float], chain: bool = False) -> State | None:
    """Recompute ``r`` for its users after position ``s`` (see the module docstring).

    With ``chain``, an input of the copy whose latest version is dead at the
    insertion point (and made by a pure op) is recomputed too, recursively,
    instead of being kept alive until then: checkpointing a whole segment.

    Returns None when the move is not possible (no late or early user, or an
    input of the producer has no version readable at the insertion point).
    """
    ps = lv.users.get(r, [])
    late = [i for i in ps if i > s]
    if not late or not any(i < s for i in ps):
        return None
    at = late[0]
    pos = {o: i for i, o in enumerate(st.order)}
    written = _inplace_positions(st, lv, pos)
    ops, tensors = list(st.ops), list(st.tensors)
    origin_op, origin_t = list(st.origin_op), list(st.origin_t)
    new_ops: list[int] = []

    def new_tensor(src: int, alias_of: int | None) -> int:
        tid = len(tensors)
        tensors.append(replace(st.tensors[src], id=tid, name=f"{st.tensors[src].name}.re{tid}",
                               alias_of=alias_of, is_output=False))
        origin_t.append(st.origin_t[src])
        return tid

    def copy_op(src_op: Op, inputs: list[int], outputs: list[int]) -> None:
        oid = len(ops)
        ops.append(replace(src_op, id=oid, inputs=inputs, outputs=outputs, inplace=[], after=[]))
        origin_op.append(st.origin_op[src_op.id])
        new_ops.append(oid)

    fresh: dict[int, int] = {}  # origin -> tensor made by a copy in this move

    def recompute(x: int) -> int | None:
        # A copy of x's producer reading, per input, the latest readable version;
        # with ``chain``, a version dead at ``at`` is itself recomputed instead.
        p = st.ops[producer[x]]
        ins = []
        for y in p.inputs:
            v = fresh.get(st.origin_t[y])
            if v is None:
                v = _version(st, lv, producer, pos, written, y, at)
                if v is None:
                    return None
                if chain and _dead_at(st, lv, producer, v, at):
                    v = recompute(v)
                    if v is None:
                        return None
            ins.append(v)
        x2 = new_tensor(x, None)
        copy_op(p, ins, [x2])
        fresh[st.origin_t[x]] = x2
        return x2

    r2 = recompute(r)
    if r2 is None:
        return None
    mapped: dict[int, int] = {r: r2}

    def version_of(x: int) -> int:
        # ``x`` is r or a view of it; late readers get the copy's counterpart.
        if x not in mapped:
            w = st.ops[producer[x]]
            src = version_of(st.tensors[x].alias_of)
            if pos[w.id] > s:  # a late view is redirected in place
                ops[w.id] = replace(w, inputs=[version_of(i) if lv.root[i] == r else i for i in w.inputs])
                tensors[x] = replace(st.tensors[x], alias_of=src)
                mapped[x] = x
            else:
                x2 = new_tensor(x, src)
                copy_op(w, [version_of(i) if lv.root[i] == r else i for i in w.inputs], [x2])
                mapped[x] = x2
        return mapped[x]

    for i in late:
        u = st.ops[st.order[i]]
        if u.kind == "view" and lv.root[u.outputs[0]] == r:
            version_of(u.outputs[0])
            continue
        ops[u.id] = replace(ops[u.id], inputs=[version_of(x) if lv.root[x] == r else x for x in u.inputs])
    order = st.order[:at] + new_ops + st.order[at:]
    added = sum(costs[origin_op[o]] for o in new_ops)
    return State(ops, tensors, order, origin_op, origin_t, st.cost + added)


def _pure(op: Op) -> bool:
    return op.kind == "compute" and len(op.outputs) == 1 and not op.inplace and not op.after


def _dead_at(st: State, lv: Liveness, producer: dict[int, int], v: int, at: int) -> bool:
    """``v`` is an unaliased intermediate made by a pure op, and nothing uses it at or after ``at``."""
    t = st.tensors[v]
    if t.kind != "intermediate" or t.alias_of is not None or v not in producer:
        return False
    if not _pure(st.ops[producer[v]]) or v in lv.pinned:
        return False
    ps = lv.users.get(v, [])
    return bool(ps) and ps[-1] < at


def _inplace_positions(st: State, lv: Liveness, pos: dict[int, int]) -> dict[int, int]:
    """Storage root -> first position of an op that updates it in place."""
    out: dict[int, int] = {}
    for op in st.ops:
        for x in op.inplace:
            r = lv.root[x]
            out[r] = min(out.get(r, pos[op.id]), pos[op.id])
    return out


def _version(st: State, lv: Liveness, producer: dict[int, int], pos: dict[int, int],
             written: dict[int, int], x: int, at: int) -> int | None:
    """The latest tensor holding ``x``'s value that a copy at position ``at`` may read."""
    want = st.origin_t[x]
    best, best_pos = None, -2
    for v, o in enumerate(st.origin_t):
        if o != want:
            continue
        made = pos[producer[v]] if v in producer else -1
        if made >= at or written.get(lv.root[v], at) < at:
            continue
        if made > best_pos:
            best, best_pos = v, made
    return best
