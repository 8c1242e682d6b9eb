"""Exact min-peak ordering of a piece by dynamic programming over down-sets.

The live bytes while op ``v`` runs depend only on the *set* ``S`` of ops run so
far (``v`` included), not on their order. So the least peak of an order of a
down-closed set ``S`` is

    best(S) = min over maximal v in S of max(best(S - v), live(S, v)),

and ``best(all ops)`` is the optimum. States are bitmasks, expanded layer by
layer (``k`` ops that open a tensor run), pruned by an incumbent upper bound.
Ops that open no tensor (views, in-place writes) run as soon as they are ready
rather than being branched on (:meth:`_DP._free_ops` says why that is exact). The number of
down-sets grows quickly with the width of the graph, so the search gives up
(returns ``None``) beyond ``max_states`` or ``time_limit``; the caller then uses
the MIP (:mod:`roam_tvm.order.mip`) or keeps its heuristic.

:func:`dp_search` adds a lower bound (``floor``, e.g. the cut bound): it asks
"is there an order with peak <= floor?" first. That question prunes every state
above the floor, so when the optimum equals the floor (the usual case) it costs a
small fraction of the plain DP; otherwise the plain DP follows.

:func:`graph_optimum` runs the same search over a whole graph: where it finishes, its result is the
least peak of any order, a lower bound that the min-cut bounds only approximate from below.
"""
from __future__ import annotations

import time

from ..graph.model import Graph
from .piece import LivenessIndex, Piece, make_piece, piece_peak

__all__ = ["dp_order", "dp_search", "graph_optimum"]


#: States kept per layer by the beam search that seeds the exact search.
BEAM = 2000


class _TooBig(Exception):
    """The search passed its state or time budget."""


