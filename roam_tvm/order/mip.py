"""Per-piece order MIP in cvxpy, solved by HiGHS (``cp.HIGHS``; never Gurobi).

Formulation (a cumulative variant of ROAM's created/preserved binaries)
------------------------------------------------------------------------
For each op ``o`` of the piece and each step ``t`` of its window
``[asap_o, alap_o)`` a binary ``Y[o,t]`` = "``o`` has run by step ``t``"
(``Y = 0`` before ``asap_o``, ``1`` from ``alap_o`` on). The op runs at ``t``
iff ``Y[o,t] - Y[o,t-1] = 1`` -- that difference is ROAM's *created* variable.

* ``Y[o,t] <= Y[o,t+1]``; ``sum_o Y[o,t] = t + 1`` (one op per step);
* dependencies ``u -> v``: ``Y[v,t] <= Y[u,t-1]``;
* liveness (ROAM's *preserved*, continuous in [0, 1]): for a tensor with
  possible first users ``F`` and users ``U``:
  ``L[e,t] >= Y[f,t] - Y[w,t-1]`` for ``f`` in ``F``, ``w`` in ``U``
  (``Y[f,t] := 1`` if it was created before the piece; ``- Y[w,t-1]`` dropped
  if it is needed after the piece);
* ``peak >= const + sum_e size_e L[e,t] + sum_o ws_o (Y[o,t] - Y[o,t-1])``;
* minimise ``peak``.

Sizes and workspaces are divided by their GCD. ``peak`` is bounded above by the
incumbent's peak (cvxpy's HiGHS interface ignores ``Variable.value`` as a MIP
start -- it only re-uses a cached solution of the *same* problem -- so the
incumbent is passed as a constraint instead) and below by ``floor`` (a known
lower bound such as the cut bound or the peak outside the piece), so the solver
stops as soon as it reaches it.

Any solver failure, time-out without a solution, or a solution that does not
decode to a valid order returns ``None``: the caller keeps its heuristic order.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .piece import Piece, local_windows, piece_peak

__all__ = ["solve_piece", "PieceResult"]


@dataclass
class PieceResult:
    """Outcome of one piece solve.

    Attributes
    ----------
    local_order : list of int
        Best local order found (the input order if nothing better).
    peak : int
        Its peak inside the piece.
    status : str
        ``"optimal"`` (proved, or reached ``floor``), ``"time_limit"``,
        ``"trivial"`` (nothing to solve), ``"fallback"`` (solver failed).
    seconds : float
    """

    local_order: list[int]
    peak: int
    status: str
    seconds: float


def _gcd(values) -> int:
    g = 0
    for v in values:
        g = math.gcd(g, int(v))
    return max(g, 1)


def solve_piece(piece: Piece, time_limit: float = 10.0, floor: int = 0,
                verbose: bool = False) -> PieceResult:
    """Optimally reorder the ops of one piece (within ``time_limit`` seconds).

    Parameters
    ----------
    piece : Piece
    time_limit : float
        HiGHS time limit in seconds (> 0).
    floor : int
        A lower bound on the useful peak: reaching it counts as optimal.
    verbose : bool
        HiGHS log to the console.

    Returns
    -------
    PieceResult
        Never raises on solver trouble; falls back to the input order.
    """
    t0 = time.perf_counter()
    m = piece.size
    ident = list(range(m))
    cur = piece_peak(piece)
    if m <= 1 or cur <= floor:
        return PieceResult(ident, cur, "trivial", time.perf_counter() - t0)
    try:
        res = _solve(piece, time_limit, floor, cur, verbose)
    except Exception as e:  # noqa: BLE001 -- solver trouble must never crash planning
        warnings.warn(f"order MIP failed ({type(e).__name__}: {e}); keeping heuristic order")
        res = None
    el = time.perf_counter() - t0
    if res is None:  # no incumbent: time-out before a solution, or solver error
        return PieceResult(ident, cur, "time_limit" if el >= 0.9 * time_limit else "fallback", el)
    order, status = res
    if sorted(order) != ident or not _valid(piece, order):
        return PieceResult(ident, cur, "fallback", el)
    pk = piece_peak(piece, order)
    if pk > cur:
        return PieceResult(ident, cur, "time_limit", el)
    if pk <= floor:
        status = "optimal"
    return PieceResult(order, pk, status, time.perf_counter() - t0)


def _valid(piece: Piece, order) -> bool:
    pos = {o: i for i, o in enumerate(order)}
    return all(pos[u] < pos[v] for v, ps in enumerate(piece.preds) for u in ps)


def _solve(piece: Piece, time_limit: float, floor: int, upper: int, verbose: bool):
    import cvxpy as cp
    import scipy.sparse as sp

    m = piece.size
    asap, alap = local_windows(piece)
    unit = _gcd([s for s, *_ in piece.tensors] + [w for w in piece.ws if w])
    # Y variables
    var: dict[tuple[int, int], int] = {}
    for o in range(m):
        for t in range(asap[o], alap[o]):
            var[(o, t)] = len(var)
    nb = len(var)

    def Y(o: int, t: int):
        """(constant, var index or -1) of Y[o,t]."""
        if t < asap[o]:
            return 0, -1
        if t >= alap[o]:
            return 1, -1
        return 0, var[(o, t)]

    rows_b, cols_b, vals_b = [], [], []   # binary part of A_ub
    rows_c, cols_c, vals_c = [], [], []   # continuous part of A_ub
    rhs: list[float] = []

    def add_row(bin_terms, cont_terms, const_lhs, bound):
        """sum(bin) + sum(cont) + const_lhs <= bound."""
        r = len(rhs)
        for c, v in bin_terms:
            rows_b.append(r); cols_b.append(c); vals_b.append(v)
        for c, v in cont_terms:
            rows_c.append(r); cols_c.append(c); vals_c.append(v)
        rhs.append(bound - const_lhs)

    def lin(terms):
        """Split [(coef, (o,t))] into (binary terms, constant)."""
        bt, k = [], 0.0
        for coef, (o, t) in terms:
            c0, vi = Y(o, t)
            if vi < 0:
                k += coef * c0
            else:
                bt.append((vi, coef))
        return bt, k

    # monotone
    for (o, t), vi in var.items():
        if t + 1 < alap[o]:
            add_row([(vi, 1.0), (var[(o, t + 1)], -1.0)], [], 0.0, 0.0)
    # dependencies: Y[v,t] - Y[u,t-1] <= 0
    for v, ps in enumerate(piece.preds):
        for u in ps:
            for t in range(asap[v], alap[v]):
                bt, k = lin([(1.0, (v, t)), (-1.0, (u, t - 1))])
                if bt:
                    add_row(bt, [], k, 0.0)
    # one op per step: equality as two inequalities on the binary part
    eq_r, eq_c, eq_v, eq_b = [], [], [], []
    for t in range(m):
        bt, k = lin([(1.0, (o, t)) for o in range(m) if asap[o] <= t < alap[o] or t >= alap[o]])
        if bt:
            r = len(eq_b)
            for c, v in bt:
                eq_r.append(r); eq_c.append(c); eq_v.append(v)
            eq_b.append(t + 1 - k)
    # liveness
    anc = _ancestor_sets(piece)
    nl = 0
    live_terms: list[list[tuple[int, float]]] = [[] for _ in range(m)]  # per step: (live var, size)
    const_t = [float(piece.const) / unit] * m
    for size, users, before, after in piece.tensors:
        s = size / unit
        if before and after:
            for t in range(m):
                const_t[t] += s
            continue
        if not users:
            continue
        us = set(users)
        firsts = [u for u in users if not (anc[u] & us)] if not before else [None]
        lo_t = 0 if before else min(asap[f] for f in firsts)
        hi_t = m - 1 if after else max(alap[w] for w in users)
        for t in range(lo_t, hi_t + 1):
            li = nl
            nl += 1
            live_terms[t].append((li, s))
            for f in firsts:
                for w in ([None] if after else users):
                    terms = []
                    if f is not None:
                        terms.append((1.0, (f, t)))
                    if w is not None:
                        terms.append((-1.0, (w, t - 1)))
                    bt, k = lin(terms)
                    if f is None:
                        k += 1.0
                    # L >= k + bt  <=>  bt + k - L <= 0
                    if not bt and k <= 0:
                        continue
                    add_row(bt, [(li, -1.0)], k, 0.0)
    pk = nl  # index of peak in the continuous vector
    for t in range(m):
        terms = []
        for o in range(m):
            if piece.ws[o]:
                w = piece.ws[o] / unit
                terms += [(w, (o, t)), (-w, (o, t - 1))]
        bt, k = lin(terms)
        add_row(bt, [(li, s) for li, s in live_terms[t]] + [(pk, -1.0)], k + const_t[t], 0.0)
    nc = nl + 1
    nr = len(rhs)
    A_b = sp.csr_matrix((vals_b, (rows_b, cols_b)), shape=(nr, max(nb, 1)))
    A_c = sp.csr_matrix((vals_c, (rows_c, cols_c)), shape=(nr, nc))
    yb = cp.Variable(max(nb, 1), boolean=True)
    zc = cp.Variable(nc)
    cons = [A_b @ yb + A_c @ zc <= np.array(rhs), zc[:nl] >= 0, zc[:nl] <= 1,
            zc[pk] <= upper / unit, zc[pk] >= floor / unit]
    if eq_b:
        A_e = sp.csr_matrix((eq_v, (eq_r, eq_c)), shape=(len(eq_b), max(nb, 1)))
        cons.append(A_e @ yb == np.array(eq_b))
    prob = cp.Problem(cp.Minimize(zc[pk]), cons)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prob.solve(solver=cp.HIGHS, verbose=verbose, time_limit=float(time_limit), threads=1,
                   mip_rel_gap=1e-6)
    if yb.value is None:
        return None
    y = np.asarray(yb.value).ravel()
    posf = []
    for o in range(m):
        p = asap[o] + sum(1 for t in range(asap[o], alap[o]) if y[var[(o, t)]] < 0.5)
        posf.append(p)
    order = sorted(range(m), key=lambda o: (posf[o], o))
    status = "optimal" if prob.status == cp.OPTIMAL else "time_limit"
    return order, status


def _ancestor_sets(piece: Piece) -> list[set[int]]:
    out: list[set[int]] = []
    for v in range(piece.size):
        s: set[int] = set()
        for u in piece.preds[v]:
            s.add(u)
            s |= out[u]
        out.append(s)
    return out
