"""Cut-guided repair: long-distance moves that window pieces cannot make.

The ``cut`` bound at op ``j`` comes from a min cut whose source side S is a set
of ops that could all run before ``j`` while leaving the fewest bytes live at
``j``. Running exactly S (in the current relative order), then ``j``, then the
rest (in the current relative order) is a valid topological order -- S holds
``j``'s ancestors and is closed under predecessors -- and it makes the live
bytes at ``j`` equal to the bound there. This pulls ops (typically
weight-gradient kernels and their updates) across long distances that fixed
windows never span.

One such move alone often raises the peak elsewhere: in an unrolled RNN, two
weight-gradient sums each want the other one's operands gone, so fixing one
undoes the other. The repair therefore keeps the order as a sequence of
*blocks* (consecutive runs of ops). Splitting block ``B`` at its op ``j`` with a
min cut that keeps the other blocks where they are (ops of earlier blocks
forced before ``j``, of later blocks after it) changes the live bytes only at
positions inside ``B``: every tensor that crosses ``B``'s boundary is live
there whatever the order inside. Splits are made at the current peak, chained
a few times (``lookahead``) when one split alone moves the peak to another op
of the same block, and kept only when the peak (then the number of steps at
the peak) drops. When the peak op is a block of its own, the blocks around it
are merged back and split again, so an early split never locks the repair in.
No TVM in here.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ..graph.bounds import _cut_data, _CutData
from ..graph.model import Graph

__all__ = ["cut_guided_repair"]

Blocks = list[list[int]]


def _flat(blocks: Blocks) -> list[int]:
    return [o for b in blocks for o in b]


def _score(g: Graph, order: list[int]) -> tuple[tuple[int, int], list[int]]:
    """((peak, steps at the peak), live profile): what a repair must lower."""
    prof = g.live_profile(order)
    pk = max(prof)
    return (pk, prof.count(pk)), prof


def _locate(blocks: Blocks, pos: int) -> int:
    """Index of the block that holds position ``pos`` of the flattened order."""
    acc = 0
    for k, b in enumerate(blocks):
        acc += len(b)
        if pos < acc:
            return k
    raise IndexError(pos)


def _split(data: _CutData, n: int, blocks: Blocks, k: int, j: int) -> Blocks:
    """Split block ``k`` at op ``j`` by the min cut that leaves the other blocks in place."""
    fixed = np.ones(n, dtype=np.int8)
    for b in blocks[:k]:
        fixed[b] = 0
    for b in blocks[k + 1:]:
        fixed[b] = 2
    prefix: list[int] = []
    data.cut_at(j, prefix, fixed)
    before = set(prefix)
    head = [o for o in blocks[k] if o in before and o != j]
    tail = [o for o in blocks[k] if o not in before and o != j]
    return blocks[:k] + [b for b in (head, [j], tail) if b] + blocks[k + 1:]


def _chain(g: Graph, data: _CutData, blocks: Blocks, prof: list[int], score: tuple[int, int],
           lookahead: int):
    """Up to ``lookahead`` splits, each at the then peak; the first that lowers ``score``."""
    n = len(g.ops)
    for _ in range(lookahead):
        pos = max(range(len(prof)), key=prof.__getitem__)
        k = _locate(blocks, pos)
        if len(blocks[k]) == 1:
            return None
        blocks = _split(data, n, blocks, k, blocks[k][pos - sum(len(b) for b in blocks[:k])])
        new, prof = _score(g, _flat(blocks))
        if new < score:
            return blocks, new, prof
    return None


def cut_guided_repair(g: Graph, order: Sequence[int], lower_bound: int, deadline: float,
                      max_rounds: int = 400, lookahead: int = 8,
                      radius: int = 4) -> tuple[list[int], int, int]:
    """Repair ``order`` at its peak steps; returns ``(order, peak, rounds that improved)``.

    Parameters
    ----------
    g : Graph
    order : sequence of int
        A valid order.
    lower_bound : int
        Stop once the peak reaches it.
    deadline : float
        ``time.perf_counter()`` seconds after which no new round starts.
    max_rounds : int
        Rounds that improved, at most.
    lookahead : int
        Splits chained in one round before giving up on it.
    radius : int
        When stuck, merge up to this many blocks on each side of the peak op's
        block and try again.

    Returns
    -------
    order : list of int
        A valid order whose peak is not above ``order``'s.
    peak : int
    rounds : int
    """
    data = _cut_data(g)
    blocks: Blocks = [list(order)]
    score, prof = _score(g, blocks[0])
    rounds = 0
    while score[0] > lower_bound and rounds < max_rounds and time.perf_counter() < deadline:
        got = _chain(g, data, blocks, prof, score, lookahead)
        if got is None:
            k = _locate(blocks, max(range(len(prof)), key=prof.__getitem__))
            for r in range(1, radius + 1):
                lo, hi = max(0, k - r), min(len(blocks), k + r + 1)
                merged = blocks[:lo] + [_flat(blocks[lo:hi])] + blocks[hi:]
                got = _chain(g, data, merged, prof, score, lookahead)
                if got is not None or (lo == 0 and hi == len(blocks)):
                    break
        if got is None:
            break
        blocks, score, prof = got
        rounds += 1
    return _flat(blocks), score[0], rounds
