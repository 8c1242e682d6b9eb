"""An RNN weight's gradient summed gate by gate, so each gate's rows are updated on their own.

An unrolled LSTM / GRU step multiplies by a weight of ``G = k * H`` rows (``k`` gates: 4 for
an LSTM, 3 for a GRU) and splits the product into gates. Its gradient is a sum over the steps
of ``matmul(h_t^T, reshape(concat([d_gate_1, ..., d_gate_k], axis=-1), (B, G)))``, transposed
(a bias's: ``collapse_sum_to`` of the same concat). The whole ``G x F`` sum is one tensor:
an order that sums it late (after the recurrence, where the per-step gate gradients are
smaller than the sum, as cuDNN does) holds the sum *and* every other weight's per-step gate
gradients at once; one that sums it early holds it through the recurrence. Either way a
``G x F`` tensor sits on top of what the cut bound counts (``roam_tvm.graph.set_bound``).

``weight_grads_per_gate`` sums each gate's rows on their own, from that gate's gradient
(``matmul(h_t^T, reshape(d_gate_b, (B, H)))``), and returns the gradient as
``concat([rows_1, ..., rows_k], axis=0)``. The step applies such a gradient block by block
(``block_updates.py``): each gate's ``H x F`` sum dies at its own update, the concat is never
built, and a late sum holds one gate's rows at a time, reading that gate's per-step
gradients (no concat copy of them). The values are the same products and sums, per row.
"""
from __future__ import annotations

from dataclasses import dataclass

from tvm import relax
from tvm.relax import op as R

from .relax_shapes import shape_tuple
from .relax_walk import bindings, op_name
from .zero_fills import is_zero_fill

#: function attribute: names of the gradients this pass returned as stacked gate rows
GATE_ROWS_ATTR = "roam.gate_rows"
#: ops between a term's operand and its gate concat, redone per gate (a view, a cast)
_THROUGH = ("relax.reshape", "relax.astype")
#: ops between a gradient and its sum, redone per gate
_WRAPPERS = ("relax.permute_dims", "relax.astype")


def _is_zero_fill(var, defs) -> bool:
    return isinstance(var, relax.Var) and is_zero_fill(defs.get(var))


def _unpadded(field, defs):
    """``x`` for a field bound to ``add(zeros, x)`` of one shape (a split's gradient adds each
    output's to a zero fill): the gate's matmul reads ``x`` itself, with no copy of it."""
    value = defs.get(field)
    if op_name(value) != "relax.add":
        return field
    a, b = value.args
    for zero, x in ((a, b), (b, a)):
        if _is_zero_fill(zero, defs) and isinstance(x, relax.Var) and shape_tuple(x) == shape_tuple(field) \
                and str(x.ty.dtype) == str(field.ty.dtype):
            return x
    return field


@dataclass
class _Term:
    """``matmul(a, chain(concat(fields)))`` or ``collapse_sum_to(chain(concat(fields)), shape)``."""

    value: relax.Call
    operand: int              # the argument index that reads the concat
    chain: list               # ops from the concat up to that argument, innermost first
    fields: list              # the gate gradients
    cast: str | None = None   # the dtype the product is cast to (a low-precision weight's)


def _uses(func: relax.Function) -> dict:
    out: dict = {}
    for b in bindings(func):
        for v in relax.analysis.free_vars(b.value):
            out[v] = out.get(v, 0) + 1
    return out


