"""Small read-only helpers over Relax functions that the step-building modules share."""

from __future__ import annotations

import re

import tvm
from tvm import relax

from .errors import UnsupportedError

# Ops whose output may be a view (alias) of their input once lowered.
VIEW_OPS = frozenset({"relax.reshape", "relax.expand_dims", "relax.squeeze", "relax.flatten",
                      "relax.memory.view"})


def bindings(func: relax.Function) -> list:
    """The bindings of ``func``'s body, which must be dataflow blocks only.

    Parameters
    ----------
    func : relax.Function
        A forward or adjoint function.

    Returns
    -------
    list of relax.Binding
        Every binding, in program order.
    """
    out = []
    for block in func.body.blocks:
        if not isinstance(block, relax.DataflowBlock):
            raise UnsupportedError(
                "train_step construction expects the forward function to be one dataflow "
                "region; found a non-dataflow block (impure ops?)")
        out.extend(block.bindings)
    return out


def op_name(value: relax.Expr) -> str | None:
    """The name of the op ``value`` calls (``"relax.add"``), or None if it calls no op."""
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return None


def free_vars(expr: relax.Expr) -> list:
    """The Relax variables ``expr`` reads."""
    return list(relax.analysis.free_vars(expr))


def resolve(expr: relax.Expr, defs: dict) -> relax.Expr:
    """Follow ``expr`` through bindings to a plain variable or a tuple (``defs``: var -> value)."""
    while isinstance(expr, relax.Var) and expr in defs and isinstance(
            defs[expr], (relax.Var, relax.Tuple)):
        expr = defs[expr]
    return expr


def attrs_dict(func: relax.Function) -> dict:
    """``func``'s attributes as a plain dict (empty when it has none)."""
    if func.attrs is None:
        return {}
    return {str(k): v for k, v in func.attrs.items()}


def ident(name: str) -> str:
    """``name`` made a valid identifier (for binding name hints such as ``upd_<param>``)."""
    return re.sub(r"\W", "_", name)
