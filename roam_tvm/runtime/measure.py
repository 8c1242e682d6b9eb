"""Run a compiled training step on a device: time it and measure device peak memory.

Memory, and which number to trust
---------------------------------
The Relax VM allocates storage through its memory manager. With the default
*pooled* allocator, a freed block goes back to a pool and is never returned to the
driver, so after one step the pool holds every storage the step ever needed at once
(plus rounding), and the driver's "used" figure stays at its high-water mark. We
therefore measure, with the device API's memory statistics (``cuda_mem_info``:
``Device.available_global_memory``, i.e. ``cudaMemGetInfo``; device-wide, includes everything):

* ``baseline``: after loading the executable and copying the inputs (parameters,
  optimizer state, batch) to the device, with the VM pool cleared;
* ``after``: after the first (warm-up) step, before anything is freed.

``peak_step_bytes = after - baseline`` is the extra device memory one step needed:
the planned storages (StaticPlanBlockMemory / RoamLayout arena), the outputs the
step returns, and kernel workspaces, with the pool's page rounding. It is a
*driver-level* number (granularity 2 MiB on current GPUs) and includes nothing from
other processes only if none run concurrently on that GPU; that is why it is taken
as a difference on an otherwise idle device, and why the simulator, not this, is
the source of truth for planned peaks. The naive allocator would free eagerly and
make the after-the-fact reading meaningless, so StepRunner insists on "pooled".

``cpu_measure.measure_step`` counts the step's allocations exactly instead, in a child
process: every aligned host allocation of the runtime (llvm builds), or every ``cudaMalloc``
(CUDA builds, with the device API's figure beside it).

Without a GPU, every CUDA path raises ``CudaUnavailable`` with the reason given by
``cuda_available()`` (``bool(cuda_available())`` is False; ``.reason`` says why).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import tvm
from tvm.runtime.vm import VirtualMachine  # the runtime's VM (relax.VirtualMachine): no compiler needed

__all__ = [
    "Availability",
    "CudaUnavailable",
    "cuda_available",
    "cuda_mem_info",
    "inputs_from_signature",
    "inputs_from_specs",
    "signature_specs",
    "StepRunner",
    "StepMeasurement",
]


class CudaUnavailable(RuntimeError):
    """Raised by CUDA-only functions on a machine without a usable CUDA GPU."""


@dataclass(frozen=True)
class Availability:
    """Truthy if usable; ``reason`` explains why not (or names the device)."""

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


_CUDA_STATUS: Availability | None = None


def cuda_available(refresh: bool = False) -> Availability:
    """Whether a CUDA GPU can run TVM kernels here, with a reason string."""
    global _CUDA_STATUS  # pylint: disable=global-statement
    if _CUDA_STATUS is not None and not refresh:
        return _CUDA_STATUS
    try:
        if not tvm.runtime.enabled("cuda"):
            status = Availability(
                False,
                "TVM's CUDA runtime is not enabled here (tvm.runtime.enabled('cuda') is False: "
                "no CUDA driver / GPU on this machine)",
            )
        else:
            dev = tvm.cuda(0)
            if not dev.exist:
                status = Availability(
                    False, "no CUDA GPU/driver visible (tvm.cuda(0).exist is False)"
                )
            else:
                status = Availability(True, f"cuda:0 {dev.device_name} (compute {dev.compute_version})")
    except Exception as err:  # pylint: disable=broad-except
        status = Availability(False, f"CUDA probe failed: {type(err).__name__}: {err}")
    _CUDA_STATUS = status
    return status


def _require_cuda() -> None:
    status = cuda_available()
    if not status:
        raise CudaUnavailable(status.reason)


def cuda_mem_info(device_id: int = 0) -> tuple[int, int]:
    """(free, total) bytes of a CUDA device, from TVM's device API memory statistics.

    ``Device.available_global_memory`` and ``total_global_memory`` (``kAvailableGlobalMemory``,
    ``kTotalGlobalMemory``; ``cudaMemGetInfo`` inside TVM's CUDA device API): device-wide, so
    other processes on the same GPU count too.
    """
    _require_cuda()
    dev = tvm.cuda(device_id)
    free, total = dev.available_global_memory, dev.total_global_memory
    if free is None or total is None:
        raise RuntimeError(f"TVM's device API gives no memory statistics for {dev}")
    return int(free), int(total)


def _as_device(device) -> tvm.runtime.Device:
    if isinstance(device, str):
        kind, _, idx = device.partition(":")
        idx = int(idx) if idx else 0
        if kind == "cuda":
            _require_cuda()
            return tvm.cuda(idx)
        if kind in ("cpu", "llvm"):
            return tvm.cpu(idx)
        raise ValueError(f"unknown device {device!r}")
    if device.dlpack_device_type() == tvm.cuda(0).dlpack_device_type():
        _require_cuda()
    return device


def _is_cuda(dev) -> bool:
    return dev.dlpack_device_type() == tvm.cuda(0).dlpack_device_type()


def signature_specs(func: "tvm.relax.Function") -> list[tuple[list[int], str]]:
    """``(shape, dtype)`` of each tensor parameter of a Relax function (static shapes)."""
    out = []
    for param in func.params:
        sinfo = getattr(param, "ty", None) or getattr(param, "struct_info")
        shape = [int(s) for s in (sinfo.shape.values if hasattr(sinfo.shape, "values") else sinfo.shape)]
        out.append((shape, str(sinfo.dtype)))
    return out


def inputs_from_specs(specs, seed: int = 0, scale: float = 0.1) -> list[np.ndarray]:
    """Random numpy arrays for ``(shape, dtype)`` specs: floats ``N(0, scale)``, integers and
    booleans in {0, 1}. The same specs and seed give the same arrays on any machine, so a step
    built here and run elsewhere gets the arguments it would get here."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in specs:
        if dtype.startswith("float"):
            out.append((rng.standard_normal(shape) * scale).astype(dtype))
        elif dtype == "bool":
            out.append(rng.integers(0, 2, size=shape).astype(bool))
        else:
            out.append(rng.integers(0, 2, size=shape).astype(dtype))
    return out


def inputs_from_signature(func: "tvm.relax.Function", seed: int = 0, scale: float = 0.1) -> list[np.ndarray]:
    """Random numpy inputs for a Relax function's tensor parameters (static shapes)."""
    return inputs_from_specs(signature_specs(func), seed, scale)


@dataclass
class StepMeasurement:
    """Result of StepRunner.measure()."""

    device: str
    func: str
    times_s: list[float] = field(default_factory=list)
    median_s: float = float("nan")
    peak_step_bytes: int | None = None  # CUDA only: driver-level extra memory of one step
    baseline_used_bytes: int | None = None
    total_bytes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "func": self.func,
            "median_ms": self.median_s * 1e3,
            "times_ms": [t * 1e3 for t in self.times_s],
            "peak_step_mib": None if self.peak_step_bytes is None else self.peak_step_bytes / 2**20,
            "baseline_used_mib": None
            if self.baseline_used_bytes is None
            else self.baseline_used_bytes / 2**20,
        }