def _gate_concat(var, defs) -> tuple[list, list] | None:
    """``(chain, fields)`` when ``var`` is ``reshape/astype(...(concat(fields, axis=-1)))`` of
    ``k >= 2`` equal fields and every reshape keeps the last axis (only leading dims merge)."""
    chain = []
    while isinstance(var, relax.Var) and op_name(defs.get(var)) in _THROUGH:
        value = defs[var]
        if op_name(value) == "relax.reshape":
            src, dst = shape_tuple(value.args[0]), shape_tuple(var)
            if src is None or dst is None or not dst or src[-1] != dst[-1]:
                return None
        chain.append(value)
        var = value.args[0]
    value = defs.get(var) if isinstance(var, relax.Var) else None
    if op_name(value) != "relax.concat":
        return None
    tup = value.args[0]
    tup = defs.get(tup, tup) if isinstance(tup, relax.Var) else tup
    shape = shape_tuple(var)
    if not isinstance(tup, relax.Tuple) or shape is None or len(tup.fields) < 2:
        return None
    if int(value.attrs.axis) % len(shape) != len(shape) - 1:
        return None
    shapes = {shape_tuple(f) for f in tup.fields}
    if len(shapes) != 1 or None in shapes or not all(isinstance(f, relax.Var) for f in tup.fields):
        return None
    return chain[::-1], [_unpadded(f, defs) for f in tup.fields]


def _term(var, defs, uses) -> _Term | None:
    """``var`` as one step's product or bias sum read from a gate concat (see ``_Term``),
    maybe cast (a bf16 weight's fp32 product, rounded)."""
    value = defs.get(var)
    if op_name(value) == "relax.astype" and isinstance(value.args[0], relax.Var) and uses.get(var, 0) == 1:
        inner = _term(value.args[0], defs, uses)
        if inner is not None and inner.cast is None:
            inner.cast = str(value.attrs.dtype)
        return inner if inner is not None and inner.cast == str(value.attrs.dtype) else None
    name = op_name(value)
    if uses.get(var, 0) != 1 or name not in ("relax.matmul", "relax.collapse_sum_to"):
        return None
    operand = 1 if name == "relax.matmul" else 0
    if len(shape_tuple(var) or ()) != (2 if name == "relax.matmul" else 1):
        return None
    found = _gate_concat(value.args[operand], defs)
    return None if found is None else _Term(value, operand, *found)


def _sum_leaves(var, defs, uses, chain: list) -> list | None:
    """The leaves of the ``add`` tree rooted at ``var`` (each add read once), left to right;
    the adds are appended to ``chain``."""
    value = defs.get(var)
    if op_name(value) != "relax.add" or (chain and uses.get(var, 0) != 1):
        return [var]
    chain.append(var)
    out = []
    for a in value.args:
        leaves = _sum_leaves(a, defs, uses, chain) if isinstance(a, relax.Var) else None
        if leaves is None:
            return None
        out += leaves
    return out


@dataclass
class _Plan:
    terms: dict      # term var -> _Term
    adds: list       # the add vars of the sum
    wrappers: list   # (var, value) from the sum up to the gradient, innermost first
    gates: int


def _plan_for(grad, defs, uses) -> _Plan | None:
    """How to sum ``grad`` gate by gate, or None when it is not such a sum."""
    wrappers = []
    var = grad
    while op_name(defs.get(var)) in _WRAPPERS and isinstance(defs[var].args[0], relax.Var):
        value = defs[var]
        if op_name(value) == "relax.permute_dims" and [int(a) for a in value.attrs.axes] != [1, 0]:
            return None
        wrappers.append((var, value))
        var = value.args[0]
        if uses.get(var, 0) != 1:
            return None
    wrappers = wrappers[::-1]
    adds: list = []
    leaves = _sum_leaves(var, defs, uses, adds)
    if not leaves or len(leaves) < 2:
        return None
    terms = {leaf: _term(leaf, defs, uses) for leaf in leaves}
    if any(t is None for t in terms.values()):
        return None
    gates = {len(t.fields) for t in terms.values()}
    if len(gates) != 1:
        return None
    # the gates must end up on the gradient's rows: its axis 0 is the sum's last axis
    ndim = len(shape_tuple(grad) or ())
    flips = sum(op_name(v) == "relax.permute_dims" for _, v in wrappers)
    if not (ndim == 1 and flips == 0) and not (ndim == 2 and flips % 2 == 1):
        return None
    return _Plan(terms, adds, wrappers, gates.pop())


