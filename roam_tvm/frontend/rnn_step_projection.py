"""An RNN's input projection computed one time step at a time, from that step's own input.

``torch.export``'s decomposition of ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` multiplies the whole
sequence by ``W_ih`` up front (``P = x @ W_ih^T + b_ih``, ``(T, B, G)``) and then slices one
step of ``P`` per cell. In Relax a slice is a copy and ``P`` stays alive until the last step has
sliced it: the whole projection is held through the forward, on top of every activation the
backward keeps, at the step's peak. PyTorch's eager RNN (the per-step path its simulated and
non-cuDNN steps take) computes ``x_t @ W_ih^T + b_ih`` inside each cell and frees it there.

:func:`per_step_projections` does the same: where every use of ``P`` (or of ``flip(P, 0)``, a
bidirectional layer's reverse direction) is a one-step slice along time, each slice becomes
``reshape(x_t @ W + b, (1, B, G))`` with ``x_t`` read straight from the sequence:

* a batch-first input (``permute_dims(x, [1, 0, 2])``: a real copy in Relax, a view in PyTorch)
  is sliced along its batch-first time axis, so the time-major copy is never made;
* a lower layer's output (``concat`` of its per-step outputs) gives the step's own tensor, so
  the stacked copy is never made either;
* any other source is sliced along its leading axis.

The weight gradient becomes a sum of per-step products, accumulated as each arrives
(``accumulate.py``, ``matmul_accumulate.py``), as for ``W_hh``. The values are the same
products and sums, per step.
"""
from __future__ import annotations

from dataclasses import dataclass

from tvm import relax
from tvm.relax import op as R

from .relax_shapes import shape_tuple
from .relax_walk import bindings, op_name


@dataclass
class _Projection:
    """``P = reshape?(matmul(S, weight) + bias)`` of shape ``(T, B, G)``, ``S`` of ``(T, B, F)``."""

    source: relax.Expr
    weight: relax.Expr
    bias: relax.Expr | None
    bias_first: bool
    out_dtype: str
    chain: tuple  # the vars between S and P (each read only by the next but a shared flattening view of S)


def _ints(tup) -> list[int] | None:
    try:
        return [int(f.value) for f in tup.fields]
    except (AttributeError, TypeError):
        return None


def _split_bias(value) -> tuple:
    """``(operand, bias, bias_first)`` of ``add(operand, bias)``; bias 1-D. Else ``(value, None, False)``."""
    if op_name(value) != "relax.add":
        return value, None, False
    a, b = value.args
    for operand, bias, first in ((a, b, False), (b, a, True)):
        bs, os_ = shape_tuple(bias), shape_tuple(operand)
        if bs is not None and os_ is not None and len(bs) == 1 and bs[0] == os_[-1]:
            return operand, bias, first
    return value, None, False


def _match_projection(var, defs, uses) -> _Projection | None:
    """``var`` as a row-wise projection of a ``(T, B, F)`` tensor (see the module docstring)."""
    ps = shape_tuple(var)
    if ps is None or len(ps) != 3 or var not in defs:
        return None
    chain = []
    value = defs[var]
    reshaped = op_name(value) == "relax.reshape"
    if reshaped:  # GRU / contiguous input: view(addmm(b, view(S, (T*B, F)), W^T), (T, B, G))
        inner = value.args[0]
        if not isinstance(inner, relax.Var) or inner not in defs or shape_tuple(inner) != (ps[0] * ps[1], ps[2]):
            return None
        chain.append(inner)
        value = defs[inner]
    operand, bias, bias_first = _split_bias(value)
    if bias is not None:
        if not isinstance(operand, relax.Var) or operand not in defs:
            return None
        chain.append(operand)
        value = defs[operand]
    if op_name(value) != "relax.matmul":
        return None
    src, weight = value.args
    ws = shape_tuple(weight)
    if ws is None or len(ws) != 2 or ws[1] != ps[2]:
        return None
    if any(uses.get(v, 0) != 1 for v in chain):  # an intermediate read elsewhere stays alive anyway
        return None
    if reshaped:
        # The flattened input ``view(S, (T*B, F))`` may be shared (a bidirectional layer's two
        # directions read one view of the lower layer's output): it is a view of ``S``, so
        # keeping it for another reader costs nothing, and it dies with its last rewritten reader.
        if not isinstance(src, relax.Var) or src not in defs or op_name(defs[src]) != "relax.reshape":
            return None
        chain.append(src)
        src = defs[src].args[0]
    if shape_tuple(src) != (ps[0], ps[1], ws[0]):
        return None
    return _Projection(src, weight, bias, bias_first, str(value.attrs.out_dtype or ""), tuple(chain))