class _DP:
    """The down-set DP of one piece, reusable for several upper bounds."""

    def __init__(self, piece: Piece, max_states: int, time_limit: float,
                 wall_limit: float | None = None):
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        self.wall_limit = wall_limit
        self.piece = piece
        self.max_states = max_states
        self.time_limit = time_limit
        self.n_states = 0
        m = self.m = piece.size
        self.pred_mask = [0] * m
        for v, ps in enumerate(piece.preds):
            for u in ps:
                self.pred_mask[v] |= 1 << u
        # per tensor: size, users mask, closes-able (not needed after)
        self.t_size, self.t_users, self.t_close = [], [], []
        self.op_t: list[list[int]] = [[] for _ in range(m)]
        self.open0 = 0
        self.open0_bytes = 0
        self.const = piece.const
        for size, users, before, after in piece.tensors:
            if before and after:
                self.const += size
                continue
            if not users:
                continue
            k = len(self.t_size)
            mask = 0
            for u in users:
                mask |= 1 << u
                self.op_t[u].append(k)
            self.t_size.append(size)
            self.t_users.append(mask)
            self.t_close.append(not after)
            if before:
                self.open0 |= 1 << k
                self.open0_bytes += size
        self.free_mask = self._free_ops()

    def _free_ops(self) -> int:
        """Bitmask of ops that open no tensor and need no workspace (views, in-place writes).

        Running such an op as soon as it is ready never raises the peak: its own
        step holds only tensors that were open before it, and running it earlier
        only frees its inputs earlier. So the search runs every ready free op at
        once instead of branching on it, which removes most states of a graph
        full of views.
        """
        anc = [0] * self.m
        for v in range(self.m):  # the piece's current order is topological
            for u in self.piece.preds[v]:
                anc[v] |= anc[u] | (1 << u)
        free = 0
        for v in range(self.m):
            if self.piece.ws[v]:
                continue
            if all(self.open0 >> k & 1 or self.t_users[k] & anc[v] for k in self.op_t[v]):
                free |= 1 << v
        return free

    def _late(self) -> bool:
        """Past the CPU-time limit (load-independent), or past the wall-clock limit."""
        if time.process_time() - self.c0 > self.time_limit:
            return True
        return self.wall_limit is not None and time.perf_counter() - self.t0 > self.wall_limit

    def run(self, upper: int, beam: int | None = None) -> tuple[list[int], int] | None:
        """Least-peak order among those with peak < ``upper``, or None if there is none.

        With ``beam``, only the ``beam`` best states (least peak so far, then
        least open bytes) of each layer are kept: a quick heuristic whose answer
        is a valid order but not necessarily the best.
        """
        m = self.m
        pred_mask = self.pred_mask
        # per op: (bit, size, users mask if the tensor can be freed in the piece else 0)
        op_info = [[(1 << k, self.t_size[k], self.t_users[k] if self.t_close[k] else 0)
                    for k in self.op_t[v]] for v in range(m)]
        base = [self.const + w for w in self.piece.ws]
        succ: list[list[tuple[int, int]]] = [[] for _ in range(m)]  # (bit, pred mask) of successors
        for w in range(m):
            for u in self.piece.preds[w]:
                succ[u].append((1 << w, pred_mask[w]))
        full = (1 << m) - 1
        free = self.free_mask

        def step(S: int, v: int, val: int, omask: int, obytes: int, ready: int):
            """Run ``v`` after ``S``: (S', value, open mask, open bytes, ready mask)."""
            low = 1 << v
            S2 = S | low
            live, nom, nob = obytes, omask, obytes
            for bit, size, cm in op_info[v]:
                if not nom & bit:
                    live += size
                    nom |= bit
                    nob += size
                if cm and not cm & ~S2:
                    nom ^= bit
                    nob -= size
            val = max(val, base[v] + live)
            r2 = ready & ~low
            for wbit, pm in succ[v]:
                if not pm & ~S2:
                    r2 |= wbit
            return S2, val, nom, nob, r2

        def close(S: int, val: int, omask: int, obytes: int, ready: int, ran: list[int]):
            """Run every ready free op (appending them to ``ran``)."""
            rf = ready & free
            while rf:
                v = (rf & -rf).bit_length() - 1
                ran.append(v)
                S, val, omask, obytes, ready = step(S, v, val, omask, obytes, ready)
                rf = ready & free
            return S, val, omask, obytes, ready

        ready0 = 0
        for v in range(m):
            if not pred_mask[v]:
                ready0 |= 1 << v
        first: list[int] = []
        S0, v0, om0, ob0, rd0 = close(0, 0, self.open0, self.open0_bytes, ready0, first)
        if v0 >= upper:
            return None
        # state: S -> (best, open tensors mask, open bytes, ready ops mask)
        layer: dict[int, tuple[int, int, int, int]] = {S0: (v0, om0, ob0, rd0)}
        parents: list[dict[int, tuple[int, list[int]]]] = []
        while full not in layer:
            nxt: dict[int, tuple[int, int, int, int]] = {}
            par: dict[int, tuple[int, list[int]]] = {}
            get = nxt.get
            for ci, (S, (best, omask, obytes, ready)) in enumerate(layer.items()):
                if not ci & 1023 and (len(nxt) + self.n_states > self.max_states or self._late()):
                    raise _TooBig
                rest = ready & ~free
                while rest:
                    low = rest & -rest
                    rest ^= low
                    v = low.bit_length() - 1
                    S2, val, nom, nob, r2 = step(S, v, best, omask, obytes, ready)
                    if val >= upper:
                        continue
                    ran = [v]
                    if r2 & free:
                        S2, val, nom, nob, r2 = close(S2, val, nom, nob, r2, ran)
                        if val >= upper:
                            continue
                    old = get(S2)
                    if old is None or val < old[0]:
                        nxt[S2] = (val, nom, nob, r2)
                        par[S2] = (S, ran)
            self.n_states += len(nxt)
            if self.n_states > self.max_states or self._late():
                raise _TooBig
            if not nxt:
                return None
            if beam is not None and len(nxt) > beam:
                keep = sorted(nxt, key=lambda S: (nxt[S][0], nxt[S][2]))[:beam]
                nxt = {S: nxt[S] for S in keep}
            parents.append(par)
            layer = nxt
        best_val = layer[full][0]
        chunks = []
        S = full
        for par in reversed(parents):
            S, ran = par[S]
            chunks.append(ran)
        order = list(first)
        for ran in reversed(chunks):
            order.extend(ran)
        return order, best_val


