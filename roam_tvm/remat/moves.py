"""The one move of the planner: recompute a root for its late users (no TVM).

:func:`split` takes an allocated root ``r`` that is live across step ``s``
but not used there. Its users at positions ``< s`` keep ``r``; those at
positions ``> s`` read a fresh copy ``r'``, computed by a copy of ``r``'s
producer inserted right before the first of them. So ``r`` dies at its last
early user instead of living across ``s``. The copy reads, for each input of
the producer, the latest *version* of that value (the original or an earlier
recomputation) made before the insertion point, which may extend that
version's life; the new state's simulated peak accounts for it. With
``chain``, a version that is dead at the insertion point is recomputed too,
recursively (a whole segment recomputed from a checkpoint). With
``chain=LEAN`` only the dead versions at least ``1/LEAN_RATIO`` of ``r``'s
size are recomputed; smaller ones (a batch norm's per-channel variance, read
off the whole activation) are kept alive until the copy instead: holding a
few bytes longer is cheaper than re-reading the activation they summarise.
With ``hoist``, a dead input that an earlier move already recomputes for
later readers (a copy made after the insertion point, all of whose inputs
exist by then) is not recomputed again: that copy is moved up to the
insertion point and serves both (re-ordering after recomputation; a conv
output made again for its batch norm's backward also feeds the ReLU
recomputed from it just before).
Views of ``r`` used late are redirected or copied with it (they are free).

Only pure ops are copied: ``kind == "compute"``, no in-place writes, no
control dependencies. A kernel with several outputs (GPT-2's q/k/v split) is
copied whole: every output gets a fresh tensor, and the users of each of its
outputs that run at or after the insertion point read the copy (an output no
such user reads lives only while the copy runs, which the peak counts). A
view of a dead value is recomputed as the same view of the recomputed value
(a chain through ``q = qkv[0]`` and a reshape). A copy never reads a storage at a position
after an op has updated it in place (conservative: the copy must see the
value the forward pass saw).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..graph.model import Op
from .state import Liveness, State, op_edges

__all__ = ["Context", "split", "splittable", "redirected", "CHAIN_MODES", "LEAN", "LEAN_RATIO"]

#: Chain mode that recomputes only the dead inputs worth it (see the module docstring).
LEAN = 2
#: Under ``LEAN``, a dead version smaller than ``size(r) / LEAN_RATIO`` is kept alive, not recomputed.
LEAN_RATIO = 64
#: The modes a planner tries per candidate: plain, chained, lean-chained.
CHAIN_MODES = (0, 1, LEAN)


class Context:
    """Facts about one state on the path, shared by all its candidate moves."""

    def __init__(self, st: State, lv: Liveness):
        self.st, self.lv = st, lv
        self.producer = {t: op.id for op in st.ops for t in op.outputs}
        self.pos = {o: i for i, o in enumerate(st.order)}
        self.written: dict[int, int] = {}  # storage root -> first position updated in place
        for op in st.ops:
            for x in op.inplace:
                r, p = lv.root[x], self.pos[op.id]
                self.written[r] = min(self.written.get(r, p), p)
        self.versions: dict[int, list[int]] = {}  # origin tensor -> tensors holding its value
        for t, o in enumerate(st.origin_t):
            self.versions.setdefault(o, []).append(t)
        self.family: dict[int, list[int]] = {}  # root -> its aliases (itself excluded)
        for t, r in enumerate(lv.root):
            if r != t:
                self.family.setdefault(r, []).append(t)

    def made_at(self, v: int) -> int:
        """Position of ``v``'s producer (-1 for a tensor that exists before the step)."""
        p = self.producer.get(v)
        return -1 if p is None else self.pos[p]

    def version(self, x: int, at: int) -> int | None:
        """The latest tensor holding ``x``'s value that a copy at position ``at`` may read."""
        best, best_pos = None, -2
        for v in self.versions[self.st.origin_t[x]]:
            made = self.made_at(v)
            if made >= at or self.written.get(self.lv.root[v], at) < at:
                continue
            if made > best_pos:
                best, best_pos = v, made
        return best

    def dead_at(self, v: int, at: int) -> bool:
        """``v`` is an unaliased root made by a pure op and nothing uses it at or after ``at``,
        or a view (made by a view op reading only its storage) of such a root."""
        t = self.st.tensors[v]
        if t.kind != "intermediate" or v not in self.producer:
            return False
        if t.alias_of is not None:  # recomputed as the same view of its recomputed base
            return _view_of(self, v) and self.dead_at(t.alias_of, at)
        if not _pure(self.st.ops[self.producer[v]]) or v in self.lv.pinned:
            return False
        ps = self.lv.users.get(v, [])
        return bool(ps) and ps[-1] < at

    def later_copy(self, v: int, at: int) -> int | None:
        """The earliest copy op after ``at`` that makes ``v``'s value from tensors made before ``at``."""
        best, best_pos = None, None
        for w in self.versions[self.st.origin_t[v]]:
            h = self.producer.get(w)
            if h is None or self.st.origin_op[h] == h or self.pos[h] <= at:
                continue
            if all(self.made_at(i) < at for i in self.st.ops[h].inputs) and (best is None or self.pos[h] < best_pos):
                best, best_pos = h, self.pos[h]
        return best

    def spare_output(self, v: int, at: int, s: int) -> bool:
        """``v`` is an output of a copied multi-output kernel that runs after step ``s``, or with only
        copies between it and ``at``: read it (held from that copy on, not across ``s`` nor any
        original op) rather than run the kernel again (the q/k/v split recomputed for q also serves
        k and v)."""
        h = self.producer.get(v)
        if h is None or self.st.origin_op[h] == h or len(self.st.ops[h].outputs) < 2:
            return False
        return self.pos[h] > s or all(self.st.origin_op[o] != o for o in self.st.order[self.pos[h]:at])

    def rechain(self, v: int, at: int, r: int, chain: int, s: int) -> bool:
        """A chained move recomputes version ``v`` (dead at ``at``) rather than reading it."""
        if not chain or not self.dead_at(v, at) or self.spare_output(v, at, s):
            return False
        # Lean: a small dead input is held, not re-derived from the large tensor it summarises.
        # (a view is as large as its storage)
        return chain != LEAN or self.st.tensors[self.lv.root[v]].size * LEAN_RATIO >= self.st.tensors[r].size


