"""In-place outputs where the input dies: the planning model (no TVM).

An op whose kernel is proven safe for a pair (input position ``k``, output
position ``m``) (see :mod:`roam_tvm.remat.inplace_tir`) may write output
``m`` into the storage of input ``k``. Whether it does depends on the order
and on the recomputation plan: only when the op is the *last* user of that
input. So the planner's states stay free of in-place aliases, and each state
derives its *active* pairs from its own order: op ``o`` writes ``y`` into
``x`` when

* the pair is allowed for ``o``'s kernel (copies inherit their original's),
* ``x`` and ``y`` are eligible: same byte size, allocated roots that no view
  or other in-place result ever aliases, not returned by the step (static
  facts of the original tensors, which copies inherit), and
* ``o`` is the last user of ``x`` in the state's order.

With perfect packing the merged storage ``x + y`` lives from ``x``'s first
user to ``y``'s last, so the only change to the live bytes is ``size(y)``
less at ``o``'s step. When an op could use one input for two outputs, or two
inputs for one output, the first pair in (output, input) order wins.

:func:`materialise` turns a state's active pairs into real aliases (``y``
aliases ``x``, ``o.inplace`` names ``x``) for the checked ``Graph``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

import numpy as np

from ..graph.model import Graph, Op, Tensor

__all__ = ["InplaceModel", "active_pairs", "op_saving", "materialise"]


class InplaceModel:
    """Static in-place facts of one graph: allowed pairs per op and eligible tensors.

    Parameters
    ----------
    g : Graph
        The original step.
    pairs : mapping of int to sequence of (int, int)
        Op id -> (input tensor, output tensor) pairs its kernel allows.
    """

    def __init__(self, g: Graph, pairs: Mapping[int, Sequence[tuple[int, int]]]):
        aliased = {t.alias_of for t in g.tensors if t.alias_of is not None}
        out_roots = {g.roots[t.id] for t in g.tensors if t.is_output}
        self.eligible = np.array([t.kind == "intermediate" and t.alias_of is None and t.id not in aliased
                                  and t.id not in out_roots and t.id in g.producer for t in g.tensors], dtype=bool)
        self.positions: dict[int, list[tuple[int, int]]] = {}  # op -> [(input pos, output pos)]
        for o, ps in pairs.items():
            op = g.ops[o]
            if op.kind == "view" or op.inplace:
                continue
            keep = []
            for x, y in ps:
                if x not in op.inputs or y not in op.outputs:
                    raise ValueError(f"in-place pair ({x}, {y}) of op {op.name!r}: not its input and output")
                if self.eligible[x] and self.eligible[y] and g.tensors[x].size == g.tensors[y].size:
                    keep.append((op.outputs.index(y), op.inputs.index(x)))
            if keep:
                self.positions[o] = [(k, m) for m, k in sorted(set(keep))]

    def __bool__(self) -> bool:
        return bool(self.positions)

    def candidates(self, op: Op, origin: int) -> list[tuple[int, int]]:
        """(input tensor, output tensor) pairs allowed for ``op`` (a copy of ``origin`` or itself)."""
        return [(op.inputs[k], op.outputs[m]) for k, m in self.positions.get(origin, ())]

    def max_saving(self, g: Graph, o: int) -> int:
        """Most bytes in-place writes can save while op ``o`` runs (for lower bounds)."""
        xs, ys, total = set(), set(), 0
        for x, y in self.candidates(g.ops[o], o):
            if x not in xs and y not in ys:
                xs.add(x)
                ys.add(y)
                total += g.tensors[y].size
        return total


def op_saving(cands: list, dying: Callable, size: Callable, eligible: Callable) -> tuple[int, list]:
    """Bytes saved at one op, and its active (x, y) pairs, given which inputs die there.

    ``cands`` are (x, y) keys in the op's order of preference; ``dying``,
    ``size`` and ``eligible`` take a key.
    """
    xs, ys, total, act = set(), set(), 0, []
    for x, y in cands:
        if x in xs or y in ys or not eligible(x) or not eligible(y) or not dying(x):
            continue
        xs.add(x)
        ys.add(y)
        total += int(size(y))
        act.append((x, y))
    return total, act


def active_pairs(st, last: np.ndarray, pos: np.ndarray) -> list[tuple[int, int, int]]:
    """(op, x, y) for every pair active in state ``st`` (``last``: per root, ``pos``: per op)."""
    model: InplaceModel | None = getattr(st, "inplace", None)
    if not model:
        return []
    out = []
    elig = model.eligible
    size = _sizes(st)

    def eligible(t: int) -> bool:
        return bool(elig[st.origin_t[t]])

    for o, op in enumerate(st.ops):
        src = st.origin_op[o]
        if src not in model.positions:
            continue
        p = int(pos[o])
        _, act = op_saving(model.candidates(op, src), lambda x: int(last[x]) == p, size.__getitem__, eligible)
        out += [(o, x, y) for x, y in act]
    return out


def _sizes(st) -> list[int]:
    return [t.size for t in st.tensors]


def materialise(ops: list[Op], tensors: list[Tensor], active: list[tuple[int, int, int]]
                ) -> tuple[list[Op], list[Tensor]]:
    """Copies of ``ops``/``tensors`` where each active (op, x, y) writes ``y`` into ``x``."""
    ops, tensors = list(ops), list(tensors)
    for o, x, y in active:
        tensors[y] = replace(tensors[y], alias_of=x)
        ops[o] = replace(ops[o], inplace=[*ops[o].inplace, x])
    return ops, tensors