def _unit_time_slice(value) -> int | None:
    """The step ``t`` of ``strided_slice(_, axes=[0], begin=[t], end=[t+1], strides=[1])``."""
    if op_name(value) != "relax.strided_slice" or len(value.args) < 4:
        return None
    axes, begin, end = (_ints(a) for a in value.args[1:4])
    strides = _ints(value.args[4]) if len(value.args) > 4 else [1]
    if axes != [0] or begin is None or end is None or strides not in ([1], None):
        return None
    return begin[0] if end[0] == begin[0] + 1 and begin[0] >= 0 else None


def _time_slices(proj_var, users) -> dict | None:
    """Slice var -> step of ``proj_var`` for every use, through one ``flip(axis=0)``; None if
    some use is anything else."""
    steps = shape_tuple(proj_var)[0]
    out = {}
    for b in users.get(proj_var, []):
        value = b.value
        if op_name(value) == "relax.flip" and int(value.attrs.axis) in (0, -3):
            for fb in users.get(b.var, []):
                t = _unit_time_slice(fb.value)
                if t is None or t >= steps:
                    return None
                out[fb.var] = steps - 1 - t
            continue
        t = _unit_time_slice(value)
        if t is None or t >= steps:
            return None
        out[b.var] = t
    return out or None


def _step_input(bb: relax.BlockBuilder, source, t: int, defs) -> relax.Expr:
    """Time step ``t`` of the time-major ``source`` as a ``(B, F)`` tensor, without a whole copy."""
    steps, batch, feat = shape_tuple(source)
    value = defs.get(source)
    if op_name(value) == "relax.permute_dims" and [int(a) for a in value.attrs.axes] == [1, 0, 2]:
        x = value.args[0]  # batch first: slice its time axis
        step = bb.emit(R.strided_slice(x, [1], [t], [t + 1]))
        return bb.emit(R.reshape(step, (batch, feat)))
    if op_name(value) == "relax.concat" and int(value.attrs.axis) in (0, -3):
        parts = value.args[0]
        parts = defs.get(parts, parts) if isinstance(parts, relax.Var) else parts
        if isinstance(parts, relax.Tuple) and len(parts.fields) == steps and all(
                shape_tuple(p) == (1, batch, feat) for p in parts.fields):
            return bb.emit(R.reshape(parts.fields[t], (batch, feat)))
    step = bb.emit(R.strided_slice(source, [0], [t], [t + 1]))
    return bb.emit(R.reshape(step, (batch, feat)))


@relax.expr_functor.mutator
class _PerStep(relax.PyExprMutator):
    def __init__(self, plan: dict, defs: dict):
        super().__init__()
        self.plan = plan  # slice var -> (projection, step)
        self.defs = defs

    def visit_var_binding_(self, binding):
        if binding.var not in self.plan:
            return super().visit_var_binding_(binding)
        proj, t = self.plan[binding.var]
        bb = self.builder_
        x_t = _step_input(bb, proj.source, t, self.defs)
        y = bb.emit(R.matmul(x_t, proj.weight, out_dtype=proj.out_dtype or None))
        if proj.bias is not None:
            y = bb.emit(R.add(proj.bias, y) if proj.bias_first else R.add(y, proj.bias))
        out = R.reshape(y, shape_tuple(binding.var))
        bb.emit_normalized(relax.VarBinding(binding.var, bb.normalize(out)))


def per_step_projections(fwd: relax.Function) -> relax.Function:
    """``fwd`` with each whole-sequence input projection sliced one step at a time replaced by
    per-step projections of the step's input (module docstring). Unmatched code is unchanged;
    the dead projection is left to ``DeadCodeElimination``.

    Parameters
    ----------
    fwd : relax.Function
        The imported forward (one dataflow region).

    Returns
    -------
    relax.Function
    """
    binds = bindings(fwd)
    defs = {b.var: b.value for b in binds}
    users: dict = {}
    uses: dict = {}
    for b in binds:
        for v in relax.analysis.free_vars(b.value):
            users.setdefault(v, []).append(b)
            uses[v] = uses.get(v, 0) + 1
    plan = {}
    for b in binds:
        proj = _match_projection(b.var, defs, uses)
        if proj is None:
            continue
        slices = _time_slices(b.var, users)
        if slices is None:
            continue
        plan.update({v: (proj, t) for v, t in slices.items()})
    if not plan:
        return fwd
    return _PerStep(plan, defs).visit_expr(fwd)
