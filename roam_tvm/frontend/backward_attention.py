"""The backward recomputes attention probabilities instead of keeping them, as fused attention does.

An attention's ``P = softmax(Q Kᵀ · scale + mask)`` is read by two gradients: the softmax's
(``dS = P ⊙ (dP - rowsum(dP ⊙ P))``) and the value matmul's (``dV = Pᵀ dO``). Kept from the
forward to the backward, every layer holds a ``batch × heads × T × T`` tensor (twice, when
``scaled_dot_product_attention`` is decomposed: ``P`` and ``P`` with fully masked rows set to
zero). PyTorch's fused SDPA keeps neither: its backward recomputes ``P`` from ``Q``, ``K`` and
the row log-sum-exp. Here the backward recomputes ``P`` from what it keeps anyway: ``Q`` and
``K`` are read by the gradients of ``Q Kᵀ`` (``dQ = dS K``, ``dK = dSᵀ Q``), the mask is a
small or constant tensor.

Which forward values are redone. A forward value ``v`` that the backward reads is
*recomputable* when its op is one of :data:`RECOMPUTABLE_OPS` or index arithmetic (an integer
or boolean result), each operand is a constant, a function parameter, a value the backward
reads and does not recompute (so it is kept anyway), a mask computed from constants alone, or
itself recomputable; and its recipe contains a ``softmax``. Only such values are redone. A
recipe needs no tensor the backward would not hold anyway except such a mask, kept instead of
redone: one tensor shared by every layer, at most ``1/heads`` of one ``P``, so the step keeps
less as soon as one ``P`` is dropped. The only added work is the recipe (one ``Q Kᵀ`` matmul
and a few elementwise ops per attention; fused SDPA pays the same). The recomputed ``P`` is the
same kernels on the same inputs: bit-identical values.

Each recomputable value is emitted once, just before the first backward binding that reads
it; later backward reads use that copy. The backward is the part of ``Gradient``'s output
from its first ``*_adjoint`` binding on, as in :mod:`.backward_casts`.
"""
from __future__ import annotations

from typing import Dict, Set

import tvm
from tvm import relax

from .backward_redo import backward_vars, reads, redo_in_backward
from .relax_walk import bindings

__all__ = ["recompute_attention_in_backward", "RECOMPUTABLE_OPS", "MAX_MATMULS"]

#: Matmuls a recipe may redo: the scores ``Q Kᵀ``, not the ``P V`` after it or what follows.
MAX_MATMULS = 1

#: Ops a recipe may use: the attention-score chain and the cheap elementwise ops around it.
RECOMPUTABLE_OPS = frozenset({
    "relax.matmul", "relax.nn.softmax", "relax.reshape", "relax.permute_dims", "relax.add",
    "relax.subtract", "relax.multiply", "relax.divide", "relax.where", "relax.full_like",
    "relax.zeros_like", "relax.astype", "relax.expand_dims", "relax.squeeze", "relax.tanh",
    "relax.broadcast_to", "relax.strided_slice",
    # a gather from a parameter table: T5's relative position bias
    "relax.take",
    # masks: built from positions and constants
    "relax.arange", "relax.full", "relax.ones", "relax.zeros", "relax.tril", "relax.triu",
    "relax.less", "relax.less_equal", "relax.greater", "relax.greater_equal", "relax.equal",
    "relax.not_equal", "relax.logical_and", "relax.logical_or", "relax.logical_not",
})


def _allowed(binding: relax.VarBinding) -> bool:
    """An op a recipe may redo: one of :data:`RECOMPUTABLE_OPS`, or index arithmetic.

    Any pure op with an integer or boolean result counts as index arithmetic (positions, masks:
    transformers builds causal masks with ``index_tensor`` on ``arange`` grids); its cost is
    that of the mask, and a float tensor enters a recipe only through the listed ops.
    """
    call = binding.value
    if not (isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.Op)):
        return False
    if call.op.name in RECOMPUTABLE_OPS:
        return True
    sinfo = binding.var.ty
    return (isinstance(sinfo, relax.TensorType) and str(sinfo.dtype) in _INDEX_DTYPES
            and not call.op.name.startswith(("relax.call_", "relax.builtin", "relax.memory", "relax.vm")))


