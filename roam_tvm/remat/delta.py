"""The peak of a :func:`~roam_tvm.remat.moves.split` without building its state (no TVM).

The planner weighs hundreds of candidate moves per step and keeps one.
Building each candidate's :class:`~roam_tvm.remat.state.State` (copies of
the op and tensor lists) and recounting its liveness from scratch made
planning quadratic in practice. A move changes only a few live intervals:

* ``r`` now ends at its last early user;
* its copy ``r'`` lives from its copy op to the last late user (the same for
  the other outputs of a multi-output producer whose late users read the copy;
  an output nobody reads lives while its copy runs);
* each version a copy reads lives at least until that copy runs;
* chain-recomputed values live from their copy to the last copy reading them;
* the ``k`` copies are inserted at one position, shifting the later steps.

So the new profile is the old one with ``k`` steps inserted (the bytes
crossing the insertion point, plus each copy's workspace) and a handful of
range updates. :class:`RematPlanner` builds only the state it keeps with
:func:`split` and checks that its recounted peak is the one predicted here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .inplace import op_saving
from .moves import Context, late_users, redirected

__all__ = ["Frame", "Move", "plan_move", "move_peak"]


@dataclass
class Move:
    """What a split would copy.

    Attributes
    ----------
    at : int
        Insertion position (the first late user of ``r``).
    src : list of int
        Op ids copied, in insertion order (the chain's copies, then view copies
        for late readers).
    reads : list of list
        Per chain copy, what it reads: ``("t", tensor)`` for an existing
        version, ``("f", i)`` for the value ``vals[i]`` a chain copy makes.
    vals : list of (int, int, int)
        The values the chain copies make: (copy index, a tensor of the state
        standing for it (same origin and size), where its storage is: the
        index in ``vals`` of the value holding it (itself, or a view's
        recomputed base), or ``-1 - t`` for a view of the existing tensor ``t``).
    out_vals : list of list of int
        Per chain copy, its outputs as indices into ``vals``.
    n_compute : int
        The first ``n_compute`` entries of ``src`` are the chain's copies; the
        last of them makes ``r'``.
    moved : list of (int, int, int, int)
        Per root whose late users read the copy (``r``, then its producer's
        other outputs): (root, value in ``vals``, last early user, last late user).
    """

    r: int
    at: int
    src: list[int]
    reads: list[list[tuple[str, int]]]
    n_compute: int
    vals: list[tuple[int, int, int]]
    out_vals: list[list[int]]
    moved: list[tuple[int, int, int, int]]
    hoistable: bool = False  # a recomputed dead input has a later copy ``split(hoist=True)`` would move up


def plan_move(ctx: Context, r: int, s: int, chain: int) -> Move | None:
    """The copies :func:`split` would make (same rules; None when it returns None)."""
    st, lv = ctx.st, ctx.lv
    ps = lv.users.get(r, [])
    late = [i for i in ps if i > s]
    early = [i for i in ps if i < s]
    if not late or not early:
        return None
    at = late[0]
    src: list[int] = []
    reads: list[list[tuple[str, int]]] = []
    vals: list[tuple[int, int, int]] = []
    out_vals: list[list[int]] = []
    fresh: dict[int, int] = {}  # origin tensor -> index in vals
    hoistable: list[bool] = []

    def recompute(x: int) -> int | None:
        p = st.ops[ctx.producer[x]]
        ins: list[tuple[str, int]] = []
        for y in p.inputs:
            i = fresh.get(st.origin_t[y])
            if i is not None:
                ins.append(("f", i))
                continue
            v = ctx.version(y, at)
            if v is None:
                return None
            if ctx.rechain(v, at, r, chain, s):
                hoistable.append(ctx.later_copy(v, at) is not None)
                i = recompute(v)
                if i is None:
                    return None
                ins.append(("f", i))
            else:
                ins.append(("t", v))
        j = len(src)
        src.append(p.id)
        reads.append(ins)
        outs = []
        for y in p.outputs:
            base = len(vals)
            if p.kind == "view":  # shares the storage of the value it views
                kind, b = ins[p.inputs.index(st.tensors[y].alias_of)]
                base = vals[b][2] if kind == "f" else -1 - b
            vals.append((j, y, base))
            fresh[st.origin_t[y]] = len(vals) - 1
            outs.append(len(vals) - 1)
        out_vals.append(outs)
        return fresh[st.origin_t[x]]

    if recompute(r) is None:
        return None
    n_compute = len(src)
    roots = redirected(ctx, r)
    moved = []
    for o in roots:
        us = lv.users.get(o, [])
        lates = [i for i in us if i >= at]
        if lates:
            moved.append((o, fresh[st.origin_t[o]], max(i for i in us if i < at), lates[-1]))
    src.extend(_early_views(ctx, roots, at))
    return Move(r, at, src, reads, n_compute, vals, out_vals, moved, any(hoistable))


def _early_views(ctx: Context, roots: list[int], at: int) -> list[int]:
    """View ops before ``at`` whose outputs late users reach: :func:`split` copies them."""
    st, lv = ctx.st, ctx.lv
    out: list[int] = []
    seen: set[int] = set(roots)
    mapped = set(roots)

    def visit(x: int) -> None:
        # Same traversal as split's ``version_of``: parent first, then the view's other inputs.
        if x in seen:
            return
        seen.add(x)
        w = st.ops[ctx.producer[x]]
        visit(st.tensors[x].alias_of)
        for i in w.inputs:
            if lv.root[i] in mapped:
                visit(i)
        if ctx.pos[w.id] < at:
            out.append(w.id)

    for i in late_users(ctx, roots, at):
        u = st.ops[st.order[i]]
        if u.kind == "view" and lv.root[u.outputs[0]] in mapped:
            visit(u.outputs[0])
            continue
        for x in u.inputs:
            if lv.root[x] in mapped:
                visit(x)
    return out


class Frame:
    """One state's live intervals as arrays, shared by all its candidate moves."""

    def __init__(self, ctx: Context, first: np.ndarray, last: np.ndarray, size: np.ndarray,
                 alloc: np.ndarray, ws: np.ndarray, profile: list[int], pos: np.ndarray | None = None):
        self.ctx = ctx
        self.pos = pos
        self.first, self.last = first, last
        self.size, self.alloc, self.ws = size, alloc, ws
        self.prof = np.asarray(profile, dtype=np.int64)
        n = len(self.prof)
        used = alloc & (last >= 0)
        d = np.zeros(n + 2, dtype=np.int64)
        # cross[p]: bytes of roots with first < p <= last, i.e. live across the gap before step p.
        np.add.at(d, first[used] + 1, size[used])
        np.add.at(d, last[used] + 1, -size[used])
        self.cross = np.cumsum(d)[:n + 1]


