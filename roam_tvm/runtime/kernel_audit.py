"""Refuse a GPU build in which a PrimFunc would touch device memory from the host.

TVM 0.27 compiles a PrimFunc whose loops are not bound to GPU threads as *host* code,
and its ``tirx.transform.VerifyMemory`` pass lets that through (the analysis
``tirx.analysis.verify_memory`` reports it, the pass does not stop the build). On a GPU
the CPU would then dereference device pointers. ``host_accesses`` finds every load and
store of a parameter buffer that no thread binding encloses; ``RequireDeviceKernels``
runs it over a module and fails with each function's name and buffers.
"""

from __future__ import annotations

import importlib

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import IRModule

from .targets import as_target, is_gpu_target

__all__ = ["host_accesses", "check_lowers", "short_error", "RequireDeviceKernels", "DeviceAccessError"]

_LOAD = tvm.ir.expr.TensorLoad  # what tirx.BufferLoad builds in TVM 0.27


@tvm_ffi.register_error  # keeps its type when raised inside a pass, across the FFI
class DeviceAccessError(RuntimeError):
    """A GPU build would read or write device buffers in host code."""


def _is_host_func(func: tirx.PrimFunc) -> bool:
    """A function that runs on the host by design (VMShapeLower's ``shape_func`` over the shape heap)."""
    attrs = func.attrs or {}
    return bool(attrs.get("tirx.is_host_func", False) or attrs.get("tir.is_host_func", False))


def host_accesses(func: tirx.PrimFunc) -> list[str]:
    """Names of the parameter buffers ``func`` loads or stores outside any thread binding.

    Parameters
    ----------
    func : tirx.PrimFunc
        A scheduled (s_tir, thread-bound ``For`` loops) or lowered (``thread_extent``
        attributes) PrimFunc.

    Returns
    -------
    list[str]
        Sorted names; empty when every access to a parameter runs inside a GPU thread.
    """
    params = list(func.params)  # TVM 0.27: parameters are the buffer vars themselves
    hits: list[str] = []

    def on_for(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            return tvm_ffi.WalkResult.SKIP  # inside a kernel
        return None

    def on_attr(attr):
        if attr.attr_key == "thread_extent":
            return tvm_ffi.WalkResult.SKIP
        return None

    def on_access(buf):
        if any(buf.same_as(p) for p in params):
            hits.append(str(buf.name))

    tvm_ffi.structural_walk(
        func.body,
        [
            (tirx.For, on_for),
            (tirx.AttrStmt, on_attr),
            (tirx.BufferStore, lambda n: on_access(n.buffer)),
            (_LOAD, lambda n: on_access(n.source)),
        ],
        order="pre",
    )
    return sorted(set(hits))


def RequireDeviceKernels(target=None) -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """Module pass: fail if a GPU PrimFunc touches a parameter buffer outside a kernel.

    Parameters
    ----------
    target : str or tvm.target.Target, optional
        The build target; None means each function's ``target`` attribute, else the
        current target scope. CPU targets pass everything.

    Returns
    -------
    tvm.transform.Pass
        An identity pass that raises ``DeviceAccessError`` naming every offending
        function and its buffers.
    """

    @tvm.transform.module_pass(opt_level=0, name="RoamRequireDeviceKernels")
    def _pass(mod: IRModule, _ctx: tvm.transform.PassContext) -> IRModule:
        default = as_target(target) if target is not None else tvm.target.Target.current(True)
        bad = []
        for gvar, func in mod.functions_items():
            if not isinstance(func, tirx.PrimFunc) or _is_host_func(func):
                continue
            ftarget = func.attrs.get("target") if func.attrs is not None else None
            ftarget = ftarget if ftarget is not None else default
            if ftarget is None or not is_gpu_target(ftarget):
                continue
            names = host_accesses(func)
            if names:
                bad.append(f"{gvar.name_hint} (buffers {', '.join(names)})")
        if bad:
            raise DeviceAccessError(
                f"{len(bad)} PrimFunc(s) would run as host code over GPU memory: "
                f"{'; '.join(bad)}. Schedule them (roam_tvm.runtime.robust_schedule) "
                "or build for llvm."
            )
        return mod

    return _pass


def check_lowers(func: tirx.PrimFunc, target: tvm.target.Target, codegen: bool = True) -> str | None:
    """Lower one PrimFunc alone for ``target``; return None if fine, else the error text.

    On GPU targets it first requires every parameter access to sit under a thread
    binding (``host_accesses``; TVM's VerifyMemory pass does not stop the build).
    Then it runs TVM's default TIR pipeline for the target (with the
    cross-thread-reduction lowering that raises "No matched reducer"), splits host
    and device code, runs the device finalize passes and (``codegen=True``) the
    device code generator (CUDA C source; no nvcc, no driver needed). The host side
    is not code-generated (LLVM is slow and never the failing part).
    """
    tir_build = importlib.import_module("tvm.tirx.build")

    if is_gpu_target(target):
        names = host_accesses(func)
        if names:
            return f"ValueError: host code would access GPU buffers {names} (loops not bound to threads)"
    try:
        host = tvm.target.Target("llvm") if target.host is None else target.host
        tgt = target.with_host(host) if target.host is None else target
        f = func.with_attr("global_symbol", "roam_check")
        mod = IRModule({"roam_check": f})
        mod = tirx.transform.BindTarget(tgt)(mod)
        pipe, _fin_host, fin_dev = tvm.tirx.get_default_tir_pipeline(tgt)
        with tvm.transform.PassContext(opt_level=3):
            mod = pipe(mod)
            _host_mod, dev_mods = tir_build.split_host_device_mods(mod)
            if is_gpu_target(target) and len(func.params) > 0:
                kernels = sum(len(dm.functions) for dm in dev_mods.values() if dm is not None)
                if kernels == 0:
                    raise ValueError("no GPU kernel generated (loops not bound to threads)")
            for dev_target, dev_mod in dev_mods.items():
                dev_mod = fin_dev()(dev_mod)
                if codegen:
                    _codegen_source_only(dev_mod, dev_target)
    except Exception as err:  # pylint: disable=broad-except
        return f"{type(err).__name__}: {short_error(err)}"
    return None


def _codegen_source_only(dev_mod: IRModule, dev_target: tvm.target.Target) -> None:
    """Generate device source without invoking nvcc/NVRTC (cheap, driver-free)."""
    kind = dev_target.kind.name
    if kind == "cuda":
        fgen = tvm.get_global_func("target.build.cuda_source_only", allow_missing=True)
        if fgen is None:
            # fall back to the regular builder; with a driver-less machine TVM embeds
            # source, with nvcc present it may compile (slower, still a valid check)
            fgen = tvm.get_global_func("target.build.cuda")
        fgen(dev_mod, dev_target)
    else:
        fgen = tvm.get_global_func(f"target.build.{kind}", allow_missing=True)
        if fgen is not None:
            fgen(dev_mod, dev_target)


def short_error(err: Exception, limit: int = 300) -> str:
    """The last two non-decoration lines of an error, at most ``limit`` characters."""
    lines = [ln.strip() for ln in str(err).strip().splitlines()]
    # drop caret/tilde underline lines of Python tracebacks; TVM errors end with the message
    lines = [ln for ln in lines if ln and set(ln) - set("^~ ")]
    msg = " | ".join(lines[-2:])
    return msg[-limit:]
