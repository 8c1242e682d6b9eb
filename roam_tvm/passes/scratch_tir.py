"""Kernel intermediates, one PrimFunc at a time: remove the ones that are waste, expose the rest.

A fused kernel keeps each intermediate of its chain in a root-level buffer of
global scope. What the target's lowering leaves of those buffers is requested at
run time as workspace (``TVMBackendAllocWorkspace``), outside any memory plan.

``shrink_intermediates`` removes the waste without changing a single result bit:

* an intermediate written by a spatial (non-reduction) block is inlined into its
  consumers when no consumer iterates over more points than the intermediate has
  (reshapes, transposes, elementwise chains, a product feeding a ``sum``), so no
  value is computed more often than before;
* the consumers of a reduction's intermediate (``matmul`` then ``add``: the tied
  word-embedding gradient) are moved under the reduction's spatial loops, so the
  full result is never materialised: lowering compacts it to one element; only
  when each consumer then still runs over all its points (not a ``pad``, whose
  zeros no point of the reduction covers).

Every element is still computed by the same operations in the same order, so
outputs are bit-identical to the unshrunk kernel.

``lift_intermediates`` turns the root-level buffers that remain into extra output
parameters, placed after the kernel's own outputs; ``LiftKernelScratch`` passes
them from Relax as ordinary tensors, so memory planning places them.
"""
from __future__ import annotations

from functools import reduce

import tvm
import tvm_ffi
from tvm import s_tir, tirx

__all__ = ["shrink_intermediates", "root_intermediates", "lift_intermediates", "whole_root_allocations"]


def _numel(buf: tirx.Buffer) -> int | None:
    dims = [d.value if isinstance(d, tirx.IntImm) else None for d in buf.shape]
    return None if None in dims else reduce(lambda a, b: a * b, dims, 1)


def _domain(block: s_tir.SBlock) -> int | None:
    """The number of points a block iterates over (None if not constant)."""
    extents = [iv.dom.extent for iv in block.iter_vars]
    vals = [e.value if isinstance(e, tirx.IntImm) else None for e in extents]
    return None if None in vals else reduce(lambda a, b: a * b, vals, 1)


def _is_spatial(block: s_tir.SBlock) -> bool:
    return all(iv.iter_type == tirx.IterVar.DataPar for iv in block.iter_vars)


def _written_intermediate(sch: s_tir.Schedule, block_rv) -> tirx.Buffer | None:
    """The root-allocated global buffer a block writes, if it writes exactly one."""
    block = sch.get(block_rv)
    if len(block.writes) != 1:
        return None
    buf = block.writes[0].source
    root = sch.get(sch.get_sblock("root"))
    if not any(buf.same_as(b) for b in root.alloc_buffers) or buf.scope() != "global":
        return None
    return buf


def _try_inline(sch: s_tir.Schedule, block_rv) -> bool:
    block = sch.get(block_rv)
    buf = _written_intermediate(sch, block_rv)
    if buf is None or not _is_spatial(block):
        return False
    size = _numel(buf)
    consumers = sch.get_consumers(block_rv)
    if size is None or not consumers:
        return False
    for c in consumers:
        dom = _domain(sch.get(c))
        if dom is None or dom > size:  # a broadcast or a contraction would recompute values
            return False
    try:
        sch.compute_inline(block_rv)
    except s_tir.ScheduleError:
        return False
    return True


def _spatial_prefix(sch: s_tir.Schedule, block_rv) -> list:
    """The loops above a reduction block bound only to its spatial iterators, when
    every reduction loop comes after them (``[]`` otherwise)."""
    block = sch.get(block_rv)
    loops = sch.get_loops(block_rv)
    if not loops:
        return []
    realize = sch.get(loops[-1]).body
    if not isinstance(realize, s_tir.SBlockRealize) or not realize.block.same_as(block):
        return []
    reduce_vars: set = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type != tirx.IterVar.DataPar:
            reduce_vars |= _vars_of(value)
    prefix = []
    for i, loop_rv in enumerate(loops):
        if sch.get(loop_rv).loop_var.name in reduce_vars:
            rest = [sch.get(l).loop_var.name for l in loops[i:]]
            return prefix if all(n in reduce_vars for n in rest) else []
        prefix.append(loop_rv)
    return []  # no reduction loop


def _vars_of(expr) -> set:
    names: set = set()

    def visit(node):
        if isinstance(node, tirx.Var):
            names.add(node.name)

    tvm_ffi.structural_walk(expr, [(tirx.Var, visit)])
    return names