def dp_order(piece: Piece, upper: int | None = None, max_states: int = 300_000,
             time_limit: float = 10.0) -> tuple[list[int], int] | None:
    """Optimal local order of ``piece``, or ``None`` if the search was too big.

    Parameters
    ----------
    piece : Piece
    upper : int, optional
        Incumbent peak (default: the piece's current order). Only strictly
        better orders are searched; if none exists the current order is returned.
    max_states : int
        Give up beyond this many states in total.
    time_limit : float
        Give up after this many CPU seconds (of this process).

    Returns
    -------
    (local_order, peak) or None
    """
    m = piece.size
    cur_peak = piece_peak(piece)
    upper = cur_peak if upper is None else min(upper, cur_peak)
    if m <= 1:
        return list(range(m)), cur_peak
    try:
        got = _DP(piece, max_states, time_limit).run(upper)
    except _TooBig:
        return None
    return got if got is not None else (list(range(m)), cur_peak)


def dp_search(piece: Piece, floor: int = 0, upper: int | None = None, max_states: int = 1_000_000,
              time_limit: float = 10.0, wall_limit: float | None = None) -> tuple[list[int], int, bool] | None:
    """Least-peak local order of ``piece``, searched upwards from a lower bound.

    Parameters
    ----------
    piece : Piece
    floor : int
        A lower bound on the piece's optimum (the cut bound, say): no order
        below it is looked for.
    upper : int, optional
        Incumbent peak (default: the piece's current order).
    max_states, time_limit :
        Budget shared by all the probes (``time_limit`` in CPU seconds of this
        process, so the result does not depend on the machine's load).
    wall_limit : float, optional
        Also give up after this many wall-clock seconds.

    Returns
    -------
    (local_order, peak, proved) or None
        ``proved``: the peak is the piece's optimum (given that ``floor`` is a
        true lower bound). When the budget runs out after an improvement was
        found, that improvement is returned with ``proved=False``; ``None``
        when it runs out with nothing better than the current order.
    """
    m = piece.size
    cur_peak = piece_peak(piece)
    upper = cur_peak if upper is None else min(upper, cur_peak)
    best: tuple[list[int], int] = (list(range(m)), cur_peak)
    if m <= 1 or upper <= floor:
        return best[0], best[1], True
    dp = _DP(piece, max_states, time_limit, wall_limit)
    try:
        # One probe at the floor: it prunes every state above it, so it is cheap,
        # and it settles the common case (optimum == cut bound). Otherwise one
        # full search below the incumbent. (A ladder of probes between the two
        # costs more when the pruning does not bite: each probe then explores
        # almost as many states as the full search.)
        got = dp.run(floor + 1)
        if got is None:
            # A beam search gives a good incumbent quickly; the exact search below
            # it then prunes far more than below a poor heuristic's peak.
            quick = dp.run(upper, beam=BEAM)
            if quick is not None:
                best, upper = quick, quick[1]
            got = dp.run(upper)
        if got is not None:
            best = got
    except _TooBig:
        if best[1] < cur_peak:
            return best[0], best[1], False
        return None
    return best[0], best[1], True


def graph_optimum(g: Graph, floor: int = 0, max_states: int = 1_000_000,
                  time_limit: float = 10.0) -> int | None:
    """The least peak (perfect packing, always-live bytes included) of any topological order of ``g``.

    Parameters
    ----------
    g : Graph
    floor : int
        A true lower bound on that least peak (the cut bound, say); it prunes the search.
    max_states, time_limit :
        The search's budget (as :func:`dp_search`; ``time_limit`` in CPU seconds).

    Returns
    -------
    int or None
        The optimum, proved by the exhaustive down-set search; None when the budget ran out first
        (wide graphs: the number of down-sets grows quickly with the width).
    """
    n = len(g.ops)
    if n == 0:
        return g.always_live_bytes
    got = dp_search(make_piece(LivenessIndex(g, list(range(n))), 0, n), floor=floor,
                    max_states=max_states, time_limit=time_limit)
    if got is None or not got[2]:
        return None
    return got[1]
