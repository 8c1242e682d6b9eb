"""roam_tvm.runtime: the roam Relax pipeline, robust GPU scheduling, build, measurement.

``measure_cpu_step(exe, args)`` runs an llvm build and counts every byte the CPU runtime
allocates; ``measure_cuda_step`` does the same for a CUDA build on a GPU (every
``cudaMalloc``, with the device API's memory statistics beside it); both are
``measure_step(..., device=...)`` in ``cpu_measure.py``.

``roam_tvm.runtime.pipeline(target, order=True, layout=True, **options)`` is the pass
factory (alias ``roam_pipeline``); the stages live in the module ``roam_tvm/runtime/pipeline.py``
(``importlib.import_module("roam_tvm.runtime.pipeline")``).
A GPU build either gives every PrimFunc a device kernel or fails
(``UnschedulableError``, ``DeviceAccessError``) naming the functions.
Importing this package registers the named Relax pipeline ``"roam"``
(``tvm.compile(mod, target, relax_pipeline="roam")``).
"""

import tvm.base as _tvm_base

from .cpu_measure import CpuMeasurement, StepMemory, measure_cpu_step, measure_cuda_step, measure_step

# TVM's runtime-only install (libtvm_runtime without the compiler, as on a GPU machine that only
# runs steps built elsewhere: benchmarks/gpu_run.py) has no Relax passes; measurement still works.
RUNTIME_ONLY = bool(getattr(_tvm_base, "_RUNTIME_ONLY", False))
if not RUNTIME_ONLY:
    from .build import build, compile_cuda_kernels, cuda_source, cuda_target, export, nvcc_path
    from .pipeline import (
        dataflow_lower_passes,
        finalize_passes,
        finalize_rest_passes,
        legalize_passes,
        library_dispatch_passes,
        lower_to_memory_planning,
        pre_planning_pipeline,
    )
    from .pipeline import pipeline
    from .pipeline import pipeline as roam_pipeline
    from .schedule import UnschedulableError, robust_schedule, stock_dlight_schedule
    from .kernel_audit import DeviceAccessError, RequireDeviceKernels

__all__ = [
    "RUNTIME_ONLY",
    "build",
    "CpuMeasurement",
    "StepMemory",
    "measure_cpu_step",
    "measure_cuda_step",
    "measure_step",
    "compile_cuda_kernels",
    "cuda_source",
    "cuda_target",
    "export",
    "nvcc_path",
    "dataflow_lower_passes",
    "finalize_passes",
    "finalize_rest_passes",
    "legalize_passes",
    "library_dispatch_passes",
    "lower_to_memory_planning",
    "pipeline",
    "roam_pipeline",
    "pre_planning_pipeline",
    "robust_schedule",
    "stock_dlight_schedule",
    "UnschedulableError",
    "DeviceAccessError",
    "RequireDeviceKernels",
]
