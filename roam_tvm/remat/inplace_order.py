"""Let in-place writers be the last readers of their inputs: move the other readers up (no TVM).

An op writes its output into an input only where that input dies, at its last
reader (:mod:`roam_tvm.remat.inplace`). The base order comes from a scheduler
that knows nothing of in-place writes, and it may run another, small reader
of the input after the writer: a language model's logits are read by
``exp(x - max)`` (which may write over them) and by the gather of the target
logits, and with the gather last the logits and ``exp`` are both live, two
vocabulary-sized tensors where one suffices.

:func:`readers_first` moves such a reader, with the ops it depends on that run
after the writer (the gather's index computation), to just before the writer
when none of them depends on the writer (moving ops earlier, in their own
order, breaks no other dependency), and keeps the move only when the peak does
not rise (the moved ops' outputs live longer). Same ops, same values.
"""
from __future__ import annotations

from typing import Sequence

from ..graph.model import Graph
from .inplace import InplaceModel
from .state import initial_state, liveness

__all__ = ["readers_first"]


def _late_readers(g: Graph, order: list[int], o: int, x: int) -> list[int]:
    """Readers of ``x`` (besides ``o``) that run after ``o``, in order."""
    pos = {op: i for i, op in enumerate(order)}
    return sorted((r for r in g.readers[x] if r != o and pos[r] > pos[o]), key=pos.__getitem__)


def _with_late_inputs(g: Graph, order: list[int], o: int, readers: list[int]) -> list[int] | None:
    """``readers`` and the ops after ``o`` they depend on (their relative order kept), or None
    when one of them depends on ``o`` (it cannot run before ``o``)."""
    pos = {op: i for i, op in enumerate(order)}
    seen, stack = set(), list(readers)
    while stack:
        r = stack.pop()
        if r == o:
            return None
        if r in seen:
            continue
        seen.add(r)
        stack += [p for p in g.predecessors[r] if pos[p] >= pos[o]]
    if any(g.ops[r].inplace for r in seen):
        return None  # an update in place keeps its place (write-after-read order)
    return sorted(seen, key=pos.__getitem__)


def _moved(order: list[int], o: int, ops: list[int]) -> list[int]:
    """``order`` with ``ops`` (in their order) just before ``o``."""
    moving = set(ops)
    rest = [op for op in order if op not in moving]
    at = rest.index(o)
    return rest[:at] + ops + rest[at:]


def readers_first(g: Graph, order: Sequence[int], model: InplaceModel) -> list[int]:
    """``order`` with the late readers of in-place inputs moved before their writers where that helps.

    Parameters
    ----------
    g : Graph
        The step.
    order : sequence of int
        A valid order of ``g``'s ops (the scheduler's).
    model : InplaceModel
        The in-place pairs ``g``'s kernels allow.

    Returns
    -------
    list of int
        A valid order whose peak (with the in-place writes it allows) is not
        above ``order``'s.
    """
    order = list(order)
    peak = liveness(initial_state(g, order, model)).peak
    # the largest outputs first: they save the most when their input dies at the writer
    pairs = sorted(((o, x, y) for o in model.positions for x, y in model.candidates(g.ops[o], o)),
                   key=lambda p: -g.tensors[p[2]].size)
    for o, x, _ in pairs:
        late = _late_readers(g, order, o, x)
        moving = _with_late_inputs(g, order, o, late) if late else None
        if not moving:
            continue
        trial = _moved(order, o, moving)
        trial_peak = liveness(initial_state(g, trial, model)).peak
        if trial_peak <= peak:
            order, peak = trial, trial_peak
    g.check_order(order)
    return order