class StepRunner:
    """Load an executable into a Relax VM, hold its inputs on the device, run/time the step.

    >>> runner = StepRunner(exe, "cpu", func="train_step", inputs=arrays)
    >>> outs = runner.run()            # one step, returns the VM's outputs
    >>> m = runner.measure(repeat=10)  # StepMeasurement (median time, CUDA peak)

    ``inputs``: numpy arrays / tvm tensors, in parameter order. Steps that update
    parameters in place (``R.call_tir_inplace``) change the held inputs; that is
    intended for timing (each step is a real training step).
    """

    def __init__(self, exe, device="cpu", func: str = "train_step", inputs: Sequence | None = None):
        self.device = _as_device(device)
        self.func = func
        if isinstance(exe, (str, bytes)) or hasattr(exe, "__fspath__"):
            exe = tvm.runtime.load_module(str(exe))
        self.exe = exe
        self.vm = VirtualMachine(exe, self.device, memory_cfg="pooled")
        self.inputs: list = []
        if inputs is not None:
            self.set_inputs(inputs)

    @property
    def is_cuda(self) -> bool:
        return _is_cuda(self.device)

    def set_inputs(self, inputs: Sequence) -> None:
        """Copy inputs to the device (tvm tensors already there are kept as they are)."""
        held = []
        for arr in inputs:
            if isinstance(arr, tvm.runtime.Tensor) and arr.device == self.device:
                held.append(arr)
            else:
                held.append(tvm.runtime.tensor(np.asarray(arr), device=self.device))
        self.inputs = held

    def sync(self) -> None:
        self.device.sync()

    def run(self):
        """One step; returns the function's outputs (device tensors / tuples)."""
        if not self.inputs:
            raise ValueError("no inputs set (StepRunner(..., inputs=...) or set_inputs)")
        out = self.vm[self.func](*self.inputs)
        self.sync()
        return out

    def clear_pool(self) -> None:
        """Return the VM allocator pool's memory to the device."""
        clear = tvm.get_global_func("vm.builtin.memory_manager.clear", allow_missing=True)
        if clear is not None:
            clear()

    def measure(self, repeat: int = 10, warmup: int = 1, memory: bool = True) -> StepMeasurement:
        """Median wall time of ``repeat`` steps after ``warmup``; on CUDA also peak memory."""
        res = StepMeasurement(device=str(self.device), func=self.func)
        measure_mem = memory and self.is_cuda
        if measure_mem:
            self.clear_pool()
            self.sync()
            free0, total = cuda_mem_info(self.device.index)
            res.total_bytes = total
            res.baseline_used_bytes = total - free0
        out = None
        for i in range(max(warmup, 1 if measure_mem else 0)):
            out = self.run()
            if i == 0 and measure_mem:
                free1, _ = cuda_mem_info(self.device.index)
                res.peak_step_bytes = (total - free1) - res.baseline_used_bytes
            del out
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = self.vm[self.func](*self.inputs)
            self.sync()
            res.times_s.append(time.perf_counter() - t0)
            del out
        if res.times_s:
            res.median_s = statistics.median(res.times_s)
        return res
