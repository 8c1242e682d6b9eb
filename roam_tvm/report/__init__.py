"""Reports: the peak simulator, the planner comparison, the PyTorch baseline, plan export and plots.

Submodules import TVM or torch; import them directly (``roam_tvm.report.compare``,
``roam_tvm.report.pytorch_peak``, ...), or use the lazy names below.
"""


def __getattr__(name: str):
    if name == "pytorch_peak":
        from .pytorch_peak import pytorch_peak

        return pytorch_peak
    if name in ("compare_step", "format_table"):
        from . import compare

        return getattr(compare, name)
    if name in ("run_planner", "schedule_for", "PLANNERS"):
        from . import simulate

        return getattr(simulate, name)
    raise AttributeError(f"module 'roam_tvm.report' has no attribute {name!r}")
