"""Weight-update scheduling (ROAM step 4).

Each optimizer update (``Op.kind == "update"``) is moved to run as soon as its
inputs are ready (right after the last of its dependencies, e.g. the op that
finishes its gradient), so the gradient dies early. If that lands the update on
the peak (its temporaries are big: about 2-3x the parameter for Adam) it is
delayed, at most ``delay_radius`` positions, to the position with the least
peak. Delaying further would keep gradients alive longer, so the radius is
small.

``DEFAULT_DELAY_RADIUS = 8`` positions: about two layers' worth of backward ops
in a transformer block graph, enough to step over a local activation peak.
"""
from __future__ import annotations

from typing import Sequence

from ..graph.model import Graph

__all__ = ["schedule_updates", "DEFAULT_DELAY_RADIUS"]

DEFAULT_DELAY_RADIUS = 8


def _asap_updates(g: Graph, order: Sequence[int]) -> list[int]:
    """``order`` with every update op moved right after its last dependency."""
    upd = {v for v in order if g.ops[v].kind == "update"}
    if not upd:
        return list(order)
    preds, succ = g.predecessors, g.successors
    placed = set()
    out: list[int] = []
    pending = {v: sum(1 for u in preds[v]) for v in upd}

    def emit(v: int) -> None:
        out.append(v)
        placed.add(v)
        for w in succ[v]:
            if w in pending:
                pending[w] -= 1
                if pending[w] == 0 and w not in placed:
                    emit(w)

    for v in upd:
        if pending[v] == 0:
            emit(v)
    for v in order:
        if v in upd:
            continue
        # a non-update op that depends on an update not yet placed: place it first
        for u in preds[v]:
            if u in upd and u not in placed:
                emit(u)
        emit(v)
    for v in upd:
        if v not in placed:
            emit(v)
    return out


def schedule_updates(g: Graph, order: Sequence[int], delay_radius: int = DEFAULT_DELAY_RADIUS,
                     rounds: int = 4) -> list[int]:
    """Run updates as soon as possible; delay those that land on the peak.

    Parameters
    ----------
    g : Graph
    order : sequence of int
        A valid order.
    delay_radius : int
        Maximum number of positions an update is delayed past its earliest slot.
    rounds : int
        Rounds of "delay the updates at the peak".

    Returns
    -------
    list of int
        A valid order (``order`` itself if there are no update ops).
    """
    out = _asap_updates(g, order)
    try:
        g.check_order(out)
    except Exception:  # noqa: BLE001 -- never worse than the input
        return list(order)
    if delay_radius <= 0:
        return out
    succ = g.successors
    for _ in range(rounds):
        prof = g.live_profile(out)
        pk = max(prof)
        at_peak = [i for i, p in enumerate(prof) if p == pk and g.ops[out[i]].kind == "update"]
        if not at_peak:
            break
        improved = False
        for i in sorted(at_peak, reverse=True):
            v = out[i]
            best, best_order = pk, None
            for d in range(1, delay_radius + 1):
                j = i + d
                if j >= len(out) or out[j] in succ[v]:
                    break
                cand = out[:i] + out[i + 1:j + 1] + [v] + out[j + 1:]
                p = g.peak(cand)
                if p < best:
                    best, best_order = p, cand
            if best_order is not None:
                out = best_order
                improved = True
                break
        if not improved:
            break
    return out