def _try_epilogue_under(sch: s_tir.Schedule, block_rv) -> s_tir.Schedule | None:
    """Move the spatial consumers of a reduction's intermediate under its spatial loops."""
    block = sch.get(block_rv)
    if _is_spatial(block) or _written_intermediate(sch, block_rv) is None:
        return None
    prefix = _spatial_prefix(sch, block_rv)
    consumers = sch.get_consumers(block_rv)
    if not prefix or not consumers or not all(_is_spatial(sch.get(c)) for c in consumers):
        return None
    domains = [_domain(sch.get(c)) for c in consumers]
    trial = sch.copy()
    loop = trial.get_loops(block_rv)[len(prefix) - 1]
    try:
        for c in consumers:
            trial.reverse_compute_at(c, loop, preserve_unit_loops=True)
    except s_tir.ScheduleError:
        return None
    # reverse_compute_at covers a consumer only where it reads the intermediate: a consumer
    # that also writes points it computes without it (a pad's zeros) would leave them unwritten
    if any(d is None or _iterations(trial, c) != d for c, d in zip(consumers, domains)):
        return None
    return trial


def _iterations(sch: s_tir.Schedule, block_rv) -> int | None:
    """How many times ``block_rv`` runs where it stands (its loops' extents; None if not
    constant or guarded by a predicate)."""
    loops = sch.get_loops(block_rv)
    realize = sch.get(loops[-1]).body if loops else None
    if not isinstance(realize, s_tir.SBlockRealize) or not realize.block.same_as(sch.get(block_rv)):
        return None
    if not (isinstance(realize.predicate, tirx.IntImm) and realize.predicate.value == 1):
        return None
    extents = [sch.get(lp).extent for lp in loops]
    if not all(isinstance(e, tirx.IntImm) for e in extents):
        return None
    return reduce(lambda a, b: a * b, (e.value for e in extents), 1)


def shrink_intermediates(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with its wasteful intermediates removed (see the module notes).

    Returns ``func`` itself when nothing applies (or it is not a block-level kernel).
    """
    try:
        sch = s_tir.Schedule(func)
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
    except (s_tir.ScheduleError, tvm.TVMError, ValueError):
        return func
    changed = False
    # consumers first, so a chain collapses into its last block
    for block_rv in reversed(list(blocks)):
        changed |= _try_inline(sch, block_rv)
    for block_rv in sch.get_child_blocks(sch.get_sblock("root")):
        trial = _try_epilogue_under(sch, block_rv)
        if trial is not None:
            sch, changed = trial, True
    return sch.mod["main"] if changed else func


def whole_root_allocations(func: tirx.PrimFunc) -> set[str]:
    """Names of the root-level global buffers that lowering allocates whole.

    TVM's ``PlanAndUpdateBufferAllocationLocation`` moves each allocation to the
    lowest scope that uses it (where it is then compacted); what it leaves in the
    root block is allocated at its full size.
    """
    seq = tvm.transform.Sequential([s_tir.transform.LowerInitBlock(),
                                    s_tir.transform.PlanAndUpdateBufferAllocationLocation()])
    planned = seq(tvm.IRModule({"main": func}))["main"]
    return {b.name for b in root_intermediates(planned)}


def root_intermediates(func: tirx.PrimFunc) -> list[tirx.Buffer]:
    """The global-scope buffers allocated whole in the root block (constant shapes only)."""
    root = func.body.block if isinstance(func.body, s_tir.SBlockRealize) else None
    if root is None:
        return []
    return [b for b in root.alloc_buffers if b.scope() == "global" and _numel(b) is not None]


def lift_intermediates(func: tirx.PrimFunc, buffers: list, position: int) -> tirx.PrimFunc:
    """``func`` with ``buffers`` (root allocations) as parameters inserted at ``position``.

    The kernel writes and reads them as before; the caller now owns their memory.
    """
    realize = func.body
    root = realize.block
    keep = [b for b in root.alloc_buffers if not any(b.same_as(x) for x in buffers)]
    if len(keep) + len(buffers) != len(root.alloc_buffers):
        raise ValueError(f"not all of {[b.name for b in buffers]} are root allocations of the kernel")
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, root.body, root.init,
                            keep, root.match_buffers, root.annotations)
    new_body = s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_root)
    params = list(func.params[:position]) + list(buffers) + list(func.params[position:])
    return tirx.PrimFunc(params, new_body, func.ret_type, func.attrs)
