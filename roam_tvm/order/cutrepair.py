"""Cut-guided repair: long-distance moves that window pieces cannot make.

The ``cut`` bound at op ``j`` comes from a min cut whose source side S is a set
of ops that could all run before ``j`` while leaving the fewest bytes live at
``j``. Running exactly S (in the current relative order), then ``j``, then the
rest (in the current relative order) is a valid topological order — S holds
``j``'s ancestors and is closed under predecessors — and it makes the live
bytes at ``j`` equal to the bound there. Applied at the current peak step and
repeated while the peak drops, this pulls ops (typically weight-gradient
kernels and their updates) across long distances that fixed windows never
span. No TVM in here.
"""
from __future__ import annotations

import time
from typing import Sequence

from ..graph.bounds import _cut_data
from ..graph.model import Graph


def cut_guided_repair(g: Graph, order: Sequence[int], lower_bound: int, deadline: float,
                      max_rounds: int = 200) -> tuple[list[int], int, int]:
    """Repair ``order`` at its peak steps; returns ``(order, peak, rounds that improved)``.

    Stops at ``lower_bound``, at ``deadline`` (``time.perf_counter()`` seconds),
    after ``max_rounds``, or when a round does not lower the peak.
    """
    order = list(order)
    peak = g.peak(order)
    data = _cut_data(g)
    improved = 0
    for _ in range(max_rounds):
        if peak <= lower_bound or time.perf_counter() >= deadline:
            break
        prof = g.live_profile(order)
        j = order[max(range(len(order)), key=prof.__getitem__)]
        prefix: list[int] = []
        data.cut_at(j, prefix)
        before = set(prefix)
        before.discard(j)
        cand = [o for o in order if o in before] + [j] + [o for o in order if o not in before and o != j]
        cand_peak = g.peak(cand)
        if cand_peak >= peak:
            break
        order, peak = cand, cand_peak
        improved += 1
    return order, peak, improved