def _redo(value: relax.Call, arg: relax.Expr, last: int) -> relax.Expr:
    """``value`` applied to ``arg`` instead of its first argument; a reshape ends in ``last``."""
    if op_name(value) == "relax.reshape":
        lead = list(shape_tuple(value.args[1]) or [int(d) for d in value.args[1].values])[:-1]
        return R.reshape(arg, lead + [last])
    if op_name(value) == "relax.permute_dims":
        return R.permute_dims(arg, [int(a) for a in value.attrs.axes])
    return R.astype(arg, value.attrs.dtype)


@relax.expr_functor.mutator
class _PerGate(relax.PyExprMutator):
    def __init__(self, plans: dict):
        super().__init__()
        self.terms, self.adds, self.wrapped, self.grads = {}, set(), set(), {}
        for grad, plan in plans.items():
            self.terms.update({v: (t, plan.gates) for v, t in plan.terms.items()})
            self.adds.update(plan.adds)
            self.wrapped.update(v for v, _ in plan.wrappers[:-1])
            self.grads[grad] = plan
        self.blocks: dict = {}  # original var -> its per-gate vars

    def _term_blocks(self, term: _Term, gates: int) -> list:
        bb, out = self.builder_, []
        width = shape_tuple(term.fields[0])[-1]
        for f in term.fields:
            x = f
            for op in term.chain:
                x = bb.emit(_redo(op, x, width))
            args = list(term.value.args)
            args[term.operand] = x
            if op_name(term.value) == "relax.collapse_sum_to":
                call = R.collapse_sum_to(x, [width])
            else:
                call = relax.Call(term.value.op, args, term.value.attrs)
            y = bb.emit(call)
            out.append(bb.emit(R.astype(y, term.cast)) if term.cast else y)
        return out

    def visit_var_binding_(self, binding):
        var, bb = binding.var, self.builder_
        if var in self.terms:
            self.blocks[var] = self._term_blocks(*self.terms[var])
        elif var in self.adds:
            a, b = binding.value.args
            self.blocks[var] = [bb.emit(R.add(x, y)) for x, y in zip(self.blocks[a], self.blocks[b])]
        elif var in self.wrapped or var in self.grads:
            src = binding.value.args[0]
            self.blocks[var] = [bb.emit(_redo(binding.value, x, 0)) for x in self.blocks[src]]
        else:
            super().visit_var_binding_(binding)
            return
        if var in self.grads:  # the gradient: its gates' rows, stacked (never built, see above)
            bb.emit_normalized(relax.VarBinding(var, bb.normalize(R.concat(self.blocks[var], axis=0))))


def _gradients(func: relax.Function, defs: dict) -> list:
    """The gradient vars ``Gradient``'s adjoint returns (``(outputs, (grads...))``)."""
    ret = func.body.body
    while isinstance(ret, relax.Var) and ret in defs:
        ret = defs[ret]
    if not isinstance(ret, relax.Tuple) or len(ret.fields) != 2:
        return []
    grads = ret.fields[1]
    grads = defs.get(grads, grads) if isinstance(grads, relax.Var) else grads
    return [g for g in getattr(grads, "fields", []) if isinstance(g, relax.Var)]


def weight_grads_per_gate(func: relax.Function) -> relax.Function:
    """``func`` (an adjoint) with each gate-concat weight or bias gradient summed per gate and
    returned as ``concat(rows, axis=0)`` (module docstring).

    Parameters
    ----------
    func : relax.Function
        The adjoint: ``Gradient``'s, returning ``(forward outputs, gradients)``.

    Returns
    -------
    relax.Function
        Unchanged when no gradient is such a sum.
    """
    binds = bindings(func)
    defs = {b.var: b.value for b in binds}
    uses = _uses(func)
    plans = {}
    for g in _gradients(func, defs):
        plan = _plan_for(g, defs, uses)
        if plan is not None:
            plans[g] = plan
    if not plans:
        return func
    out = relax.analysis.remove_all_unused(_PerGate(plans).visit_expr(func))
    # which gradients are gate rows: only those are applied block by block (block_updates.py)
    return out.with_attr(GATE_ROWS_ATTR, sorted(g.name for g in plans))