def _pure(op: Op) -> bool:
    return op.kind == "compute" and bool(op.outputs) and not op.inplace and not op.after


def _view_of(ctx: Context, v: int) -> bool:
    """``v`` is the one output of a plain view op whose inputs all share ``v``'s base storage."""
    w = ctx.st.ops[ctx.producer[v]]
    base = ctx.st.tensors[v].alias_of
    if w.kind != "view" or w.outputs != [v] or w.inplace or w.after or base not in w.inputs:
        return False
    return all(ctx.lv.root[i] == ctx.lv.root[base] for i in w.inputs)


def splittable(ctx: Context, r: int) -> bool:
    """``r`` is an allocated, unreturned root made by a pure op, aliased only by views, never updated."""
    st = ctx.st
    t = st.tensors[r]
    if t.kind != "intermediate" or t.alias_of is not None or r not in ctx.producer:
        return False
    if not _pure(st.ops[ctx.producer[r]]) or r in ctx.lv.pinned or r in ctx.written:
        return False
    for x in ctx.family.get(r, []):
        w = st.ops[ctx.producer[x]] if x in ctx.producer else None
        if w is None or w.kind != "view" or len(w.outputs) != 1 or w.inplace:
            return False
    return True


def redirected(ctx: Context, r: int) -> list[int]:
    """``r`` and the other outputs of its producer whose late users a split of ``r`` redirects
    to the copy (those :func:`splittable` accepts; the copy makes them anyway)."""
    p = ctx.st.ops[ctx.producer[r]]
    return [r] + [o for o in p.outputs if o != r and splittable(ctx, o)]


def late_users(ctx: Context, roots: list[int], at: int) -> list[int]:
    """Positions at or after ``at`` of the users of ``roots`` (or of their views), sorted."""
    return sorted({i for o in roots for i in ctx.lv.users.get(o, []) if i >= at})


