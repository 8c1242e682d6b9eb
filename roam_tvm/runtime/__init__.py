"""roam_tvm.runtime: the roam Relax pipeline, robust GPU scheduling, build, measurement.

``roam_tvm.runtime.pipeline`` is the module (stages, ``lower_to_memory_planning``);
the pass factory is ``roam_tvm.runtime.pipeline.pipeline`` (alias ``roam_pipeline``).
Importing this package registers the named Relax pipeline ``"roam"``
(``tvm.compile(mod, target, relax_pipeline="roam")``).
"""

from .build import build, compile_cuda_kernels, cuda_source, cuda_target, export, nvcc_path
from . import pipeline  # the module; the pass factory is roam_tvm.runtime.pipeline.pipeline
from .pipeline import (
    dataflow_lower_passes,
    finalize_passes,
    finalize_rest_passes,
    legalize_passes,
    library_dispatch_passes,
    lower_to_memory_planning,
    pre_planning_pipeline,
)
from .pipeline import pipeline as roam_pipeline
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
    "roam_pipeline",
    "pre_planning_pipeline",
    "robust_schedule",
    "stock_dlight_schedule",
]
