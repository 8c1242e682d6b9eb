"""Thread binding for PrimFuncs written as plain loops, with no schedulable blocks.

Some legalized ops are not block-structured TIR but a loop program inside one opaque
block: TVM's ``take_backward`` (the embedding gradient; an IRBuilder program that
zero-fills the output, then scatter-adds ``grad[l, j]`` into ``out[idx[l], j]``) and
scalar updates such as ``increment_int64`` (``c[()] = c[()] + 1``). dlight has no rule
for them and the block-based fallback finds no blocks, so without help they would be
compiled as host code over device pointers.

``bind_loops`` turns each top-level statement of such a program into its own GPU
kernel (kernels on one stream run in program order, so the zero-fill finishes before
the scatter starts):

* a loop nest runs its leading loops in parallel, one thread per iteration (fused,
  split into blockIdx.x/threadIdx.x), and the rest serially inside the thread, when
  those leading loops **own** what they write (below);
* a loop the legalization itself marked ``parallel`` (TVM's ``index_put``: a copy, then
  ``out[idx[i]] = v[i]``) runs one thread per iteration when it only writes what it stores
  (no buffer it stores to is read in it): TVM declared the iterations independent, and at a
  repeated index one of the writes wins, unspecified which, as on TVM's parallel CPU loop and
  in PyTorch's CUDA ``index_put_`` (an accumulating ``+=`` reads what it stores: not bound);
* anything else that is small (at most ``serial_limit`` iterations, a scalar update
  has one) runs in a single thread;
* anything else raises ``LoopBindError`` with the reason.

Why the parallel loops are race-free. Let P be the leading loops bound to threads and
S the serial rest. For every buffer B the nest stores to, the rule looks at every load
and store of B and finds index positions whose expressions (a) use only P's loop vars
(no serial var, no value loaded from memory), (b) are the same expression in every
access to B, and (c) map P's iteration space one-to-one (``detect_iter_map`` proves the
map bijective). Then a thread touches B only at locations whose owner coordinates equal
its own image under an injective map, so two threads never touch the same element of
B: no write-write or read-write conflict. Buffers the nest only reads cannot race.
The nest body keeps its serial order inside each thread, so every element's
floating-point sums happen in the same order as in the loop program: results are
deterministic (and equal to the llvm build of the same loops), which atomics would
not give. For ``take_backward`` P is the fused (outer x inner) feature loop and S the
loop over the indices: each thread owns one output column and walks the indices
serially, so repeated indices are summed without conflict.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

__all__ = ["bind_loops", "LoopBindError", "LOOPS_RULE"]

LOOPS_RULE = "loops"

_THREADS = 256
_LOAD = tvm.ir.expr.TensorLoad  # what tirx.BufferLoad builds in TVM 0.27


class LoopBindError(ValueError):
    """The loop program has a statement with no race-free thread binding."""


def bind_loops(
    func: tirx.PrimFunc, target: tvm.target.Target, serial_limit: int = 4096
) -> tirx.PrimFunc:
    """Bind every top-level statement of a block-free loop program to GPU threads.

    Parameters
    ----------
    func : tirx.PrimFunc
        An unscheduled PrimFunc whose blocks (if any) have no iteration variables.
    target : tvm.target.Target
        The GPU target (bounds the threads per block).
    serial_limit : int
        Most loop iterations a statement may run in one GPU thread when no loop of it
        can run in parallel.

    Returns
    -------
    tirx.PrimFunc
        The same program with thread-bound loops; one kernel per top-level statement.

    Raises
    ------
    LoopBindError
        A block with iteration variables (not a loop program), or a statement that
        is neither parallel-safe nor small.
    """
    max_threads = int(target.attrs.get("max_num_threads", _THREADS))
    binder = _Binder(min(_THREADS, max_threads), serial_limit)
    return func.with_body(binder.rewrite(func.body))


class _Binder:
    """Rewrites the statement list under the opaque wrappers of a loop program."""

    def __init__(self, threads: int, serial_limit: int) -> None:
        self.threads = threads
        self.serial_limit = serial_limit

    def rewrite(self, stmt):
        if isinstance(stmt, s_tir.SBlockRealize):
            blk = stmt.block
            if len(blk.iter_vars) > 0:
                raise LoopBindError(f"block '{blk.name_hint}' has iteration variables")
            body = self.rewrite(blk.body)
            new_blk = s_tir.SBlock(blk.iter_vars, blk.reads, blk.writes, blk.name_hint, body,
                                   blk.init, blk.alloc_buffers, blk.match_buffers,
                                   blk.annotations)
            return s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, new_blk)
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key != "thread_extent":
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, self.rewrite(stmt.body))
        if isinstance(stmt, tirx.SeqStmt):
            return tirx.SeqStmt([self.bind(s) for s in stmt.seq])
        return self.bind(stmt)

    def bind(self, stmt):
        """One kernel for one top-level statement."""
        if not _accesses(stmt) or _is_bound(stmt):
            return stmt
        if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL and _plain_writes(stmt):
            return self._parallel([stmt], stmt.body)
        loops, body = _perfect_nest(stmt)
        reasons = []
        for k in range(len(loops), 0, -1):
            why = _not_owned(loops[:k], loops[k:], body)
            if why is None:
                return self._parallel(loops[:k], _nest(loops[k:], body))
            reasons.append(why)
        trips = _trip_count(stmt)
        if trips is not None and trips <= self.serial_limit:
            return _one_thread(stmt)
        names = [lp.loop_var.name for lp in loops]
        why = reasons[-1] if reasons else "not a loop nest"
        raise LoopBindError(
            f"loop nest over {names} ({trips or 'unknown'} iterations) has no race-free "
            f"parallel loop: {why}"
        )

    def _parallel(self, par, inner):
        dtype = str(par[0].loop_var.ty.dtype)
        total = tirx.const(1, dtype)
        for lp in par:
            total = total * lp.extent
        ana = tvm.sym.Analyzer()
        total = ana.simplify(total)
        threads = self.threads
        if isinstance(total, tirx.IntImm) and total.value < threads:
            threads = max(1, int(total.value))
        bx = tirx.Var("bx", dtype)
        tx = tirx.Var("tx", dtype)
        fused = bx * tirx.const(threads, dtype) + tx
        subst, stride = {}, tirx.const(1, dtype)
        for lp in reversed(par):
            subst[lp.loop_var] = lp.min + tirx.floormod(tirx.floordiv(fused, stride), lp.extent)
            stride = stride * lp.extent
        body = _substitute(inner, subst)
        blocks = ana.simplify(tirx.floordiv(total + threads - 1, tirx.const(threads, dtype)))
        if not (isinstance(total, tirx.IntImm) and total.value % threads == 0):
            body = tirx.IfThenElse(fused < total, body, None)
        return _thread_loop(bx, blocks, "blockIdx.x", _thread_loop(tx, threads, "threadIdx.x", body))


# --------------------------------------------------------------------------- structure
def _perfect_nest(stmt):
    """The leading run of serial For loops, each the only statement of its parent."""
    loops = []
    while isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL:
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


def _nest(loops, body):
    for lp in reversed(loops):
        body = tirx.For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_binding,
                        lp.annotations)
    return body


def _thread_loop(var, extent, tag: str, body):
    dtype = str(var.ty.dtype)
    extent = tirx.const(extent, dtype) if isinstance(extent, int) else extent
    ivar = tirx.IterVar(None, tirx.Var(tag, dtype), 1, tag)  # 1: ThreadIndex
    return tirx.For(var, tirx.const(0, dtype), extent, tirx.ForKind.THREAD_BINDING, body,
                    thread_binding=ivar)


def _one_thread(stmt):
    bx, tx = tirx.Var("bx", "int32"), tirx.Var("tx", "int32")
    return _thread_loop(bx, 1, "blockIdx.x", _thread_loop(tx, 1, "threadIdx.x", stmt))


def _substitute(stmt, subst):
    return tvm_ffi.structural_map(
        stmt, (tirx.Var, lambda v: next((e for k, e in subst.items() if k.same_as(v)), v))
    )


def _trip_count(stmt) -> int | None:
    """Iterations of the innermost statements (product of loop extents); None if symbolic."""
    total = [1]
    bad = []

    def visit(loop):
        if isinstance(loop.extent, tirx.IntImm):
            total[0] *= int(loop.extent.value)  # siblings too: an upper bound
        else:
            bad.append(loop)

    tvm_ffi.structural_walk(stmt, [(tirx.For, visit)])
    return None if bad else total[0]


def _accesses(stmt) -> list:
    """Every BufferStore and BufferLoad under stmt, as (buffer, indices, is_store)."""
    out = []
    tvm_ffi.structural_walk(stmt, [
        (tirx.BufferStore, lambda n: out.append((n.buffer, list(n.indices), True))),
        (_LOAD, lambda n: out.append((n.source, list(n.indices), False))),
    ])
    return out


def _is_bound(stmt) -> bool:
    """True if stmt already holds thread bindings (left as it is)."""
    found = []
    tvm_ffi.structural_walk(stmt, [
        (tirx.For, lambda lp: found.append(lp) if lp.kind == tirx.ForKind.THREAD_BINDING else None),
        (tirx.AttrStmt, lambda a: found.append(a) if a.attr_key == "thread_extent" else None),
    ])
    return bool(found)


def _has_block(stmt) -> bool:
    found = []
    tvm_ffi.structural_walk(stmt, [(s_tir.SBlockRealize, found.append)])
    return bool(found)


# --------------------------------------------------------------------------- ownership
def _not_owned(par, ser, body) -> str | None:
    """None if the loops ``par`` own every buffer the nest writes (see module doc), else why."""
    inner = _nest(ser, body)
    if _has_block(inner):
        return "the nest holds blocks"
    ana = tvm.sym.Analyzer()
    for lp in par + ser:
        ana.bind(lp.loop_var, tvm.ir.Range.from_min_extent(lp.min, lp.extent))
    par_vars = [lp.loop_var for lp in par]
    accesses = _accesses(inner)
    written = [b for b, _, st in accesses if st]
    for buf in _unique(written):
        group = [(b, [ana.simplify(i) for i in idx]) for b, idx, _ in accesses if b.same_as(buf)]
        name = buf.name
        if any(len(idx) != len(group[0][1]) for _, idx in group):
            return f"buffer '{name}' is accessed with different ranks"
        owners = [
            pos for pos, expr in enumerate(group[0][1])
            if _only_vars(expr, par_vars)
            and all(tvm_ffi.structural_equal(idx[pos], expr) for _, idx in group)
        ]
        if not owners:
            return f"no index of '{name}' is the same function of the parallel loops in every access"
        comps = [group[0][1][pos] for pos in owners]
        iters = {lp.loop_var: tvm.ir.Range.from_min_extent(lp.min, lp.extent) for lp in par}
        res = tvm.sym.detect_iter_map(comps, iters, check_level="bijective", analyzer=ana)
        if len(res.indices) == 0:
            return f"indices {[str(c) for c in comps]} of '{name}' do not map the parallel loops one-to-one"
    return None


def _plain_writes(loop) -> bool:
    """True if no buffer ``loop`` stores to is also read in it (no read-modify-write)."""
    accesses = _accesses(loop)
    written = _unique([b for b, _, st in accesses if st])
    return not _has_block(loop.body) and not any(
        not st and any(b.same_as(w) for w in written) for b, _, st in accesses)


def _only_vars(expr, allowed) -> bool:
    """True if expr reads no memory and uses only vars in ``allowed``."""
    bad = []

    def on_var(v):
        if not any(v.same_as(a) for a in allowed):
            bad.append(v)

    tvm_ffi.structural_walk(expr, [(_LOAD, bad.append), (tirx.Var, on_var)])
    return not bad


def _unique(objs):
    out = []
    for o in objs:
        if not any(o.same_as(p) for p in out):
            out.append(o)
    return out
