"""Assemble ``train_step``: the adjoint's bindings, with the in-place updates placed among them."""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from .flatten_tuples import InlineTupleVars
from .accumulate import AccumulateInPlace
from .batched_weight_grads import MergeBatchedWeightGrads
from .transpose_sums import TransposeProductSums
from .take_backward import TakeBackwardKernels
from .nt_matmul import FuseNTMatmul
from .optim import Optimizer
from .block_updates import row_blocks
from .rnn_gate_grads import GATE_ROWS_ATTR
from .placement import UpdateEmitter, update_points
from .reductions import blocked_reduction
from .relax_walk import bindings, resolve
from .signature import StepNames, StepSignature, build_signature
from .simplify import drop_noop_reshapes


@dataclass
class AdjointParts:
    """What the adjoint ``fwd_adjoint`` returns, taken apart."""

    loss: relax.Expr
    carried_new: list   # new value of each carried state
    stats: list         # each BatchNorm's batch mean, then variance
    grads: list         # one gradient per trainable parameter
    ret_pack: set       # bindings that only pack the return tuple (left out of the step)


def split_adjoint(adj: relax.Function, n_carry: int) -> AdjointParts:
    """Take apart ``adj``'s return value ``((loss, *carried, *stats), (grads...))``.

    Parameters
    ----------
    adj : relax.Function
        The adjoint from ``relax.transform.Gradient`` (decomposed, precision-fixed).
    n_carry : int
        How many carried states the forward returns after the loss.

    Returns
    -------
    AdjointParts
    """
    defs = {b.var: b.value for b in bindings(adj)}
    ret = resolve(adj.body.body, defs)
    if not isinstance(ret, relax.Tuple) or len(ret.fields) != 2:
        raise RuntimeError(f"unexpected adjoint return {ret}")
    fwd_out = resolve(ret.fields[0], defs)
    grads = resolve(ret.fields[1], defs)
    if isinstance(fwd_out, relax.Tuple):
        loss, rest = fwd_out.fields[0], list(fwd_out.fields[1:])
    else:
        loss, rest = fwd_out, []
    ret_pack = {e for e in (adj.body.body, ret.fields[0], ret.fields[1])
                if isinstance(e, relax.Var) and e in defs and isinstance(defs[e], relax.Tuple)}
    return AdjointParts(loss=loss, carried_new=rest[:n_carry], stats=rest[n_carry:],
                        grads=list(grads.fields), ret_pack=ret_pack)


def _emit_binding(bb: relax.BlockBuilder, b: relax.Binding, precise_reductions: bool) -> None:
    new = blocked_reduction(bb, b.value, b.var) if precise_reductions else None
    if new is None:
        bb.emit_normalized(b)
    else:
        bb.emit_normalized(relax.VarBinding(b.var, bb.normalize(new)))


def assemble(adj: relax.Function, names: StepNames, optimizer: Optimizer, bn_info: list, *,
             precise_reductions: bool = True,
             extra_module: tvm.IRModule | None = None
             ) -> tuple[tvm.IRModule, StepSignature, dict]:
    """Build ``train_step``: the adjoint's bindings with each in-place update placed among them.

    Parameters
    ----------
    adj : relax.Function
        The adjoint, parameters ordered as ``names``.
    names : StepNames
        Names of the forward's parameters.
    optimizer : Optimizer
        The update rule.
    bn_info : list
        ``(spec, count, dtype)`` per BatchNorm.
    precise_reductions : bool
        Split multi-axis float reductions (see ``reductions.blocked_reduction``).
    extra_module : tvm.IRModule, optional
        Functions to carry into the result (e.g. a backbone's kernels).

    Returns
    -------
    (tvm.IRModule, StepSignature, dict)
        The module with ``train_step``, its signature, and ``update_deps`` (update binding
        name -> the parameter or state it mutates).
    """
    binds = bindings(adj)
    parts = split_adjoint(adj, len(names.carried))
    data, pvars, fvars, cvars = names.split(adj.params)
    assert len(parts.grads) == len(pvars)
    sig = build_signature(names, adj.params, optimizer, bn_info,
                          [parts.stats[2 * j].ty for j in range(len(bn_info))])
    at = update_points(binds, pvars, parts.grads, cvars, parts.carried_new, parts.stats)

    bb = relax.BlockBuilder()
    if extra_module is not None:
        for gv, f in extra_module.functions.items():
            bb.add_func(f, gv.name_hint if hasattr(gv, "name_hint") else gv.name)
    emitter = UpdateEmitter(bb, optimizer, sig, list(names.params), pvars, parts.grads,
                            list(names.carried), cvars, parts.carried_new, bn_info, parts.stats)
    # a gradient stacked from row blocks by rnn_gate_grads.py (an RNN weight's gates) is applied
    # block by block, unless something besides the return value reads the stack; other stacked
    # gradients (nn.MultiheadAttention's in_proj_weight) are applied whole
    gate_rows = {str(n) for n in (adj.attrs or {}).get(GATE_ROWS_ATTR, [])}
    if gate_rows:  # (a walk over every binding: only for steps with RNN gate rows)
        defs = {b.var: b.value for b in binds}
        read = {v for b in binds if b.var not in parts.ret_pack for v in relax.analysis.free_vars(b.value)}
        emitter.blocks = {k: blocks for k, (p, g) in enumerate(zip(pvars, parts.grads))
                          if g.name in gate_rows and g not in read
                          and (blocks := row_blocks(g, defs, p)) is not None}
    stacked = {parts.grads[k] for k in emitter.blocks}  # never built
    with bb.function("train_step", sig.parameters(data, pvars, fvars, cvars), pure=True,
                     attrs={"num_input": len(data)}):
        with bb.dataflow():
            emitter.emit(at.get(-1, []))
            for i, b in enumerate(binds):
                if b.var not in parts.ret_pack and b.var not in stacked:
                    _emit_binding(bb, b, precise_reductions)
                emitter.emit(at.get(i, []))
            out = bb.emit_output(relax.Tuple([parts.loss, relax.Tuple(emitter.updated)]))
        bb.emit_func_output(out)
    # matmul(x, permute_dims(w)) -> one NT-matmul kernel: no transposed copy of a weight
    # (or of an activation) is materialised, forward or backward
    # (FuseNTMatmul: TVM's FuseTransposeMatmul with operands that cannot swap, nt_matmul.py)
    # adjoint tuples (of split / chunk outputs, nested in RNN steps) are read field by
    # field, else FuseTIR fails on a tuple parameter (GRU; flatten_tuples.py)
    # a gradient summed over many uses (an RNN weight over its time steps) is accumulated as
    # each contribution arrives, not in one fused kernel at the end (accumulate.py)
    # the transpose of a weight-gradient sum is summed transposed, without a copy (transpose_sums.py)
    # a weight gradient summed over leading dims is one 2-D product (batched_weight_grads.py)
    mod = FuseNTMatmul()(MergeBatchedWeightGrads()(bb.get()))
    # an index gradient along a later axis (`out[:, -1]`) indexes its output per dimension,
    # so a GPU build can give each thread its own columns (take_backward.py)
    mod = AccumulateInPlace()(TransposeProductSums()(mod))
    mod = TakeBackwardKernels()(mod)
    # a reshape onto the tensor's own shape (two that cancel: the logits to (B, T, V) and back)
    # would alias its input, and an aliased tensor is never overwritten in place (simplify.py)
    mod["train_step"] = drop_noop_reshapes(mod["train_step"])
    mod = relax.transform.DeadCodeElimination()(InlineTupleVars()(mod))
    return mod, sig, emitter.update_deps
