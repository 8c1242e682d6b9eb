"""Big-M non-overlap MIP for a (sub)problem, in cvxpy with HiGHS (never Gurobi).

Offsets are integers in units of the common alignment ``a``. For each pair of
buffers whose lifespans overlap, a binary ``z`` says which one is below:
``a*x_i + s_i <= a*x_j + M*(1 - z)`` and ``a*x_j + s_j <= a*x_i + M*z``.
The objective is the height ``H >= a*x_i + s_i``. A heuristic solution gives
``M``, the bound ``H <= UB`` and the starting point. Any failure (solver error,
time-out without an incumbent, an invalid answer) falls back to the heuristic.
"""
from __future__ import annotations

import time

import numpy as np

from .heuristics import Arrays, best_heuristic
from .problem import Problem, Solution
from .validate import is_valid

MAX_PAIRS = 20000


def solve_mip(problem: Problem, time_limit: float = 10.0, warm: Solution | None = None,
              max_pairs: int = MAX_PAIRS, verbose: bool = False) -> Solution:
    """Minimise the height with a big-M MIP; never raises, never returns an invalid solution."""
    t0 = time.perf_counter()
    arr = Arrays(problem)
    if warm is None or not is_valid(problem, warm):
        warm = best_heuristic(problem)
    try:
        sol = _solve(problem, arr, warm, time_limit, max_pairs, verbose)
    except Exception as e:  # noqa: BLE001 - any solver failure falls back
        warm.stats["mip"] = f"failed: {type(e).__name__}: {e}"
        return warm
    if sol is None or sol.height >= warm.height or not is_valid(problem, sol):
        warm.stats.setdefault("mip", "no improvement")
        return warm
    sol.stats["seconds"] = time.perf_counter() - t0
    return sol


def _solve(problem: Problem, arr: Arrays, warm: Solution, time_limit: float, max_pairs: int,
           verbose: bool) -> Solution | None:
    import cvxpy as cp

    idx = np.nonzero(arr.active)[0]
    n = len(idx)
    if n <= 1:
        return None
    lo, up, sz, al = arr.lower[idx], arr.upper[idx], arr.size[idx], arr.align[idx]
    a = int(np.lcm.reduce(al)) if n else 1
    # Common unit: the alignment; scale sizes so numbers stay small.
    ov = (lo[:, None] < up[None, :]) & (lo[None, :] < up[:, None])
    pi, pj = np.nonzero(np.triu(ov, 1))
    if len(pi) > max_pairs:
        return None
    ub = warm.height
    big = ub  # any offset + size <= UB
    x = cp.Variable(n, integer=True)
    z = cp.Variable(len(pi), boolean=True) if len(pi) else None
    H = cp.Variable()
    cons = [x >= 0, a * x + sz <= H, H <= ub]
    if z is not None:
        cons += [a * x[pi] + sz[pi] <= a * x[pj] + big * (1 - z),
                 a * x[pj] + sz[pj] <= a * x[pi] + big * z]
    warm_offs = np.array([warm.offsets[problem.buffers[i].id] for i in idx], np.int64)
    if np.all(warm_offs % a == 0):
        x.value = warm_offs // a
        if z is not None:
            z.value = (warm_offs[pi] < warm_offs[pj]).astype(float)
        H.value = float(ub)
    prob = cp.Problem(cp.Minimize(H), cons)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "may be inaccurate" on time-outs; the result is validated anyway
        prob.solve(solver=cp.HIGHS, verbose=verbose, warm_start=True,
                   time_limit=max(float(time_limit), 0.1), mip_rel_gap=0.0)
    if x.value is None:
        return None
    xv = np.rint(x.value).astype(np.int64) * a
    offs = np.zeros(arr.n, np.int64)
    offs[idx] = xv
    sol = arr.solution(offs, "mip")
    sol.stats["status"] = prob.status
    return sol
