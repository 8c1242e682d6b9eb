"""The peak of a :func:`~roam_tvm.remat.moves.split` without building its state (no TVM).

The planner weighs hundreds of candidate moves per step and keeps one.
Building each candidate's :class:`~roam_tvm.remat.state.State` (copies of
the op and tensor lists) and recounting its liveness from scratch made
planning quadratic in practice. A move changes only a few live intervals:

* ``r`` now ends at its last early user;
* its copy ``r'`` lives from its copy op to the last late user;
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
from .moves import Context

__all__ = ["Frame", "Move", "plan_move", "move_peak"]


@dataclass
class Move:
    """What a split would copy.

    Attributes
    ----------
    at : int
        Insertion position (the first late user of ``r``).
    src : list of int
        Op ids copied, in insertion order (compute copies, then view copies).
    reads : list of list
        Per compute copy, what it reads: ``("t", tensor)`` for an existing
        version, ``("f", j)`` for the output of compute copy ``j``.
    n_compute : int
        The first ``n_compute`` entries of ``src`` are compute copies; the last
        of them makes ``r'``.
    early_last, late_last : int
        Last early and last late user position of ``r`` (old positions).
    """

    r: int
    at: int
    src: list[int]
    reads: list[list[tuple[str, int]]]
    n_compute: int
    early_last: int
    late_last: int
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
    fresh: dict[int, int] = {}  # origin tensor -> compute copy index
    hoistable: list[bool] = []

    def recompute(x: int) -> int | None:
        p = st.ops[ctx.producer[x]]
        ins: list[tuple[str, int]] = []
        for y in p.inputs:
            j = fresh.get(st.origin_t[y])
            if j is not None:
                ins.append(("f", j))
                continue
            v = ctx.version(y, at)
            if v is None:
                return None
            if ctx.rechain(v, at, r, chain):
                hoistable.append(ctx.later_copy(v, at) is not None)
                j = recompute(v)
                if j is None:
                    return None
                ins.append(("f", j))
            else:
                ins.append(("t", v))
        src.append(p.id)
        reads.append(ins)
        fresh[st.origin_t[x]] = len(src) - 1
        return len(src) - 1

    if recompute(r) is None:
        return None
    n_compute = len(src)
    src.extend(_early_views(ctx, r, s, late))
    return Move(r, at, src, reads, n_compute, early[-1], late[-1], any(hoistable))


def _early_views(ctx: Context, r: int, s: int, late: list[int]) -> list[int]:
    """View ops before ``s`` whose outputs late users reach: :func:`split` copies them."""
    st, lv = ctx.st, ctx.lv
    out: list[int] = []
    seen: set[int] = {r}

    def visit(x: int) -> None:
        # Same traversal as split's ``version_of``: parent first, then the view's other inputs.
        if x in seen:
            return
        seen.add(x)
        w = st.ops[ctx.producer[x]]
        visit(st.tensors[x].alias_of)
        for i in w.inputs:
            if lv.root[i] == r:
                visit(i)
        if ctx.pos[w.id] <= s:
            out.append(w.id)

    for i in late:
        u = st.ops[st.order[i]]
        if u.kind == "view" and lv.root[u.outputs[0]] == r:
            visit(u.outputs[0])
            continue
        for x in u.inputs:
            if lv.root[x] == r:
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

    r = mv.r
    # r dies at its last early user.
    prof[mv.early_last + 1:new(mv.late_last) + 1] -= fr.size[r]
    # r' from its copy to the last late user.
    prof[at + mv.n_compute - 1:new(mv.late_last) + 1] += fr.size[r]
    last_read: dict[int, int] = {}  # fresh copy index -> last copy reading it
    ext: dict[int, int] = {}  # existing root -> last copy position reading it
    for j, ins_j in enumerate(mv.reads):
        for kind, v in ins_j:
            if kind == "f":
                last_read[v] = max(last_read.get(v, j), j)
            else:
                w = lv.root[v]
                if fr.alloc[w]:
                    ext[w] = max(ext.get(w, -1), at + j)
    for w, q in ext.items():
        lw = int(fr.last[w])
        if lw < at:  # dead before the copies: extended to the last one reading it
            prof[lw + 1:q + 1] += fr.size[w]
    for j in range(mv.n_compute - 1):  # chain values (the last compute copy is r')
        end = last_read.get(j, j)
        prof[at + j:at + end + 1] += fr.size[ctx.st.ops[mv.src[j]].outputs[0]]
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
    at, r = mv.at, mv.r
    moved = {w: q for w, q in ext.items() if 0 <= fr.last[w] < at}  # root -> new last position (a copy)

    def elig(t: int) -> bool:
        return bool(model.eligible[st.origin_t[t]])

    def size(t: int) -> int:
        return int(fr.size[t])

    affected = {st.order[mv.early_last], st.order[mv.late_last], *(st.order[fr.last[w]] for w in moved)}
    for o in affected:
        src = st.origin_op[o]
        if src not in model.positions:
            continue
        p = int(fr.pos[o])
        np_ = new(p)
        cands = model.candidates(st.ops[o], src)
        old, _ = op_saving(cands, lambda x: int(fr.last[x]) == p, size, elig)

        def dies(x: int) -> bool:
            if x == r:
                return (new(mv.late_last) if p >= at else mv.early_last) == np_
            if x in moved:
                return moved[x] == np_
            return int(fr.last[x]) == p

        now, _ = op_saving(cands, dies, size, elig)
        prof[np_] += old - now
    for j in range(mv.n_compute):
        src_op = st.ops[mv.src[j]]
        src = st.origin_op[src_op.id]
        if src not in model.positions:
            continue
        keys = [("t", v) if kind == "t" else ("f", v) for kind, v in mv.reads[j]]
        cands = [(keys[k], ("f", j)) for k, m in model.positions[src] if m == 0]

        def key_t(key) -> int:  # a tensor standing for the key (same origin and size)
            return key[1] if key[0] == "t" else st.ops[mv.src[key[1]]].outputs[0]

        def dies(key, j=j) -> bool:
            if key[0] == "f":
                return last_read.get(key[1], key[1]) == j
            w = lv.root[key[1]]
            return w == key[1] and moved.get(w) == at + j

        saved, _ = op_saving(cands, dies, lambda key: size(key_t(key)), lambda key: elig(key_t(key)))
        prof[at + j] -= saved
