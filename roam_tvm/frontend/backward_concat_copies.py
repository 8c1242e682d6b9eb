"""Each reader of a GRU step's gate-gradient concat builds its own copy from the pieces.

A GRU step's backward concatenates its gate gradients twice: ``[dr, dz, dn]`` for the input
side (``dx_t``, ``W_ih``'s and ``b_ih``'s gradients) and ``[dr, dz, r * dn]`` for the hidden
side (``dh_{t-1}``, ``W_hh``'s and ``b_hh``'s gradients). Each concat has several readers, and
the weight-gradient products may run late (an order that sums a weight's gradient after the
recurrence, as cuDNN does, instead of holding a weight-sized sum through it). Then both
``(B, 3H)`` concats of every step are kept until then: ``6H`` per step, where the pieces they
are built from, ``dr``, ``dz``, ``dn`` and ``r``, are ``4H``.

``copy_gate_concats_per_reader`` gives each reading binding of such a concat a fresh copy,
built from the pieces just before it (``backward_redo``, ``shared=False``), so a late reader
keeps the pieces alive, not a concat. It applies to concats of the backward that share a
piece with another such concat (GRU's two; an LSTM's one concat of ``[di, df, dg, do]`` has
no twin and is left alone), and only where a reader makes a tensor larger than the concat
(``W_hh``'s ``3H x H`` gradient from a ``B x 3H`` concat: ``H > B``); with ``H <= B`` holding a
step's concats is never cheaper than holding the weight-sized sum, every reader runs at once,
and copies would only add transient tensors. A *piece* is what a field of the concat is computed from by
elementwise ops and views that nothing else reads (``add(zeros, dr)``, ``r * dn``, reshapes);
those ops are redone in each copy. Values are identical: the same ops on the same pieces.
"""
from __future__ import annotations

from typing import Dict, List, Set

import tvm
from tvm import relax

from .backward_redo import backward_vars, redo_in_backward
from .flatten_tuples import inline_tuple_vars
from .relax_walk import VIEW_OPS, bindings, op_name

#: ops redone inside each copy (elementwise, deterministic; ``add`` of a zero fill comes from
#: ``split``'s gradient, ``multiply`` is GRU's ``r * dn``, ``astype`` an autocast)
_REDONE = VIEW_OPS | {"relax.add", "relax.subtract", "relax.multiply", "relax.negative", "relax.astype"}
#: ops that fill a tensor with one value
_FILLS = frozenset({"relax.zeros", "relax.ones", "relax.full", "relax.zeros_like", "relax.ones_like",
                    "relax.full_like"})


def _readers(func: relax.Function) -> Dict[relax.Var, List[relax.Var]]:
    """Var -> the binding vars that read it (each once), in program order."""
    out: Dict[relax.Var, List[relax.Var]] = {}
    for b in bindings(func):
        for v in relax.analysis.free_vars(b.value):
            out.setdefault(v, []).append(b.var)
    return out


class _Concat:
    """One candidate: the concat, the var its readers read, the redone vars and the pieces."""

    def __init__(self, var: relax.Var, top: relax.Var, recipe: Set[relax.Var], pieces: Set[relax.Var]):
        self.var, self.top, self.recipe, self.pieces = var, top, recipe, pieces


