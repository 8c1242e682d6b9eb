"""Let in-place writers be the last readers of their inputs: move the other readers up (no TVM).

An op writes its output into an input only where that input dies, at its last
reader (:mod:`roam_tvm.remat.inplace`). The base order comes from a scheduler
that knows nothing of in-place writes, and it may run another, small reader
of the input after the writer: a language model's logits are read by
``exp(x - max)`` (which may write over them) and by the gather of the target
logits, and with the gather last the logits and ``exp`` are both live, two
vocabulary-sized tensors where one suffices.

:func:`readers_first` moves such a reader to just before the writer when every
op it depends on already ran there (moving an op earlier breaks no other
dependency), and keeps the move only when the peak of the in-place step does
not rise (the moved reader's outputs live longer). Same ops, same values.
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


def _movable(g: Graph, order: list[int], o: int, r: int) -> bool:
    """``r`` may run just before ``o``: every op it depends on runs before ``o``."""
    pos = {op: i for i, op in enumerate(order)}
    return not g.ops[r].inplace and all(pos[p] < pos[o] for p in g.predecessors[r])


def _moved(order: list[int], o: int, readers: list[int]) -> list[int]:
    rest = [op for op in order if op not in set(readers)]
    at = rest.index(o)
    return rest[:at] + readers + rest[at:]


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
        if not late or not all(_movable(g, order, o, r) for r in late):
            continue
        trial = _moved(order, o, late)
        trial_peak = liveness(initial_state(g, trial, model)).peak
        if trial_peak <= peak:
            order, peak = trial, trial_peak
    g.check_order(order)
    return order
