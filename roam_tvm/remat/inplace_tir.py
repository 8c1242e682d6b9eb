"""Which outputs of a kernel may be written into one of its inputs, proven on its TIR.

A kernel ``f(in_0, ..., in_{n-1}, out_0, ...)`` may write ``out_m`` into the
storage of ``in_k`` (``R.call_tir_inplace``) only when no read of ``in_k`` can
see a value ``f`` has already written to ``out_m``. On the unscheduled,
fused PrimFunc this module proves it, or refuses, with two rules:

(a) *elementwise*: the one block that writes ``out_m`` reads ``in_k`` only at
    exactly the element it writes, in the same statement; its instances
    write distinct elements (its iterators are data-parallel, bound one to
    one to whole loops, and index ``out_m`` directly), so each element of
    ``in_k`` is read once, just before it is overwritten;
(b) *earlier stages*: every other block reading ``in_k`` lies in a root-level
    statement (loop nest) before the one holding the writer of ``out_m``, so
    it has finished before the first write. Not for kernels a GPU will run
    (``parallel=True``): only a kernel of one block is written in place there.

Anything else is refused: ``in_k`` and ``out_m`` of different shape or dtype
(byte-equal but reshaped storage would need index flattening), a reduction
writing ``out_m`` (it has an ``init``), two blocks writing ``out_m``, a
read of ``out_m``, any write of ``in_k``, an access outside a block or
through an opaque use of the buffer (``tvm_access_ptr``, a matched buffer),
nested blocks, and any thread-bound loop (a GPU-scheduled kernel runs its
blocks in parallel threads, so "before" no longer holds).

``inplace_kernel`` builds the kernel ``R.call_tir_inplace`` calls: ``out_m``
removed from the parameters and every access to it redirected to ``in_k``.
"""
from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx

__all__ = ["inplace_pairs", "inplace_safe", "inplace_kernel", "INPLACE_ATTR"]

INPLACE_ATTR = "roam.inplace_of"  # (original kernel name, output index, input index)


class _Refuse(Exception):
    """The kernel is not proven safe for the pair (the message says why)."""


def _accesses(node, buf) -> tuple[list, list, int]:
    """(loads of ``buf``, stores to ``buf``, all occurrences of ``buf``) under ``node``."""
    loads, stores, seen = [], [], [0]

    def visit(x):
        name = type(x).__name__
        if name == "TensorLoad" and x.source.same_as(buf):
            loads.append(x)
        elif name == "BufferStore" and x.buffer.same_as(buf):
            stores.append(x)
        elif isinstance(x, tirx.Var) and x.same_as(buf):
            seen[0] += 1

    tvm_ffi.structural_walk(node, [(object, visit)])
    return loads, stores, seen[0]


class _Block:
    """One block realize with the root-level statement it sits in and its enclosing loops."""

    def __init__(self, realize, top: int, loops: list):
        self.realize, self.block, self.top, self.loops = realize, realize.block, top, list(loops)


def _blocks(func: tirx.PrimFunc) -> list[_Block]:
    """The non-root blocks in execution order; refuses nesting and thread bindings."""
    root = func.body
    if not isinstance(root, s_tir.SBlockRealize):
        raise _Refuse("the kernel has no root block (already lowered)")
    body = root.block.body
    tops = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    out: list[_Block] = []

    def walk(s, top: int, loops: list) -> None:
        if isinstance(s, tirx.SeqStmt):
            for c in s.seq:
                walk(c, top, loops)
        elif isinstance(s, tirx.For):
            if s.kind == tirx.ForKind.THREAD_BINDING or s.thread_binding is not None:
                raise _Refuse("the kernel is thread-bound (scheduled for a GPU)")
            walk(s.body, top, loops + [s])
        elif isinstance(s, s_tir.SBlockRealize):
            inner = []
            tvm_ffi.structural_walk(s.block.body, [(s_tir.SBlockRealize, inner.append)])
            if inner:
                raise _Refuse(f"block {s.block.name_hint!r} holds nested blocks")
            out.append(_Block(s, top, loops))

    for i, s in enumerate(tops):
        walk(s, i, [])
    return out


