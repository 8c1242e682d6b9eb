"""A read of one time step of an RNN's stacked output reads that step's own tensor.

An RNN's output sequence is ``concat`` (``torch.stack``) of its per-step outputs along time,
permuted to batch-first for ``batch_first=True``, and a sequence classifier reads one step of
it (``out[:, -1]``: ``take(permute_dims(concat(h_0, ..., h_{T-1}), [1, 0, 2]), T - 1, 1)``).
In Relax the permute is a copy of the whole sequence, and the backward of ``take`` builds a
zero gradient of the whole sequence, permutes it back (another copy) and splits it per step.
PyTorch's ``transpose`` is a view, but its ``select`` backward also builds the zero sequence.

``read_steps_directly`` replaces such a ``take`` of a constant step by that step's tensor,
reshaped (and permuted, for the axes the permute moved around it): the same values. The
stacked copies are then dead unless something else reads them, and the step's gradient flows
to the one step it comes from.
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R

from .relax_shapes import shape_tuple
from .relax_walk import bindings, op_name


def _const_index(expr) -> int | None:
    """A 0-d integer constant's value."""
    if not isinstance(expr, tvm.ir.Constant) or not hasattr(expr.value, "numpy"):
        return None
    value = expr.value.numpy()  # TVM 0.27: a constant's tensor is .value
    if value.shape != ():
        return None
    return int(value) if value.dtype.kind in "iu" else None


def _step_of(value, defs) -> relax.Expr | None:
    """``take(permute_dims?(concat(parts, axis=c)), i, axis=a)`` with ``a`` onto ``c`` and every
    part of size 1 there, as ``parts[i]`` without that axis (and permuted as the rest was)."""
    if op_name(value) != "relax.take" or value.attrs.axis is None:
        return None
    data, index = value.args
    shape, i = shape_tuple(data), _const_index(index)
    if shape is None or i is None:
        return None
    axis = int(value.attrs.axis) % len(shape)
    i = i % shape[axis]
    perm = list(range(len(shape)))
    src = defs.get(data)
    if op_name(src) == "relax.permute_dims" and src.attrs.axes is not None:
        perm = [int(a) for a in src.attrs.axes]
        data, src = src.args[0], defs.get(src.args[0])
    c = perm[axis]
    found = _step_part(src, c, i, defs)
    if found is None:
        return None
    part, pshape = found
    if pshape is None or len(pshape) != len(perm) or pshape[c] != 1:
        return None
    kept = [d for d in pshape[:c] + pshape[c + 1:]]
    rest = [p - (p > c) for p in perm if p != c]  # the permute on the dims left
    stack = shape_tuple(data)
    if stack is None or list(stack[:c]) + list(stack[c + 1:]) != kept:  # the take's shape, unpermuted
        return None
    out = R.reshape(part, kept)
    return out if rest == sorted(rest) else R.permute_dims(out, rest)


def _step_part(src, c: int, i: int, defs, depth: int = 0) -> tuple[relax.Expr, tuple] | None:
    """Step ``i`` (axis ``c`` kept, of size 1) of ``concat(parts, axis=c)``; or, through a concat
    along another axis of such stacks (a bidirectional RNN's ``concat([fwd, bwd], -1)``), the
    concat of each stack's step ``i`` along that axis. With the step's shape (the concat is
    not normalized: it is emitted by the rewrite)."""
    if op_name(src) != "relax.concat" or src.attrs.axis is None or depth > 2:
        return None
    parts = src.args[0]
    parts = defs.get(parts, parts) if isinstance(parts, relax.Var) else parts
    if not isinstance(parts, relax.Tuple) or not parts.fields:
        return None
    shape = shape_tuple(parts.fields[0])
    if shape is None:
        return None
    ax = int(src.attrs.axis) % len(shape)
    if ax == c:
        if i >= len(parts.fields) or any((shape_tuple(p) or (0,) * len(shape))[c] != 1 for p in parts.fields):
            return None
        return parts.fields[i], shape
    steps = [_step_part(defs.get(p), c, i, defs, depth + 1) if isinstance(p, relax.Var) else None
             for p in parts.fields]
    if any(s is None for s in steps):
        return None
    width = sum(sh[ax] for _, sh in steps)
    return R.concat([e for e, _ in steps], axis=ax), steps[0][1][:ax] + (width,) + steps[0][1][ax + 1:]


@relax.expr_functor.mutator
class _DirectSteps(relax.PyExprMutator):
    def __init__(self, plan: dict):
        super().__init__()
        self.plan = plan

    def visit_var_binding_(self, binding):
        if binding.var not in self.plan:
            return super().visit_var_binding_(binding)
        new = self.visit_expr(self.plan[binding.var])
        self.builder_.emit_normalized(relax.VarBinding(binding.var, self.builder_.normalize(new)))


def read_steps_directly(fwd: relax.Function) -> relax.Function:
    """``fwd`` with each constant-step ``take`` of a stacked sequence reading the step itself
    (module docstring); the stacked copies are left to ``DeadCodeElimination``.

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
    plan = {}
    for b in binds:
        step = _step_of(b.value, defs)
        if step is not None:  # same shape as the take: checked against the stack in _step_of
            plan[b.var] = step
    return _DirectSteps(plan).visit_expr(fwd) if plan else fwd
