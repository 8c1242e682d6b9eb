"""The backward slices a step's input out of the sequence again instead of keeping the slice.

An RNN cell's input projection reads its time step of the input sequence, ``x_t = x[:, t]``
(``rnn_step_projection.py``). In Relax that slice is a copy, and the weight gradient
``dW_ih += dP_t^T x_t`` reads it in the backward, so every step's copy is kept from the forward
to the backward: together a second copy of ``x``. PyTorch's autograd saves ``x[:, t]`` as a view
of ``x``, which is alive for the whole step anyway.

``recompute_input_slices_in_backward`` does the same: every backward binding that reads a
forward ``strided_slice`` of a function parameter (an input or a weight: alive throughout),
or a ``reshape`` of one, reads a fresh slice emitted just before it; so does a ``take`` of a
parameter at constant indices (a MoE layer's stacked expert weights, ``gate_up_proj[e]``, which
PyTorch also saves as a view). The forward's copy dies
with its forward reader; the fresh one with its backward reader. Values are identical (the
same elements of the same tensor).
"""
from __future__ import annotations

from typing import Set

import tvm
from tvm import relax

from .backward_redo import backward_vars, reads, redo_in_backward
from .relax_walk import bindings


def _op(value) -> str | None:
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return None


def _slices_of_params(func: relax.Function, backward: Set[relax.Var]) -> Set[relax.Var]:
    """Forward ``strided_slice(p, ...)`` of a parameter ``p`` of ``func``, and reshapes of them."""
    params = set(func.params)
    out: Set[relax.Var] = set()
    for b in bindings(func):
        if b.var in backward:
            continue
        value, name = b.value, _op(b.value)
        arg = value.args[0] if name else None
        if (name == "relax.strided_slice" and arg in params) or (name == "relax.reshape" and arg in out) \
                or (name == "relax.take" and arg in params and isinstance(value.args[1], tvm.ir.Constant)):
            out.add(b.var)
    return out


def recompute_input_slices_in_backward(func: relax.Function) -> relax.Function:
    """``func`` (an adjoint) with every backward read of a forward slice of one of its
    parameters replaced by a fresh slice emitted just before the reader.

    Parameters
    ----------
    func : relax.Function
        The adjoint from ``Gradient`` (forward bindings, then ``*_adjoint`` ones).

    Returns
    -------
    relax.Function
    """
    backward = backward_vars(func)
    recipes = _slices_of_params(func, backward)
    if not backward or not recipes:
        return func
    read_later = set()
    for b in bindings(func):
        if b.var in backward:
            read_later |= reads(b.value)
    targets = {v for v in recipes if v in read_later}
    # a fresh slice per reading binding, as PyTorch's saved view is read by each gradient
    return redo_in_backward(func, targets, recipes, shared=False, backward=backward)