def move_peak(fr: Frame, mv: Move, base: int) -> tuple[int, int]:
    """(peak, number of steps at the peak) of the state :func:`split` would build."""
    ctx = fr.ctx
    lv = ctx.lv
    at, k = mv.at, len(mv.src)
    ins = np.full(k, fr.cross[at] + base, dtype=np.int64)
    ins += fr.ws[mv.src]
    prof = np.concatenate([fr.prof[:at], ins, fr.prof[at:]])

    def new(p: int) -> int:
        return p if p < at else p + k

    # each moved root dies at its last early user; its copy lives from the copy to its last late user
    for o, vi, el, ll in mv.moved:
        prof[el + 1:new(ll) + 1] -= fr.size[o]
        prof[at + mv.vals[vi][0]:new(ll) + 1] += fr.size[o]
    last_read: dict[int, int] = {}  # value holding a storage -> last copy reading it (or a view of it)
    ext: dict[int, int] = {}  # existing root -> last copy position reading it

    def read_existing(t: int, j: int) -> None:
        w = lv.root[t]
        if fr.alloc[w]:
            ext[w] = max(ext.get(w, -1), at + j)

    for j, ins_j in enumerate(mv.reads):
        for kind, v in ins_j:
            b = v if kind == "f" else -1 - v
            b = mv.vals[b][2] if b >= 0 else b
            if b < 0:
                read_existing(-1 - b, j)
            else:
                last_read[b] = max(last_read.get(b, j), j)
    for w, q in ext.items():
        lw = int(fr.last[w])
        if lw < at:  # dead before the copies: extended to the last one reading it
            prof[lw + 1:q + 1] += fr.size[w]
    moved_vals = {vi for _, vi, _, _ in mv.moved}
    for i, (j, t, b) in enumerate(mv.vals):  # chain values (views hold no storage of their own)
        if b == i and i not in moved_vals:
            prof[at + j:at + last_read.get(i, j) + 1] += fr.size[t]
    if ctx.st.inplace:
        _inplace_delta(fr, mv, prof, ext, last_read, new)
    pk = int(prof.max())
    return pk, int(np.count_nonzero(prof == pk))


def _inplace_delta(fr: Frame, mv: Move, prof: np.ndarray, ext: dict[int, int], last_read: dict[int, int],
                   new) -> None:
    """Correct ``prof`` for the in-place pairs the move switches on or off.

    Only three kinds of op can change: the last early user of ``r`` (``r``
    now dies there), the old last users of versions the copies read (they no
    longer die there) and the copies themselves (an input may die at a copy).
    The last late user reads ``r'`` instead of ``r``, which dies there as
    ``r`` did. Every other op keeps its inputs and their last users.
    """
    st, lv = fr.ctx.st, fr.ctx.lv
    model = st.inplace
    at = mv.at
    moved = {w: q for w, q in ext.items() if 0 <= fr.last[w] < at}  # root -> new last position (a copy)
    redirected = {o: (el, ll) for o, _, el, ll in mv.moved}

    def elig(t: int) -> bool:
        return bool(model.eligible[st.origin_t[t]])

    def size(t: int) -> int:
        return int(fr.size[t])

    affected = {st.order[p] for _, _, el, ll in mv.moved for p in (el, ll)}
    affected |= {st.order[fr.last[w]] for w in moved}
    for o in affected:
        src = st.origin_op[o]
        if src not in model.positions:
            continue
        p = int(fr.pos[o])
        np_ = new(p)
        cands = model.candidates(st.ops[o], src)
        old, _ = op_saving(cands, lambda x: int(fr.last[x]) == p, size, elig)

        def dies(x: int) -> bool:
            if x in redirected:
                el, ll = redirected[x]
                return (new(ll) if p >= at else el) == np_
            if x in moved:
                return moved[x] == np_
            return int(fr.last[x]) == p

        now, _ = op_saving(cands, dies, size, elig)
        prof[np_] += old - now
    for j in range(mv.n_compute):
        src = st.origin_op[mv.src[j]]
        if src not in model.positions:
            continue
        keys = list(mv.reads[j])
        cands = [(keys[k], ("f", mv.out_vals[j][m])) for k, m in model.positions[src]]

        def key_t(key) -> int:  # a tensor standing for the key (same origin and size)
            return key[1] if key[0] == "t" else mv.vals[key[1]][1]

        def dies(key, j=j) -> bool:
            if key[0] == "f":
                return last_read.get(key[1], mv.vals[key[1]][0]) == j
            w = lv.root[key[1]]
            return w == key[1] and moved.get(w) == at + j

        saved, _ = op_saving(cands, dies, lambda key: size(key_t(key)), lambda key: elig(key_t(key)))
        prof[at + j] -= saved
