"""What a training step really allocates, on the CPU or a CUDA GPU, counted at the allocator.

TVM's CPU device API takes every data space from ``posix_memalign`` and gives it
back with ``free``: the Relax VM's storages and tensors, the arguments, and the
pages of the per-thread workspace pool that serves kernel scratch
(``TVMBackendAllocWorkspace``). ``measure_cpu_step`` runs the step in a child
process with a small counter preloaded (``_alloc_counter.c``, built with ``cc`` on
first use) that wraps the aligned allocators and ``free`` and keeps the bytes live
and their high-water mark. The figure is requested bytes, as the allocators asked
for them (no ``malloc`` bookkeeping), so it compares with planned bytes directly.

Rounding, per allocator
-----------------------
* ``naive`` (default here): one ``posix_memalign`` per storage of exactly the
  planned size, freed when the VM drops it.
* ``pooled`` (``StepRunner``'s and TVM's default): each request is rounded up to a
  multiple of 4,096 B and a freed block is kept for the next request of the same
  rounded size; nothing goes back during the run.
* kernel scratch, under both: the workspace pool rounds each request up to a
  multiple of 4 KiB and keeps its blocks (per thread) for later kernels and steps.

The child runs ``steps`` steps from the same arguments; the peak reported is the
highest of them (the second and later see the workspace pool already filled, which
is the steady state of training).

CUDA
----
``measure_step(..., device="cuda")`` (or ``measure_cuda_step``) is the same code on a
GPU. TVM's CUDA device API takes every device data space (VM storages, tensors, the
workspace pages of kernel scratch) from ``cudaMalloc`` and gives it back with
``cudaFree``; the same preloaded counter wraps those two, so ``peak_bytes`` is again
requested bytes, exact, with the allocators' rounding as above (TVM's CUDA workspace
pool also rounds to 4 KiB pages). Beside it, ``device_api_bytes`` holds, per step, what
the device API's memory statistics say the step took: ``Device.available_global_memory``
(TVM's ``kAvailableGlobalMemory``, i.e. ``cudaMemGetInfo``) before the arguments were
copied less the same after the step. That is a driver-level figure (2 MiB pages,
anything else on the GPU included, and allocations of libraries such as cuBLAS that do
not go through TVM) and it only shows a high-water mark under the ``pooled`` allocator,
which keeps freed storages; under ``naive`` it shows what the step left behind.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

__all__ = ["StepMemory", "CpuMeasurement", "counter_library", "measure_step", "measure_cpu_step",
           "measure_cuda_step", "ALLOCATORS", "DEVICES"]

ALLOCATORS = ("naive", "pooled")
DEVICES = ("cpu", "cuda")
_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCE = os.path.join(_HERE, "_alloc_counter.c")
_CHILD = os.path.join(_HERE, "_cpu_child.py")


@dataclass
class StepMemory:
    """The bytes one step held on its device (requested sizes; see the module notes)."""

    peak_bytes: int                 #: highest live aligned bytes during any step, arguments included
    resident_bytes: int             #: the arguments (parameters, optimizer state, inputs)
    allocator: str                  #: the VM's memory_cfg
    threads: int                    #: TVM's CPU thread-pool size (each thread has its own scratch pool)
    step_peak_bytes: list[int] = field(default_factory=list)
    #: live bytes after each step once its outputs are dropped, less the arguments (pools kept)
    retained_bytes: list[int] = field(default_factory=list)
    allocations: int = 0            #: aligned allocations in the last step
    largest_bytes: int = 0          #: the largest one in the last step
    #: what loading the module left live (its constants), not in ``peak_bytes``; plans count
    #: constants as always live, so add this when comparing a whole process with a plan
    loaded_bytes: int = 0
    device: str = "cpu"             #: "cpu" or "cuda"
    device_name: str | None = None  #: the GPU's name (CUDA)
    #: CUDA: per step, available_global_memory before the arguments less after the step
    device_api_bytes: list[int | None] = field(default_factory=list)

    @property
    def step_bytes(self) -> int:
        """Peak less the arguments: what the step itself needed."""
        return self.peak_bytes - self.resident_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "step_bytes": self.step_bytes}


CpuMeasurement = StepMemory  # the name before the CUDA path existed


def _cache_dir() -> str:
    return os.environ.get("ROAM_TVM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "roam_tvm")


def counter_library() -> str:
    """Path of the compiled allocation counter (built once per source version)."""
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    path = os.path.join(_cache_dir(), f"roam_alloc_counter_{digest}_{sys.platform}.so")
    if os.path.exists(path):
        return path
    if not sys.platform.startswith("linux"):
        raise OSError(f"the allocation counter needs LD_PRELOAD (Linux); this is {sys.platform}")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise OSError("no C compiler (cc/gcc) to build the allocation counter; install one or set CC")
    os.makedirs(_cache_dir(), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=_cache_dir())
    os.close(fd)
    try:
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, _SOURCE, "-ldl", "-lpthread"],
                       check=True, capture_output=True, text=True)
        os.replace(tmp, path)  # atomic: concurrent builders agree
    except subprocess.CalledProcessError as err:
        raise OSError(f"{cc} failed to build the allocation counter: {err.stderr.strip()[:500]}") from err
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def _check_request(allocator: str, steps: int, device: str) -> None:
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose from {', '.join(DEVICES)}")
    if allocator not in ALLOCATORS:
        raise ValueError(f"unknown allocator {allocator!r}; choose from {', '.join(ALLOCATORS)}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")


def measure_cpu_step(exe, args: Sequence[np.ndarray], func: str = "train_step", allocator: str = "naive",
                     steps: int = 2, timeout: float = 1800.0) -> StepMemory:
    """``measure_step`` on the CPU (an llvm build); see there."""
    return measure_step(exe, args, func, "cpu", allocator, steps, timeout)


def measure_cuda_step(exe, args: Sequence[np.ndarray], func: str = "train_step", allocator: str = "naive",
                      steps: int = 2, timeout: float = 1800.0) -> StepMemory:
    """``measure_step`` on CUDA GPU 0 (a CUDA build); raises ``CudaUnavailable`` without one."""
    return measure_step(exe, args, func, "cuda", allocator, steps, timeout)


def measure_step(exe, args: Sequence[np.ndarray], func: str = "train_step", device: str = "cpu",
                 allocator: str = "naive", steps: int = 2, timeout: float = 1800.0) -> StepMemory:
    """Run ``func`` of a build in a child process and count what it allocates on ``device``.

    Parameters
    ----------
    exe : tvm.relax.VMExecutable, or str / PathLike
        An executable built for ``device`` (llvm for "cpu", CUDA for "cuda"), or the path
        of one exported as a shared library.
    args : sequence of numpy arrays
        The function's arguments in parameter order (values do not change the bytes;
        ``measure.inputs_from_signature`` makes random ones).
    func : str
        The function to run.
    device : {"cpu", "cuda"}
        Where the step runs: host aligned allocations, or ``cudaMalloc`` on GPU 0.
    allocator : {"naive", "pooled"}
        The VM's memory_cfg (see the module notes for each one's rounding).
    steps : int
        Steps to run; the peak is the highest (2: the first fills the scratch pool).
    timeout : float
        Seconds before the child is stopped.

    Returns
    -------
    StepMemory

    Raises
    ------
    ValueError
        An unknown device or allocator, or ``steps < 1`` (before anything runs).
    CudaUnavailable
        ``device="cuda"`` on a machine without a usable CUDA GPU (the reason is given).
    """
    _check_request(allocator, steps, device)
    if device == "cuda":
        from .measure import CudaUnavailable, cuda_available  # imports tvm; only needed here

        status = cuda_available()
        if not status:
            raise CudaUnavailable(status.reason)
    counter = counter_library()
    with tempfile.TemporaryDirectory(prefix="roam_measure_") as tmp:
        if isinstance(exe, (str, bytes)) or hasattr(exe, "__fspath__"):
            library = os.fspath(exe)
        else:
            library = os.path.join(tmp, "step.so")
            exe.export_library(library)
        arguments = os.path.join(tmp, "args.npz")
        np.savez(arguments, **{f"a{i}": np.asarray(a) for i, a in enumerate(args)})
        request = os.path.join(tmp, "request.json")
        with open(request, "w", encoding="utf-8") as f:
            json.dump({"library": library, "arguments": arguments, "func": func, "device": device,
                       "allocator": allocator, "steps": steps}, f)
        env = dict(os.environ, LD_PRELOAD=counter, ROAM_TVM_COUNTER=counter)
        proc = subprocess.run([sys.executable, _CHILD, request], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the measuring child failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    per_step = res["steps"]
    if device == "cuda" and res["resident_bytes"] == 0 and any(np.asarray(a).nbytes for a in args):
        # the arguments went to the GPU, so cudaMalloc was not ours to count (e.g. a TVM
        # built with a static CUDA runtime): say so rather than report zero bytes
        raise RuntimeError("the counter saw no cudaMalloc although the arguments were copied to the GPU; "
                           "this TVM does not call libcudart's cudaMalloc dynamically. Use the device API "
                           "figure (StepRunner.measure) instead")
    return StepMemory(peak_bytes=max(s["peak_bytes"] for s in per_step), resident_bytes=res["resident_bytes"],
                      allocator=allocator, threads=res["threads"],
                      step_peak_bytes=[s["peak_bytes"] for s in per_step],
                      retained_bytes=[s["retained_bytes"] for s in per_step],
                      allocations=per_step[-1]["allocations"], largest_bytes=per_step[-1]["largest_bytes"],
                      loaded_bytes=res["loaded_bytes"], device=device, device_name=res.get("device_name"),
                      device_api_bytes=[s.get("device_api_bytes") for s in per_step])