def _is_const(e, value: int) -> bool:
    return isinstance(e, tirx.IntImm) and e.value == value


def _check_elementwise(b: _Block, store, in_buf) -> None:
    """Rule (a) for the block ``b`` whose only statement is ``store`` (to the output)."""
    blk, realize = b.block, b.realize
    if blk.init is not None:
        raise _Refuse(f"block {blk.name_hint!r} is a reduction")
    if not blk.body.same_as(store):
        raise _Refuse(f"block {blk.name_hint!r} does more than one store")
    ivs = list(blk.iter_vars)
    if any(iv.iter_type != tirx.IterVar.DataPar for iv in ivs):
        raise _Refuse(f"block {blk.name_hint!r} has non-spatial iterators")
    idx = list(store.indices)
    pos = {}
    for d, e in enumerate(idx):
        k = next((j for j, iv in enumerate(ivs) if iv.var.same_as(e)), None)
        if k is None or k in pos.values():
            raise _Refuse(f"block {blk.name_hint!r} writes the output at a computed index")
        pos[d] = k
    if len(pos) != len(ivs):
        raise _Refuse(f"block {blk.name_hint!r} has iterators that do not index the output")
    # One-to-one binding: each iterator is a whole loop of its own, so no element is written twice.
    used = set()
    for iv, val in zip(ivs, realize.iter_values):
        lp = next((x for x in b.loops if x.loop_var.same_as(val)), None)
        if lp is None or id(lp) in used or not _is_const(lp.min, 0) or not _is_const(iv.dom.min, 0):
            raise _Refuse(f"block {blk.name_hint!r} is not bound one to one to its loops")
        if not tvm_ffi.structural_equal(lp.extent, iv.dom.extent):
            raise _Refuse(f"block {blk.name_hint!r}'s loops do not match its iterators")
        used.add(id(lp))
    loads, _, _ = _accesses(store.value, in_buf)
    for ld in loads:
        if len(ld.indices) != len(idx) or not all(a.same_as(c) for a, c in zip(ld.indices, idx)):
            raise _Refuse(f"block {blk.name_hint!r} reads the input at another element than it writes")


def _check(func: tirx.PrimFunc, out_m: int, in_k: int, n_inputs: int, parallel: bool = False) -> None:
    params = list(func.params)
    if not (0 <= in_k < n_inputs <= len(params)) or not (0 <= n_inputs + out_m < len(params)):
        raise _Refuse("index out of range")
    ib, ob = params[in_k], params[n_inputs + out_m]
    it, ot = ib.ty, ob.ty
    if not isinstance(it, tirx.BufferType) or not isinstance(ot, tirx.BufferType):
        raise _Refuse("not a buffer parameter")
    if str(it.dtype) != str(ot.dtype) or not tvm_ffi.structural_equal(list(it.shape), list(ot.shape)):
        raise _Refuse("input and output differ in shape or dtype")
    if any(not isinstance(d, tirx.IntImm) for d in it.shape):
        raise _Refuse("symbolic shape")
    if sum(p.same_as(ib) for p in params) != 1:
        raise _Refuse("the input is passed twice")
    blocks = _blocks(func)
    all_in_loads, in_stores, in_seen = _accesses(func.body, ib)
    out_loads, _, _ = _accesses(func.body, ob)
    if in_stores:
        raise _Refuse("the kernel writes the input")
    if out_loads:
        raise _Refuse("the kernel reads the output")
    readers, writers, loads_in_blocks, regions = [], [], 0, 0
    for b in blocks:
        if b.block.match_buffers:
            raise _Refuse(f"block {b.block.name_hint!r} matches buffers")
        lo, _, _ = _accesses(b.block.body, ib)
        _, st, _ = _accesses(b.block.body, ob)
        if b.block.init is not None:
            st = st + _accesses(b.block.init, ob)[1]
        loads_in_blocks += len(lo)
        regions += sum(r.source.same_as(ib) for r in (*b.block.reads, *b.block.writes))
        if lo:
            readers.append(b)
        if st:
            writers.append((b, st))
    if len(all_in_loads) != loads_in_blocks:
        raise _Refuse("the input is read outside a block")
    if in_seen != loads_in_blocks + regions:
        raise _Refuse("the input is used opaquely (not only by loads)")
    if not writers:
        raise _Refuse("no block writes the output")
    if len(writers) != 1 or len(writers[0][1]) != 1:
        raise _Refuse("the output is written by more than one store")
    wb, (store,) = writers[0]
    if parallel and len(blocks) > 1:
        # On an H200, GPU schedules of fused kernels written in place staged their intermediates
        # through global scratch (outside the memory plan), and a budgeted GPT-2 step with such
        # kernels gave other bits than the step without them: one block, or no in-place write.
        raise _Refuse(f"{len(blocks)} stages: a GPU kernel is written in place only when it is one block")
    for r in readers:
        if r is wb:
            _check_elementwise(wb, store, ib)
        elif r.top >= wb.top:
            raise _Refuse(f"block {r.block.name_hint!r} reads the input after the output is first written")


