"""A cheap broadcast term read by several fusing ops is computed once per reader, after autodiff.

The norms' gradients (``norm_grad.py``) read ``gamma * dy``, ``x - mean`` and
``(x - mean) * rstd`` several times each: in two per-row sums and in the final ``dx``. Bound
once, each is a full-size tensor that ``FuseOps`` must materialise, since it has several
readers, and that stays live until its last reader. Computed once per reader, each copy fuses
into its reader (an elementwise op or a reduction), and no full-size tensor is stored between
them: the backward keeps ``x``, ``dy`` and two small vectors, as PyTorch's fused norm kernels
do. TVM's autodiff emits many identical bindings, which are merged first
(``EliminateCommonSubexpr``); this pass then splits only what it should.

A term qualifies when it is an elementwise ``add``/``subtract``/``multiply``/``divide`` of one
full-size tensor (the result's shape and dtype) and operands with fewer elements (per-row or
per-channel vectors, constants), and every reader is in the same dataflow block and is an op
that fuses its inputs (elementwise arithmetic, ``where``, unary maths, reductions). The copies
are the same call on the same inputs, so the step's values are bit for bit the same.
"""
from __future__ import annotations

from math import prod

import tvm
from tvm import relax

from .relax_shapes import known_shape
from .relax_walk import op_name

__all__ = ["merge_identical_bindings", "per_consumer_terms"]

_TERM_OPS = frozenset({"relax.add", "relax.subtract", "relax.multiply", "relax.divide"})
# readers that FuseOps fuses an elementwise producer into
_FUSING_READERS = _TERM_OPS | frozenset({
    "relax.where", "relax.negative", "relax.exp", "relax.log", "relax.sqrt", "relax.rsqrt",
    "relax.tanh", "relax.sigmoid", "relax.square", "relax.sum", "relax.mean", "relax.variance",
    "relax.max", "relax.min"})


def _elements(expr) -> int | None:
    shape = known_shape(expr)
    return None if shape is None else prod(shape)


def _is_term(value: relax.Expr) -> bool:
    """An elementwise op of exactly one full-size tensor and smaller operands."""
    if op_name(value) not in _TERM_OPS:
        return False
    out = _elements(value)
    sizes = [_elements(a) for a in value.args]
    if out is None or any(s is None for s in sizes):
        return False
    full = [a for a, s in zip(value.args, sizes) if s == out]
    return len(full) == 1 and isinstance(full[0], relax.Var) and full[0].ty.dtype == value.ty.dtype


def _replace_arg(value: relax.Call, old: relax.Var, new: relax.Var) -> relax.Call:
    args = [new if a.same_as(old) else a for a in value.args]
    return relax.Call(value.op, args, value.attrs, value.ty_args, value.span, ret_ty=value.ty)


def _split_block(block: relax.DataflowBlock, frozen: set) -> relax.DataflowBlock:
    order = [b.var for b in block.bindings]
    value = {b.var: b.value for b in block.bindings}
    readers: dict = {v: [] for v in order}
    for v in order:
        for a in getattr(value[v], "args", []):
            # bindings come in order, so a reader reading ``a`` twice is the last one listed
            if isinstance(a, relax.Var) and a in readers and not (readers[a] and readers[a][-1].same_as(v)):
                readers[a].append(v)
    before: dict = {}  # var -> copies to emit right before its binding
    for v in reversed(order):  # readers first: a copy of a later term is a reader of an earlier one
        users = readers[v]
        if (len(users) < 2 or v in frozen or not isinstance(v, relax.DataflowVar) or not _is_term(value[v])
                or any(op_name(value[u]) not in _FUSING_READERS for u in users)):
            continue
        for k, user in enumerate(users[1:], start=1):
            copy = relax.DataflowVar(f"{v.name}_for{k}", v.ty)
            value[copy] = value[v]
            value[user] = _replace_arg(value[user], v, copy)
            before.setdefault(user, []).append(copy)
            readers[copy] = [user]
            for a in value[v].args:
                if isinstance(a, relax.Var) and a in readers:
                    readers[a].append(copy)
        readers[v] = users[:1]
    out: list = []

    def emit(v) -> None:
        for c in before.get(v, []):
            emit(c)
        out.append(relax.VarBinding(v, value[v]))

    for v in order:
        emit(v)
    return relax.DataflowBlock(out)


def per_consumer_terms(func: relax.Function, after: relax.Var | None = None) -> relax.Function:
    """``func`` with each qualifying term (module docstring) bound once per reader.

    Parameters
    ----------
    func : relax.Function
        The adjoint, after autodiff and after identical bindings were merged.
    after : relax.Var, optional
        Only terms bound after this variable's binding are split: the loss, so that the
        forward (a linear layer's bias add read by a norm's statistics) is computed once.

    Returns
    -------
    relax.Function
        The same function where nothing qualifies.
    """
    frozen: set = set()
    if after is not None:
        for b in (b for block in func.body.blocks for b in block.bindings):
            frozen.add(b.var)
            if b.var.same_as(after):
                break
    blocks = [_split_block(b, frozen) if isinstance(b, relax.DataflowBlock) else b for b in func.body.blocks]
    body = relax.SeqExpr(blocks, func.body.body)
    out = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)
    return relax.transform.Normalize()(tvm.IRModule({"f": out}))["f"]


def merge_identical_bindings(func: relax.Function) -> relax.Function:
    """``func`` with structurally equal call bindings bound once (TVM's ``EliminateCommonSubexpr``),
    and the aliases that leaves (``b = a``) replaced by ``a`` (``CanonicalizeBindings``)."""
    mod = relax.transform.EliminateCommonSubexpr(call_only=True)(tvm.IRModule({"f": func}))
    return relax.transform.CanonicalizeBindings()(mod)["f"]