def split(ctx: Context, r: int, s: int, costs: list[float], chain: int = 0, hoist: bool = False
          ) -> State | None:
    """Recompute ``r`` for its users after position ``s`` (see the module docstring).

    Returns None when the move is not possible (no late or no early user, or
    an input of the producer has no version readable at the insertion point).
    """
    st, lv = ctx.st, ctx.lv
    ps = lv.users.get(r, [])
    late = [i for i in ps if i > s]
    if not late or not any(i < s for i in ps):
        return None
    at = late[0]
    ops, tensors = list(st.ops), list(st.tensors)
    origin_op, origin_t = list(st.origin_op), list(st.origin_t)
    alias = list(st.alias.tolist())
    new_ops: list[int] = []
    changed: list[int] = []

    def new_tensor(src: int, alias_of: int | None) -> int:
        tid = len(tensors)
        tensors.append(replace(st.tensors[src], id=tid, name=f"{st.tensors[src].name}.re{tid}",
                               alias_of=alias_of, is_output=False))
        origin_t.append(st.origin_t[src])
        alias.append(tid if alias_of is None else alias_of)
        return tid

    def copy_op(src_op: Op, inputs: list[int], outputs: list[int]) -> None:
        oid = len(ops)
        ops.append(replace(src_op, id=oid, inputs=inputs, outputs=outputs, inplace=[], after=[]))
        origin_op.append(st.origin_op[src_op.id])
        new_ops.append(oid)

    fresh: dict[int, int] = {}  # origin -> tensor made by a copy in this move
    hoisted: list[int] = []  # existing copy ops moved up to ``at``

    def recompute(x: int) -> int | None:
        p = st.ops[ctx.producer[x]]
        ins = []
        for y in p.inputs:
            v = fresh.get(st.origin_t[y])
            if v is None:
                v = ctx.version(y, at)
                if v is None:
                    return None
                if ctx.rechain(v, at, r, chain, s):
                    h = ctx.later_copy(v, at) if hoist else None
                    if h is not None:  # moved up, not made again
                        hoisted.append(h)
                        for w in st.ops[h].outputs:
                            fresh[st.origin_t[w]] = w
                        v = fresh[st.origin_t[v]]
                    else:
                        v = recompute(v)
                    if v is None:
                        return None
            ins.append(v)
        if p.kind == "view":  # the same view of the recomputed base
            x2 = new_tensor(x, ins[p.inputs.index(st.tensors[x].alias_of)])
            outs = [x2]
        else:  # every output of the kernel is made again
            outs = [new_tensor(y, None) for y in p.outputs]
        copy_op(p, ins, outs)
        for y, y2 in zip(p.outputs, outs):
            fresh[st.origin_t[y]] = y2
        return outs[p.outputs.index(x)]

    if recompute(r) is None:
        return None
    moved = redirected(ctx, r)  # r and its producer's other outputs: their late users read the copy
    mapped: dict[int, int] = {o: fresh[st.origin_t[o]] for o in moved}

    def version_of(x: int) -> int:
        # ``x`` is a moved root or a view of one; late readers get the copy's counterpart.
        if x not in mapped:
            w = st.ops[ctx.producer[x]]
            src = version_of(st.tensors[x].alias_of)
            ins = [version_of(i) if lv.root[i] in mapped_roots else i for i in w.inputs]
            if ctx.pos[w.id] >= at:  # a late view is redirected in place
                ops[w.id] = replace(w, inputs=ins)
                changed.append(w.id)
                tensors[x] = replace(st.tensors[x], alias_of=src)
                alias[x] = src
                mapped[x] = x
            else:
                x2 = new_tensor(x, src)
                copy_op(w, ins, [x2])
                mapped[x] = x2
        return mapped[x]

    mapped_roots = set(moved)
    for i in late_users(ctx, moved, at):
        u = st.ops[st.order[i]]
        if u.kind == "view" and lv.root[u.outputs[0]] in mapped_roots:
            version_of(u.outputs[0])
            continue
        ops[u.id] = replace(ops[u.id], inputs=[version_of(x) if lv.root[x] in mapped_roots else x
                                               for x in u.inputs])
        changed.append(u.id)
    order = st.order[:at] + hoisted + new_ops + [o for o in st.order[at:] if o not in hoisted]
    added = sum(costs[origin_op[o]] for o in new_ops)
    keep = ~np.isin(st.edge_op, changed)
    eo, et = [], []
    for o in dict.fromkeys((*changed, *new_ops)):
        for t in op_edges(ops[o]):
            eo.append(o)
            et.append(t)
    return State(ops, tensors, order, origin_op, origin_t, st.cost + added,
                 np.concatenate([st.edge_op[keep], np.array(eo, dtype=np.int64)]),
                 np.concatenate([st.edge_t[keep], np.array(et, dtype=np.int64)]),
                 np.array(alias, dtype=np.int64), st.inplace)