def inplace_safe(func: tirx.PrimFunc, out_m: int, in_k: int, n_inputs: int, parallel: bool = False) -> str | None:
    """None when output ``out_m`` may be written into input ``in_k``; else why not.

    Parameters
    ----------
    func : PrimFunc
        The kernel (unscheduled), called with ``n_inputs`` inputs then its outputs.
    out_m, in_k : int
        Output index (among the outputs) and input index.
    n_inputs : int
    parallel : bool
        The kernel will be scheduled for a GPU (rule (a) on a kernel of one block only).
    """
    try:
        _check(func, out_m, in_k, n_inputs, parallel)
    except _Refuse as e:
        return str(e)
    return None


def inplace_pairs(func: tirx.PrimFunc, n_inputs: int, parallel: bool = False) -> list[tuple[int, int]]:
    """Every (output index, input index) pair :func:`inplace_safe` accepts."""
    n_out = len(func.params) - n_inputs
    return [(m, k) for m in range(n_out) for k in range(n_inputs)
            if inplace_safe(func, m, k, n_inputs, parallel) is None]


def inplace_kernel(func: tirx.PrimFunc, pairs: list[tuple[int, int]], n_inputs: int, name: str) -> tirx.PrimFunc:
    """The kernel with each output ``m`` stored into input ``k`` for ``(m, k)`` in ``pairs``.

    The outputs' parameters are removed; the kernel gets the attribute
    ``roam.inplace_of = [name, [[m, k], ...]]``. Raises ``ValueError`` when
    :func:`inplace_safe` refuses a pair, or two pairs share an output or input.
    """
    pairs = [(int(m), int(k)) for m, k in pairs]
    if len({m for m, _ in pairs}) != len(pairs) or len({k for _, k in pairs}) != len(pairs):
        raise ValueError(f"kernel {name}: in-place pairs {pairs} share an output or an input")
    for m, k in pairs:
        why = inplace_safe(func, m, k, n_inputs)
        if why is not None:
            raise ValueError(f"kernel {name}: output {m} cannot be written into input {k}: {why}")
    params = list(func.params)
    swap_to = {n_inputs + m: params[k] for m, k in pairs}
    outs = [params[i] for i in swap_to]

    def swap(x):
        for i, ib in swap_to.items():
            if x.same_as(params[i]):
                return ib
        return x

    body = tvm_ffi.structural_map(func.body, [(tirx.Var, swap)])
    new = tirx.PrimFunc([p for p in params if not any(p.same_as(o) for o in outs)], body, func.ret_type, func.attrs)
    return new.with_attr(INPLACE_ATTR, [name, [[m, k] for m, k in pairs]])