_INDEX_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"})


def _operands(call: relax.Call) -> list:
    """The variables ``call`` reads, those inside a tuple operand (``concat``) included."""
    out = []
    for a in call.args:
        for f in (a.fields if isinstance(a, relax.Tuple) else [a]):
            if isinstance(f, relax.Var):
                out.append(f)
    return out


def _constant_values(func: relax.Function, backward: Set[relax.Var]) -> Set[relax.Var]:
    """Forward values computed from constants alone (no function parameter): masks, positions."""
    params = set(func.params)
    out: Set[relax.Var] = set()
    for b in bindings(func):
        if b.var in backward:
            break
        if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op) and all(
                v in out for v in reads(b.value)) and not (reads(b.value) & params):
            out.add(b.var)
    return out


def _recomputable(func: relax.Function, backward: Set[relax.Var]) -> Set[relax.Var]:
    """Forward values the backward redoes (module docstring).

    Candidates are the backward-read values an allowed op defines. A candidate whose recipe
    needs a value that is neither kept (read by the backward and not a candidate), a
    parameter, a constant, nor recomputable itself is dropped (kept), which only adds
    leaves to the others; at the fixpoint, the candidates whose recipe holds a softmax are
    redone, with the operands their recipes redo.
    """
    params = set(func.params)
    defs: Dict[relax.Var, relax.Call] = {}
    read_in_backward: Set[relax.Var] = set()
    constant = _constant_values(func, backward)
    for b in bindings(func):
        if b.var in backward:
            read_in_backward |= reads(b.value)
        elif _allowed(b):
            defs[b.var] = b.value
    read_in_backward -= backward
    # A mask computed from constants alone is kept for the recipes rather than redone: it is
    # one tensor shared by every layer (at most 1/heads of one P), and redoing its index
    # arithmetic would add dozens of ops for the order planner to place.
    read_in_backward |= {v for v in constant if v in defs}
    cands: Set[relax.Var] = set()

    def recipe(v: relax.Var, memo: Dict[relax.Var, tuple]) -> tuple[bool, bool, frozenset]:
        """(v can be redone from kept values, its recipe holds a softmax, the matmuls it redoes)."""
        if v in memo:
            return memo[v]
        memo[v] = (False, False, frozenset())  # dataflow has no cycles; this only guards recursion
        call = defs.get(v)
        if call is None:
            return memo[v]
        soft = call.op.name == "relax.nn.softmax"
        mm = frozenset([v]) if call.op.name == "relax.matmul" else frozenset()
        for a in _operands(call):
            if a in params or (a in read_in_backward and a not in cands):
                continue  # kept anyway: a leaf of the recipe
            ok, has_soft, n = recipe(a, memo)
            if not ok:
                return memo[v]  # a would have to be kept for the recipe alone
            soft, mm = soft or has_soft, mm | n
        memo[v] = (len(mm) <= MAX_MATMULS, soft, mm)
        return memo[v]

    # In program order, a value joins when it can be redone from what is kept now and its
    # recipe holds a softmax. Joining never breaks an earlier member: a recipe that used it as
    # a leaf now redoes it instead. Values without a softmax (Q or K themselves) stay kept:
    # redoing them would add their projections to every later recipe.
    for b in bindings(func):
        v = b.var
        if v in read_in_backward and v in defs and all(recipe(v, {})[:2]):
            cands.add(v)
    memo: Dict[relax.Var, tuple] = {}
    out: Set[relax.Var] = set()
    todo = [v for v in cands if recipe(v, memo)[1]]  # only what a softmax is redone for
    while todo:
        v = todo.pop()
        if v in out:
            continue
        out.add(v)
        todo.extend(a for a in _operands(defs[v]) if a not in params
                    and not (a in read_in_backward and a not in cands))
    return out


def recompute_attention_in_backward(func: relax.Function) -> relax.Function:
    """``func`` whose backward redoes attention probabilities instead of keeping them."""
    backward = backward_vars(func)
    redo = _recomputable(func, backward) if backward else set()
    if not redo:
        return func
    # one shared copy: P is a big tensor, read by two gradients
    return redo_in_backward(func, redo, redo, shared=True, backward=backward)
