"""A GPU schedule rule: a reduction read only by the kernel's last, elementwise stage is computed in
that stage's thread, in registers, instead of through a global buffer.

Fused backward kernels end like this: ``max_pool2d``'s backward sums, for each input element, the
gradients of the windows that chose it (a reduction), and ReLU's backward then masks that sum
(``where``). TVM's fallback rule gives every block its own thread mapping, so the sum goes through a
buffer of the whole input's size in global memory: kernel scratch that the step's memory plan must
hold (886 MB for ResNet-50 at batch 184, measured on an H200). Here each thread of the last stage
computes the one sum it reads (``compute_at``) into a register (``local`` scope). The sum's order
over its reduction loops is unchanged, so the results are bit for bit the fallback's.

The rule applies when, after inlining, the last block is spatial and writes a parameter, and some
reduction block writes an intermediate buffer that only the last block reads, at exactly the element
it writes. Other blocks get the fallback mapping (one thread per output element). Otherwise it
returns None and the next rule is tried. An accumulator that only its own reduction reads (the running
maximum beside max-pool's argmax) is kept in the thread too.
"""
from __future__ import annotations

from tvm import s_tir, tirx

__all__ = ["ReductionIntoEpilogue"]

RULE_NAME = "ReductionIntoEpilogue"


def _index_vars(region) -> list | None:
    """The variables of a region that reads single elements at plain variables, else None."""
    out = []
    for r in region.region:
        if not (isinstance(r.extent, tirx.IntImm) and int(r.extent) == 1 and isinstance(r.min, tirx.Var)):
            return None
        out.append(r.min)
    return out


def _reads_at_own_element(last, buf) -> bool:
    """Whether block ``last`` reads ``buf`` only at the element its own iterators name, in order."""
    iters = [iv.var for iv in last.iter_vars]
    regions = [r for r in last.reads if r.source.same_as(buf)]
    if len(regions) != 1:
        return False
    vars_ = _index_vars(regions[0])
    return vars_ is not None and len(vars_) == len(iters) and all(a.same_as(b) for a, b in zip(vars_, iters))


def _readers(sch, blocks, buf) -> list:
    return [b for b in blocks if any(r.source.same_as(buf) for r in sch.get(b.block_rv).reads)]


class ReductionIntoEpilogue:
    """Schedule rule (``apply(func, target, tunable)`` as dlight's): see the module notes."""

    def apply(self, func: tirx.PrimFunc, target, _tunable: bool = False):
        from tvm.s_tir.dlight import base  # pylint: disable=import-outside-toplevel
        from tvm.s_tir.dlight.analysis import normalize_prim_func  # pylint: disable=import-outside-toplevel

        if not isinstance(func, tirx.PrimFunc) or "gpu" not in target.keys:
            return None
        sch = s_tir.Schedule(func)
        infos = normalize_prim_func(sch)
        if infos is None or len(infos) < 2:
            return None
        infos = base.try_inline(sch, infos)
        last = infos[-1]
        last_block = sch.get(last.block_rv)
        params = list(func.params)  # TVM 0.27: a buffer parameter is the buffer itself
        if set(last.dom_kind()) != {"S"} or len(last_block.writes) != 1 \
                or not any(last_block.writes[0].source.same_as(p) for p in params):
            return None
        moved = []
        for info in infos[:-1]:
            block = sch.get(info.block_rv)
            if "R" not in info.dom_kind() or len(block.writes) != 1:
                continue
            buf = block.writes[0].source
            if any(buf.same_as(p) for p in params):
                continue
            readers = _readers(sch, infos, buf)
            if readers == [last] or (len(readers) == 2 and info in readers and last in readers):
                if _reads_at_own_element(last_block, buf):
                    moved.append(info)
        if not moved:
            return None
        threads = base.max_threads_per_block(target)
        for info in infos:
            if info in moved:
                continue
            loops = sch.get_loops(info.block_rv)
            kinds = info.dom_kind()
            s_loops = [lp for lp, k in zip(loops, kinds) if k == "S"]
            r_loops = [lp for lp, k in zip(loops, kinds) if k != "S"]
            if not s_loops:
                s_loops.append(sch.add_unit_loop(info.block_rv))
            sch.reorder(*s_loops, *r_loops)
            bx, tx = sch.split(sch.fuse(*s_loops), factors=[None, threads])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            if info is last:
                for m in moved:
                    sch.compute_at(m.block_rv, tx, preserve_unit_loops=True)
                    sch.set_scope(m.block_rv, 0, "local")
            elif r_loops:
                # an accumulator no other block reads (argmax's running maximum) stays in the thread
                block = sch.get(info.block_rv)
                for i, w in enumerate(block.writes):
                    if not any(w.source.same_as(p) for p in params) \
                            and _readers(sch, infos, w.source) in ([], [info]):
                        sch.set_scope(info.block_rv, i, "local")
                sch.decompose_reduction(info.block_rv, r_loops[0])
        return sch
