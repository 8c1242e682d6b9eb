"""Sibling moves: recompute every root made from one dead input at once (no TVM).

A plain :func:`~roam_tvm.remat.moves.split` of a root ``r`` keeps the inputs
of ``r``'s producer alive until the copy runs. When such an input ``x`` is
dead at the peak step, that trades ``r`` for ``x``; of the same size, nothing
is gained, so the greedy path never takes the move. But ``x`` often feeds
several roots that all live across the peak: a transformer's layer norm input
``x`` makes both the normalised output (kept for the next matmul's weight
gradient) and ``x - mean`` (kept for the norm's own backward), two tensors of
``x``'s size. Recomputing both from ``x`` keeps one where there were two.

:func:`sibling_groups` finds, at one peak step, the candidate roots whose
producers read one input dead there; :func:`group_split` applies the plain
splits one after the other (each on the state the previous one built), so the
result is an ordinary state of the path, its peak counted on it.
"""
from __future__ import annotations

from .moves import Context, split
from .state import State, liveness

__all__ = ["sibling_groups", "group_split", "group_options"]


def sibling_groups(ctx: Context, cands: list[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    """``(s, roots)``: two or more candidate roots at step ``s`` whose producers read one input
    that no op uses at or after ``s`` (an allocated root), largest groups first."""
    lv = ctx.lv
    by_input: dict[tuple[int, int], list[int]] = {}
    for r, s in cands:
        p = ctx.st.ops[ctx.producer[r]]
        for x in dict.fromkeys(p.inputs):
            root = lv.root[x]
            users = lv.users.get(root)
            if users and users[-1] < s and root not in lv.pinned:
                by_input.setdefault((s, root), []).append(r)
    groups = {(s, tuple(dict.fromkeys(rs))) for (s, _), rs in by_input.items()}  # one per root set
    groups = [(s, list(rs)) for s, rs in groups if len(rs) > 1]
    return sorted(groups, key=lambda g: (-sum(ctx.st.tensors[r].size for r in g[1]), g[0], g[1]))


def group_split(ctx: Context, s: int, roots: list[int], costs: list[float]) -> State | None:
    """The state with each of ``roots`` recomputed (plainly) for its users after step ``s``;
    None when one of the splits is not possible."""
    st = ctx.st
    for r in roots:
        nst = split(ctx, r, s, costs)
        if nst is None:
            return None
        # copies go after s (before each root's first late user), so s keeps its position
        ctx, st = Context(nst, liveness(nst, st)), nst
    return st


def group_options(ctx: Context, cands: list[tuple[int, int]], costs: list[float], limit: int = 16
                  ) -> list[tuple[int, list[int], State]]:
    """``(s, roots, state)`` for the ``limit`` largest sibling groups whose splits are possible."""
    out = []
    for s, roots in sibling_groups(ctx, cands)[:limit]:
        gst = group_split(ctx, s, roots, costs)
        if gst is not None:
            out.append((s, roots, gst))
    return out
