"""Exact min-peak ordering of a piece by dynamic programming over down-sets.

The live bytes while op ``v`` runs depend only on the *set* ``S`` of ops run so
far (``v`` included), not on their order. So the least peak of an order of a
down-closed set ``S`` is

    best(S) = min over maximal v in S of max(best(S - v), live(S, v)),

and ``best(all ops)`` is the optimum. States are bitmasks, expanded layer by
layer (``|S| = k``), pruned by an incumbent upper bound. The number of
down-sets grows quickly with the width of the graph, so the search gives up
(returns ``None``) beyond ``max_states`` or ``time_limit``; the caller then uses
the MIP (:mod:`roam_tvm.order.mip`) or keeps its heuristic.
"""
from __future__ import annotations

import time

from .piece import Piece, piece_peak

__all__ = ["dp_order"]


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
        Give up after this many seconds.

    Returns
    -------
    (local_order, peak) or None
    """
    t0 = time.perf_counter()
    m = piece.size
    cur_peak = piece_peak(piece)
    upper = cur_peak if upper is None else min(upper, cur_peak)
    if m <= 1:
        return list(range(m)), cur_peak
    pred_mask = [0] * m
    for v, ps in enumerate(piece.preds):
        for u in ps:
            pred_mask[v] |= 1 << u
    # per tensor: size, users mask, closes-able (not needed after)
    t_size, t_users, t_close = [], [], []
    op_t: list[list[int]] = [[] for _ in range(m)]
    open0 = 0
    open0_bytes = 0
    const = piece.const
    for size, users, before, after in piece.tensors:
        if before and after:
            const += size
            continue
        if not users:
            continue
        k = len(t_size)
        mask = 0
        for u in users:
            mask |= 1 << u
            op_t[u].append(k)
        t_size.append(size)
        t_users.append(mask)
        t_close.append(not after)
        if before:
            open0 |= 1 << k
            open0_bytes += size
    full = (1 << m) - 1
    # state: S -> (best, open_mask, open_bytes, parent_S, last_op)
    layer: dict[int, tuple[int, int, int]] = {0: (0, open0, open0_bytes)}
    parents: list[dict[int, tuple[int, int]]] = []
    n_states = 1
    for _k in range(m):
        nxt: dict[int, tuple[int, int, int]] = {}
        par: dict[int, tuple[int, int]] = {}
        for S, (best, omask, obytes) in layer.items():
            rest = full & ~S
            while rest:
                low = rest & -rest
                v = low.bit_length() - 1
                rest ^= low
                if pred_mask[v] & ~S:
                    continue
                S2 = S | low
                live = obytes
                nom, nob = omask, obytes
                for k in op_t[v]:
                    bit = 1 << k
                    if not nom & bit:
                        live += t_size[k]
                        nom |= bit
                        nob += t_size[k]
                    if t_close[k] and not t_users[k] & ~S2:
                        nom &= ~bit
                        nob -= t_size[k]
                val = max(best, const + live + piece.ws[v])
                if val >= upper:
                    continue
                old = nxt.get(S2)
                if old is None or val < old[0]:
                    nxt[S2] = (val, nom, nob)
                    par[S2] = (S, v)
        n_states += len(nxt)
        if n_states > max_states or time.perf_counter() - t0 > time_limit:
            return None
        if not nxt:
            return list(range(m)), cur_peak  # nothing strictly better than the incumbent
        parents.append(par)
        layer = nxt
    best_val = layer[full][0]
    order = []
    S = full
    for par in reversed(parents):
        S, v = par[S]
        order.append(v)
    order.reverse()
    return order, best_val
