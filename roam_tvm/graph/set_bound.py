"""The first-of-set lower bound: of several unrelated ops, one runs first (no TVM).

``cut`` (:mod:`roam_tvm.graph.bounds`) lets each op choose its own best set of
ops to run before it. In an unrolled RNN every weight's gradient is a sum over
the time steps, held in a weight-sized accumulator; each accumulator, taken
alone, is best created last, once the others have consumed the per-step
gradients they share with it. No order creates them all last.

For ops ``A = {a_1, ..., a_k}``, no two of which are ancestor and descendant,
every order runs one of them, ``a_i``, before the others, and so before every
descendant of the others. The live bytes at ``a_i`` are then at least the cut at
``a_i`` with those descendants forced after it. The least of these ``k`` cuts is
a lower bound on the peak of every order (:func:`first_of_set`; the pair bound,
:func:`~roam_tvm.graph.pair_bound.pair_cut_bound`, is the two-op case with one more
constraint, and draws its ops from the largest cuts instead). Going on: every
order runs the set in some sequence, and at its ``p``-th op the earlier ones and
their ancestors have run while the later ones and their descendants have not;
the least, over sequences, of the largest such cut is a lower bound too
(:func:`ordered_set_bound`, a dynamic program over the subsets already run).

The sets are drawn from the ops that allocate the most bytes and have few
descendants, so that they could run late (an RNN's accumulators, not its forward
projections, which are as large but have the rest of the step below them). All unrelated
pairs of the ``top`` such ops are tried, then each of the best sets is grown by
one op at a time while the bound rises.
"""
from __future__ import annotations

import time
from itertools import combinations

import numpy as np

from .bounds import CutProfile, _cut_data, forced_cut
from .model import Graph

__all__ = ["allocating_ops", "movable_allocators", "first_of_set", "ordered_set_bound", "set_cut_bound"]


def allocating_ops(g: Graph, top: int) -> list[int]:
    """The ``top`` ops whose outputs take the most newly allocated bytes, largest first."""
    made = np.zeros(len(g.ops), dtype=np.int64)
    alloc = set(g.allocated)
    for j, op in enumerate(g.ops):
        made[j] = sum(g.tensors[t].size for t in op.outputs if t in alloc and g.roots[t] == t)
    ranked = [int(j) for j in np.argsort(-made, kind="stable") if made[j] > 0]
    return ranked[:top]


def _at_most_descendants(succ: list, j: int, few: int) -> bool:
    """``j`` has at most ``few`` descendants (a search that stops once it has seen more)."""
    seen = {j}
    stack = [j]
    while stack:
        for w in succ[stack.pop()]:
            if w not in seen:
                if len(seen) > few:
                    return False
                seen.add(w)
                stack.append(w)
    return True


def movable_allocators(g: Graph, top: int, share: float = 0.1, examined: int = 512) -> list[int]:
    """The ``top`` largest allocators with few descendants (at most ``share`` of the ops),
    among the ``examined`` largest: those that could run late in an order, as an
    accumulator can and a forward projection, with the rest of the step below it, cannot."""
    few = max(4, int(share * len(g.ops)))
    succ = g.successors
    return [j for j in allocating_ops(g, examined) if _at_most_descendants(succ, j, few)][:top]


def _require_unrelated(g: Graph, ops: list[int], descendants: dict[int, np.ndarray]) -> None:
    for a in ops:
        for b in ops:
            if a != b and np.isin(b, descendants[a]):
                raise ValueError(f"op {b} ({g.ops[b].name}) is a descendant of op {a} ({g.ops[a].name}); "
                                 "the ops of a set bound must be pairwise unrelated")


def first_of_set(g: Graph, ops: list[int], descendants: dict[int, np.ndarray]) -> int:
    """``min_i`` of the cut at ``ops[i]`` with the descendants of the other ops forced after it.

    ``ops`` must be pairwise unrelated (neither an ancestor of another); the value,
    always-live bytes included, bounds the peak of every order (module docstring).
    """
    _require_unrelated(g, ops, descendants)
    return int(min(forced_cut(g, i, after=[descendants[j] for j in ops if j != i]) for i in ops))


