"""Move chosen bindings down to just before their first reader.

A rewrite that replaces one binding by a few (``rnn_step_projection``: each time step's slice
of the whole input projection becomes that step's own projection) emits them where the old
binding was, and ``torch.export`` emits all of an RNN's per-step slices at once, before the
first cell. Left there, the program order computes every step's projection up front and holds
them all: the memory the rewrite meant to save, until an orderer moves them (and a time-limited
one may not). ``sink_to_first_use`` places them where they are first read, with the views that
only read them (``squeeze``, ``reshape``, ``split`` and its items) carried along. Only the order
changes; the values do not.
"""
from __future__ import annotations

from typing import Iterable, Set

import tvm
from tvm import relax

from .relax_walk import op_name

#: bindings carried along when every var they read is sunk (views and their tuples)
_CARRIED = frozenset({"relax.squeeze", "relax.reshape", "relax.expand_dims", "relax.split"})


def _reads(value) -> Set[relax.Var]:
    return set(relax.analysis.free_vars(value))


def _carried(value, sunk: Set[relax.Var]) -> bool:
    """A view / split / tuple item whose every var input is sunk."""
    reads = _reads(value)
    if not reads or not reads <= sunk:
        return False
    return isinstance(value, relax.TupleGetItem) or op_name(value) in _CARRIED


def _sink_block(block: relax.DataflowBlock, chosen: Set[relax.Var]) -> relax.DataflowBlock:
    sunk: Set[relax.Var] = set()
    for b in block.bindings:
        if b.var in chosen or _carried(b.value, sunk):
            sunk.add(b.var)
    if not sunk:
        return block
    pending = {b.var: b for b in block.bindings if b.var in sunk}
    out: list = []

    def place(binding) -> None:
        for v in sorted(_reads(binding.value), key=lambda v: order[v] if v in order else -1):
            if v in pending:
                place(pending.pop(v))
        out.append(binding)

    order = {b.var: i for i, b in enumerate(block.bindings)}
    for b in block.bindings:
        if b.var in sunk:
            continue
        place(b)
    for b in block.bindings:  # read by nothing: stays, at the end (DCE drops what is dead)
        if b.var in pending:
            place(pending.pop(b.var))
    return relax.DataflowBlock(out)


def sink_to_first_use(func: relax.Function, chosen: Iterable[relax.Var]) -> relax.Function:
    """``func`` with each binding of ``chosen`` (and the views only they feed) moved to just
    before its first reader in its dataflow block.

    Parameters
    ----------
    func : relax.Function
    chosen : iterable of relax.Var
        Binding vars to sink.

    Returns
    -------
    relax.Function
    """
    chosen = set(chosen)
    body = func.body
    if not chosen or not isinstance(body, relax.SeqExpr):
        return func
    blocks = [_sink_block(blk, chosen) if isinstance(blk, relax.DataflowBlock) else blk
              for blk in body.blocks]
    new_body = relax.SeqExpr(blocks, body.body)
    return relax.Function(func.params, new_body, func.ret_ty, func.is_pure, func.attrs)
