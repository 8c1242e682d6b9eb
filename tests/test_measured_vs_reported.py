"""Measured equals reported: roam's step, built for llvm and run, allocates no more than we plan.

The report is ``compare_step``'s; the measurement counts every aligned allocation
of the CPU runtime in a child process (``measure_cpu_step``, naive VM allocator, two
steps). Only the bound is shared between them, not code: the report is read back
from the planned Relax function, the measurement from the allocator.

roam's pipeline removes wasteful kernel intermediates and places the rest in the
plan (``LiftKernelScratch``), so the reported figure is the planned peak itself
(``peak_bytes``): no kernel scratch is left outside it (``scratch_bytes`` 0) and
the step measures at most 2% over it. The check runs both ways: the plan may not
exceed the measurement (with the module's constants, which plans count) by more
than 2% either.
"""
from __future__ import annotations

import pytest

pytest.importorskip("tvm")
pytest.importorskip("torch")

from roam_tvm.cli import optimizer_from_config  # noqa: E402
from roam_tvm.frontend import from_torch  # noqa: E402
from roam_tvm.report.compare import compare_step  # noqa: E402
from roam_tvm.runtime import build  # noqa: E402
from roam_tvm.runtime.cpu_measure import measure_cpu_step  # noqa: E402
from roam_tvm.runtime.measure import inputs_from_signature  # noqa: E402
from roam_tvm.zoo import MODELS, get_model  # noqa: E402

TOLERANCE = 1.02
LIMITS = {"time_limit": 10.0}


def _reported_and_measured(name: str):
    spec = get_model(name, small=True)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer))
    report = compare_step(ts, planners=["roam"], cut=False, progress=False,
                          order_options=LIMITS, layout_options=LIMITS)
    exe = build(ts.mod, "llvm", order=True, layout=True, order_options=LIMITS, layout_options=LIMITS)
    measured = measure_cpu_step(exe, inputs_from_signature(ts.mod[ts.func_name]), ts.func_name)
    return report["planners"]["roam"], measured


def _check(name: str) -> None:
    reported, m = _reported_and_measured(name)
    measured, planned = m.peak_bytes, reported["peak_bytes"]
    assert reported["scratch_bytes"] == 0, f"{name}: {reported['scratch_bytes']:,} B of kernel scratch not planned"
    assert reported["pool_peak_bytes"] == planned
    assert measured <= TOLERANCE * planned, (
        f"{name}: measured {measured:,} B > {TOLERANCE} x planned {planned:,} B")
    assert measured + m.loaded_bytes >= planned / TOLERANCE


def test_mlp_measured_within_planned():
    _check("mlp")


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MODELS if n != "mlp"])
def test_zoo_measured_within_reported(name):
    _check(name)