def ordered_set_bound(g: Graph, ops: list[int], descendants: dict[int, np.ndarray],
                      ancestors: dict[int, np.ndarray]) -> int:
    """``min`` over sequences of ``ops`` of the largest cut at each op, with the ops before it
    (and their ancestors) forced before it and those after it (and their descendants) after.

    ``ops`` must be pairwise unrelated; ``descendants`` and ``ancestors`` include the op
    itself. At least :func:`first_of_set` of the same ops; ``len(ops) * 2 ** (len(ops) - 1)``
    min cuts.
    """
    _require_unrelated(g, ops, descendants)
    cuts: dict[tuple[int, frozenset], int] = {}
    best_rest: dict[frozenset, int] = {frozenset(ops): 0}

    def cut(a: int, done: frozenset) -> int:
        if (a, done) not in cuts:
            cuts[(a, done)] = forced_cut(g, a, before=[ancestors[q] for q in done],
                                         after=[descendants[r] for r in ops if r != a and r not in done])
        return cuts[(a, done)]

    def rest(done: frozenset) -> int:  # the least largest cut over sequences of what is left
        if done not in best_rest:
            best_rest[done] = min(max(cut(a, done), rest(done | {a})) for a in ops if a not in done)
        return best_rest[done]

    return int(rest(frozenset()))


def set_cut_bound(g: Graph, profile: CutProfile, top: int = 24, grow_from: int = 3,
                  max_size: int = 6, time_limit: float | None = None) -> int:
    """A lower bound at least ``profile.bound``, from sets of unrelated allocating ops.

    Parameters
    ----------
    g : Graph
    profile : CutProfile
        From :func:`~roam_tvm.graph.bounds.cut_profile`; its bound is the floor.
    top : int
        Candidate ops: the ``top`` largest allocators that could run late
        (:func:`movable_allocators`).
    grow_from : int
        The best pairs grown by one op at a time while the bound rises.
    max_size : int
        Largest set tried.
    time_limit : float, optional
        Seconds; sets not reached are skipped (the result stays valid).

    Returns
    -------
    int
        Bytes, always-live included.
    """
    t0 = time.perf_counter()
    best = profile.bound
    cands = movable_allocators(g, top)
    if len(cands) < 2:
        return best
    data = _cut_data(g)
    anc, desc = data.relatives(cands)
    below = {j: set(desc[j].tolist()) for j in cands}

    def unrelated(a: int, b: int) -> bool:
        return a not in below[b] and b not in below[a]

    def out_of_time() -> bool:
        return time_limit is not None and time.perf_counter() - t0 > time_limit

    pairs = []
    for a, b in combinations(cands, 2):
        if out_of_time():
            return best
        if unrelated(a, b):
            v = first_of_set(g, [a, b], desc)
            pairs.append((v, [a, b]))
            best = max(best, v)
    pairs.sort(key=lambda p: -p[0])
    grown = []
    for value, chosen in pairs[:grow_from]:
        while len(chosen) < max_size:
            step = None
            for c in cands:
                if out_of_time():
                    return best
                if c in chosen or not all(unrelated(c, s) for s in chosen):
                    continue
                v = first_of_set(g, chosen + [c], desc)
                if v > value and (step is None or v > step[0]):
                    step = (v, c)
            if step is None:
                break
            value = step[0]
            chosen = chosen + [step[1]]
            best = max(best, value)
        grown.append(chosen)
    # the largest unrelated allocators, greedily, as one more set
    largest: list[int] = []
    for c in cands:
        if len(largest) < max_size and all(unrelated(c, s) for s in largest):
            largest.append(c)
    for chosen in grown + ([largest] if len(largest) >= 2 else []):
        if out_of_time():
            break
        best = max(best, ordered_set_bound(g, chosen, desc, anc))
    return best