def _nbytes(v: relax.Var) -> int | None:
    """Bytes of ``v``; None unless a tensor of static shape."""
    ty = getattr(v, "ty", None)
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    n = 1
    for d in getattr(ty.shape, "values", None) or [None]:
        if not isinstance(getattr(d, "value", None), int):
            return None
        n *= int(d.value)
    return n * max(1, tvm.runtime.DataType(str(ty.dtype)).bits // 8)


def _feeds_larger(top: relax.Var, readers: dict, defs: dict) -> bool:
    """Some reader of ``top`` makes a tensor larger than it (a weight-sized gradient product).

    Only then can summing that product late, over kept per-step concats, beat holding the
    product; otherwise every reader runs at once and a concat per reader only adds copies."""
    size = _nbytes(top)
    made = [_nbytes(r) for r in readers.get(top, [])]
    return size is not None and any(m is not None and m > size for m in made)


def _walk(var: relax.Var, defs: dict, readers: dict, backward: Set[relax.Var], owner: relax.Var,
          recipe: Set[relax.Var], pieces: Set[relax.Var]) -> None:
    """Sort ``var`` (a field of a concat's tuple) into ``recipe`` (redone per copy: a backward
    elementwise op or view read only by ``owner``) or ``pieces`` (read as it is)."""
    value = defs.get(var)
    if var in backward and op_name(value) in _REDONE and readers.get(var, []) == [owner]:
        recipe.add(var)
        for a in value.args:
            if isinstance(a, relax.Var):
                _walk(a, defs, readers, backward, var, recipe, pieces)
        return
    pieces.add(var)


def _views(b: relax.VarBinding, defs: dict, readers: dict, backward: Set[relax.Var]) -> List[relax.Var] | None:
    """``[concat, its views...]`` when ``b`` is a backward concat whose last view is read by two
    or more bindings, one making a larger tensor (``_feeds_larger``); else None."""
    if b.var not in backward or op_name(b.value) != "relax.concat":
        return None
    chain = [b.var]
    while len(readers.get(chain[-1], [])) == 1 and op_name(defs.get(readers[chain[-1]][0])) in VIEW_OPS:
        chain.append(readers[chain[-1]][0])
    top = chain[-1]
    return chain if len(readers.get(top, [])) >= 2 and _feeds_larger(top, readers, defs) else None


def _candidate(b: relax.VarBinding, defs: dict, readers: dict, backward: Set[relax.Var]) -> _Concat | None:
    """``b`` as a backward concat of a tuple literal worth copying per reader (``_views``),
    with its recipe and pieces."""
    chain = _views(b, defs, readers, backward)
    if chain is None or not isinstance(b.value.args[0], relax.Tuple):
        return None
    recipe, top = set(chain), chain[-1]
    pieces: Set[relax.Var] = set()
    for f in b.value.args[0].fields:
        if not isinstance(f, relax.Var):
            return None
        _walk(f, defs, readers, backward, b.var, recipe, pieces)
    pieces = {p for p in pieces if isinstance(getattr(p, "ty", None), relax.TensorType)}
    return _Concat(b.var, top, recipe, pieces)


def _twins(found: List[_Concat], defs: dict) -> List[_Concat]:
    """The candidates that share a computed piece (not a fill: a shared zero tensor pairs
    nothing) with another candidate."""
    owners: Dict[relax.Var, int] = {}
    computed = [{p for p in c.pieces if op_name(defs.get(p)) not in _FILLS} for c in found]
    for ps in computed:
        for p in ps:
            owners[p] = owners.get(p, 0) + 1
    return [c for c, ps in zip(found, computed) if any(owners[p] > 1 for p in ps)]


def copy_gate_concats_per_reader(func: relax.Function) -> relax.Function:
    """``func`` (an adjoint) whose twin gate-gradient concats are built once per reader (see
    the module docstring).

    Parameters
    ----------
    func : relax.Function
        The adjoint from ``Gradient`` (forward bindings, then ``*_adjoint`` ones).

    Returns
    -------
    relax.Function
        Unchanged when no backward concat shares a piece with another.
    """
    backward = backward_vars(func)
    if not backward:
        return func
    binds = bindings(func)
    defs, readers = {b.var: b.value for b in binds}, _readers(func)
    if sum(_views(b, defs, readers, backward) is not None for b in binds) < 2:
        return func  # a quick look first: no two concats to pair, so no rewrite of the whole function
    # concat reads its fields from a tuple literal, so a copy can be rebuilt field by field
    func = relax.analysis.remove_all_unused(inline_tuple_vars(func))
    binds = bindings(func)
    backward = backward_vars(func)
    defs = {b.var: b.value for b in binds}
    readers = _readers(func)
    found = [c for c in (_candidate(b, defs, readers, backward) for b in binds) if c is not None]
    twins = _twins(found, defs)
    if not twins:
        return func
    targets = {c.top for c in twins}
    recipe = set().union(*(c.recipe for c in twins))
    # the concats themselves are read by nobody now
    return relax.analysis.remove_all_unused(redo_in_backward(func, targets, recipe, shared=False, backward=backward))
