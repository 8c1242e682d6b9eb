"""The backward redoes cheap elementwise steps from their source instead of keeping their results.

``torch.export`` spells ``hardswish`` as ``x * clip(x + 3, 0, 6) / 6`` (two clips, one per
bound), ``hardsigmoid`` as ``clip(x + 3, 0, 6) / 6``, ``mish`` as
``x * tanh(where(x > 20, x, log(exp(x) + 1)))`` and TVM's importer ``elu`` as
``relu(x) - alpha * relu(1 - exp(x))``. Relax ``Gradient`` keeps every operand its
gradients read: for hardswish ``x`` and each clip's output, where PyTorch's
``hardswish_backward`` keeps only ``x``. Likewise ``weight_norm``'s ``||v||`` is
``sum(abs(v) ** 2) ** 0.5`` once exported, and the power's gradient keeps ``abs(v)``, a
weight-sized copy of the parameter ``v``.

``recompute_elementwise_in_backward`` finds each forward value computed by elementwise ops
(below) from a single tensor, its *root*, and one-element constants, with the root's shape.
A backward binding that reads such a value reads a fresh copy instead, recomputed from the
root just before it (FuseOps folds it into that binding's kernel), when

* every backward reader of the value is itself elementwise (a matmul or a convolution would
  need the copy as a tensor: the kept one is as good), and
* that costs no extra tensor: the root is kept for the backward anyway (read by it
  directly, or a parameter), or the values so redone from a root take more bytes than it.

A value of *one* such op on several tensors is redone too when every tensor it reads is
kept for the backward anyway (read by it directly, or a parameter) and every backward reader
is elementwise: a GRU step's ``h - n`` (read by the update gate's gradient) is redone from
``h`` (kept for ``W_hh``'s gradient) and ``n`` (kept for the tanh's), as PyTorch's fused
GRU cell does, instead of keeping a third tensor of the same size per step.

The forward's copies then die with their last forward reader. Values are identical: the
same ops on the same input, in the same order.
"""
from __future__ import annotations

from typing import Dict, List, Set, Tuple

import tvm
import tvm_ffi
from tvm import relax

from .backward_redo import backward_vars, reads, redo_in_backward
from .relax_shapes import scalar_value
from .relax_walk import VIEW_OPS, bindings, op_name

#: ops a value may be redone with (each elementwise, deterministic)
_STEPS = frozenset({
    "relax.abs", "relax.negative", "relax.clip", "relax.exp", "relax.log", "relax.tanh",
    "relax.sigmoid", "relax.sqrt", "relax.rsqrt", "relax.erf", "relax.square",
    "relax.nn.relu", "relax.add", "relax.subtract", "relax.multiply", "relax.divide",
    "relax.maximum", "relax.minimum", "relax.power", "relax.greater", "relax.greater_equal",
    "relax.less", "relax.less_equal", "relax.equal", "relax.not_equal", "relax.logical_and",
    "relax.logical_or", "relax.logical_not", "relax.where"})
#: backward readers a fresh copy fuses into (elementwise themselves)
_READERS = _STEPS | {"relax.zeros_like", "relax.ones_like", "relax.astype"}
#: at most this many ops redone per value read
_MAX_OPS = 12


def _tensor(v: relax.Expr) -> relax.TensorType | None:
    ty = getattr(v, "ty", None)
    return ty if isinstance(ty, relax.TensorType) and ty.shape is not None else None


def _scalar(arg: relax.Expr) -> bool:
    """A one-element constant, or an immediate (clip's bounds)."""
    return scalar_value(arg) is not None or isinstance(getattr(arg, "value", None), (int, float))


