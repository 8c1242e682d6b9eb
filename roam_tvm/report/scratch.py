"""Kernel scratch: the global-scope memory a kernel asks for while it runs.

A TIR kernel whose intermediate buffers stay in global scope after scheduling
gets them at run time from ``TVMBackendAllocWorkspace`` (on llvm, and on GPUs for
buffers hoisted out of device kernels). No Relax memory plan sees them, yet they
are live, on top of the plan, while the kernel runs. This module finds them the
way the build does: each PrimFunc is lowered with the target's TIR pipeline and
host finalisation, and every ``TVMBackendAllocWorkspace`` call left in the host
code is one request.

Counting rules (upper bounds, so a peak that includes them is not low):

* a request's bytes are rounded up to whole 4 KiB pages, as TVM's workspace pool
  does;
* all requests of one kernel count as live together;
* a request inside a ``parallel`` loop is made once per thread of the CPU thread
  pool (``threads``);
* small constant buffers that lowering puts on the stack are not requests, and
  are not counted;
* a kernel that does not lower for the target, or whose request size is known
  only at run time, is reported with ``error`` set: its scratch is unknown, not 0.

``op_requests`` maps a planned graph's ops to their kernels' requests, so that
the peak simulator can add each kernel's scratch to its op's live set
(``workspace_pool.scratch_peaks``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import relax, tirx

__all__ = ["KernelScratch", "PAGE_BYTES", "kernel_scratch", "op_requests", "runtime_threads"]

#: TVM's workspace pool hands out whole pages of this size.
PAGE_BYTES = 4096
_ALLOC = "tirx.TVMBackendAllocWorkspace"


@dataclass
class KernelScratch:
    """The workspace requests of one kernel (bytes as the pool allocates them)."""

    name: str
    #: (page-rounded bytes, made once per thread?) per request
    requests: list[tuple[int, bool]] = field(default_factory=list)
    #: why the kernel did not lower for the target (its scratch is then unknown)
    error: str | None = None

    def bytes(self, threads: int = 1) -> int:
        """Bytes live while the kernel runs, with ``threads`` CPU threads."""
        return sum(b * (threads if per_thread else 1) for b, per_thread in self.requests)


def runtime_threads() -> int:
    """The size of TVM's CPU thread pool in this process (what the runtime would use)."""
    return int(tvm.get_global_func("runtime.NumThreads")())


def _pages(nbytes: int) -> int:
    return max(1, -(-nbytes // PAGE_BYTES)) * PAGE_BYTES


def _lower_to_host(func: tirx.PrimFunc, name: str, target: tvm.target.Target) -> tvm.IRModule:
    """The host code the build would generate for one PrimFunc."""
    from tvm.tirx.build import split_host_device_mods  # pylint: disable=import-outside-toplevel

    # Named by its GlobalVar, as Relax calls it (the build attaches the same symbol).
    tir_mod = tvm.IRModule({name: func.with_attr("global_symbol", name)})
    host = target.host or (target if target.kind.name in ("llvm", "c") else tvm.target.Target("llvm"))
    tir_mod = tirx.transform.BindTarget(target.with_host(host))(tir_mod)
    lower, finalize_host, _ = tvm.tirx.get_tir_pipeline("default")
    host_mod, _ = split_host_device_mods(lower(tir_mod))
    return finalize_host()(host_mod)


class SymbolicScratch(ValueError):
    """A workspace request whose size is known only at run time."""


class _RequestCollector:
    """The workspace requests of one host function, marking those in parallel loops."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.requests: list[tuple[int, bool]] = []
        self._parallel_calls: set = set()
        self._symbolic: str | None = None

    def collect(self, func: tirx.PrimFunc) -> list[tuple[int, bool]]:
        tvm_ffi.structural_walk(func.body, [(tirx.For, self._mark_parallel)])
        tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, self._visit)])
        if self._symbolic is not None:  # raised here: an exception inside the walk crosses the FFI
            raise SymbolicScratch(self._symbolic)
        return self.requests

    def _mark_parallel(self, node) -> None:
        if node.kind == tirx.ForKind.PARALLEL:
            def inner(call):
                if self._is_alloc(call):
                    self._parallel_calls.add(call)
            tvm_ffi.structural_walk(node.body, [(tvm.ir.Call, inner)])

    @staticmethod
    def _is_alloc(node) -> bool:
        return isinstance(node, tvm.ir.Call) and isinstance(node.op, tvm.ir.Op) and node.op.name == _ALLOC

    def _visit(self, node) -> None:
        if not self._is_alloc(node):
            return
        nbytes = tvm.sym.Analyzer().simplify(node.args[2])
        if not isinstance(nbytes, tirx.IntImm):
            self._symbolic = self._symbolic or f"workspace of {nbytes} bytes depends on a run-time value"
            return
        self.requests.append((_pages(int(nbytes)), node in self._parallel_calls))


def kernel_scratch(mod: tvm.IRModule, target) -> dict[str, KernelScratch]:
    """Workspace requests of every PrimFunc in ``mod`` when built for ``target``.

    Parameters
    ----------
    mod : IRModule
        A module whose PrimFuncs are as the build will compile them (legalized,
        fused and, for GPUs, scheduled).
    target : str or Target
        The target being built.

    Returns
    -------
    dict
        PrimFunc name -> ``KernelScratch`` (kernels with no request included, empty).
        A kernel that does not lower for ``target`` (e.g. left unscheduled on a GPU)
        has ``error`` set and no requests: its scratch is unknown, and the build of
        the step would fail on it too.
    """
    target = tvm.target.Target(target) if isinstance(target, str) else target
    out: dict[str, KernelScratch] = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        name = gv.name_hint
        try:
            host = _lower_to_host(func, name, target)
        except Exception as err:  # pylint: disable=broad-except
            # TVM raises several error types for code it cannot lower; the name and first line tell which.
            out[name] = KernelScratch(name, error=f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200]}")
            continue
        requests: list[tuple[int, bool]] = []
        try:
            for hf in host.functions.values():
                if isinstance(hf, tirx.PrimFunc):
                    requests += _RequestCollector(name).collect(hf)
        except SymbolicScratch as err:
            out[name] = KernelScratch(name, error=str(err))
            continue
        out[name] = KernelScratch(name, requests)
    return out


def op_requests(func: relax.Function, op_bindings: list[list[tuple[int, int]]],
                scratch: dict[str, KernelScratch]) -> list[list[tuple[int, bool]]]:
    """Each op's workspace requests (its kernels'; none for ops that call no kernel).

    ``op_bindings`` is ``RelaxGraph.op_bindings`` of the graph extracted from ``func``.
    """
    blocks = func.body.blocks
    out = []
    for bindings in op_bindings:
        reqs: list[tuple[int, bool]] = []
        for bi, i in bindings:
            value = blocks[bi].bindings[i].value
            callee = value.op if isinstance(value, relax.Call) else None
            if isinstance(callee, tvm.ir.GlobalVar) and callee.name_hint in scratch:
                reqs.extend(scratch[callee.name_hint].requests)
        out.append(reqs)
    return out
