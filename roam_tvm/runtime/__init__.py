"""roam_tvm.runtime: the roam Relax pipeline, robust GPU scheduling, build, measurement.

Importing this package registers the named Relax pipeline ``"roam"``
(``tvm.compile(mod, target, relax_pipeline="roam")``).
"""

from .build import build, compile_cuda_kernels, cuda_source, cuda_target, export, nvcc_path
from .pipeline import (
    dataflow_lower_passes,
    finalize_passes,
    finalize_rest_passes,
    legalize_passes,
    library_dispatch_passes,
    lower_to_memory_planning,
    pipeline,
    pre_planning_pipeline,
)
from .schedule import robust_schedule, stock_dlight_schedule

__all__ = [
    "build",
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
    "pre_planning_pipeline",
    "robust_schedule",
    "stock_dlight_schedule",
]