def _nbytes(v: relax.Var) -> int | None:
    """Bytes of ``v``; None for a symbolic shape (a dynamic batch or sequence)."""
    ty = _tensor(v)
    n = 1
    for s in ty.shape.values:
        if not isinstance(getattr(s, "value", None), int):
            return None
        n *= int(s.value)
    return n * max(1, tvm.runtime.DataType(str(ty.dtype)).bits // 8)


def _smaller(root: relax.Var, members: List[relax.Var]) -> bool:
    """The root takes fewer bytes than the members (False when a size is unknown)."""
    sizes = [_nbytes(v) for v in members]
    r = _nbytes(root)
    return r is not None and None not in sizes and r < sum(sizes)


def _roots(func: relax.Function, backward: Set[relax.Var]) -> Dict[relax.Var, relax.Var]:
    """Forward var -> the one tensor it is computed from by ``_STEPS`` (see the docstring)."""
    root: Dict[relax.Var, relax.Var] = {}
    size: Dict[relax.Var, int] = {}  # ops redone for a var
    for b in bindings(func):
        if b.var in backward:
            break
        value = b.value
        if op_name(value) not in _STEPS or _tensor(b.var) is None:
            continue
        srcs = [a for a in value.args if isinstance(a, relax.Var)]
        others = [a for a in value.args if not isinstance(a, relax.Var)]
        if not srcs or not all(_scalar(o) for o in others):
            continue
        found = {root.get(s, s) for s in srcs}
        if len(found) != 1:
            continue
        r = found.pop()
        if _tensor(r) is None or not tvm_ffi.structural_equal(_tensor(r).shape,
                                                             _tensor(b.var).shape):
            continue  # a broadcast: the fresh copy would not be the same tensor
        n = 1 + sum(size.get(s, 0) for s in set(srcs))
        if n <= _MAX_OPS:
            root[b.var], size[b.var] = r, n
    return root


def _backward_reads(func: relax.Function, backward: Set[relax.Var]) -> Tuple[Set[relax.Var], Set[relax.Var]]:
    """Vars the backward reads, and those of them a non-elementwise backward op reads."""
    read_back: Set[relax.Var] = set()
    bad: Set[relax.Var] = set()  # read by a backward op a fresh copy does not fuse into
    for b in bindings(func):
        if b.var in backward:
            used = reads(b.value)
            read_back |= used
            if op_name(b.value) not in _READERS:
                bad |= used
    return read_back, bad


def _to_redo(func: relax.Function, read_back: Set[relax.Var], bad: Set[relax.Var],
             root: Dict[relax.Var, relax.Var]) -> Set[relax.Var]:
    """The values whose backward reads are worth redoing (see the module docstring)."""
    by_root: Dict[relax.Var, List[relax.Var]] = {}
    for v, r in root.items():
        if v in read_back and v not in bad:
            by_root.setdefault(r, []).append(v)
    params = set(func.params)
    out: Set[relax.Var] = set()
    for r, members in by_root.items():
        if r in read_back or r in params or _smaller(r, members):
            out |= set(members)
    return out


def _with_viewed(func: relax.Function, backward: Set[relax.Var], kept: Set[relax.Var]) -> Set[relax.Var]:
    """``kept`` and the forward tensors a kept view reads (an RNN step's ``h`` is kept as the
    reshaped matrix ``W_hh``'s gradient reads)."""
    views = [b for b in bindings(func) if b.var not in backward and op_name(b.value) in VIEW_OPS
             and isinstance(b.value.args[0], relax.Var)]
    out = set(kept)
    for b in reversed(views):  # a view of a view: the later binding first
        if b.var in out:
            out.add(b.value.args[0])
    return out


def _of_kept_operands(func: relax.Function, backward: Set[relax.Var], read_back: Set[relax.Var],
                      bad: Set[relax.Var]) -> Set[relax.Var]:
    """Forward values of one ``_STEPS`` op on two or more tensors the backward keeps anyway,
    read in the backward by elementwise ops only (see the module docstring)."""
    kept = _with_viewed(func, backward, read_back | set(func.params))
    out: Set[relax.Var] = set()
    for b in bindings(func):
        if b.var in backward:
            break
        if b.var not in read_back or b.var in bad or op_name(b.value) not in _STEPS or _tensor(b.var) is None:
            continue
        srcs = [a for a in b.value.args if isinstance(a, relax.Var)]
        others = [a for a in b.value.args if not isinstance(a, relax.Var)]
        if len(set(srcs)) >= 2 and all(_scalar(o) for o in others) and all(s in kept for s in srcs):
            out.add(b.var)
    return out


def recompute_elementwise_in_backward(func: relax.Function) -> relax.Function:
    """``func`` (an adjoint) with backward reads of cheap elementwise values redone from
    their root where that keeps fewer bytes (see the module docstring)."""
    backward = backward_vars(func)
    if not backward:
        return func
    root = _roots(func, backward)
    read_back, bad = _backward_reads(func, backward)
    redo = _to_redo(func, read_back, bad, root)
    single = _of_kept_operands(func, backward, read_back, bad) - redo
    # a fresh copy per reading binding, redone from the root (FuseOps folds it into the reader)
    func = redo_in_backward(func, redo, set(root), shared=False, backward=backward)
    # one op on kept tensors, apart: its recipe is itself, so its operands are read as kept
    # (even those the chains above redo elsewhere); forward vars survive the first rewrite
    return redo_in_backward(func, single, single, shared=False)
