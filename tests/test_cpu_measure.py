"""The CPU allocation counter and the kernel-scratch accounting, against hand-counted bytes.

Every expected figure here is worked out from shapes by hand (4-byte floats, TVM's
4 KiB workspace pages), not by the code under test.
"""
from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import relax, te  # noqa: E402

from roam_tvm.report.scratch import kernel_scratch  # noqa: E402
from roam_tvm.report.workspace_pool import scratch_peaks  # noqa: E402
from roam_tvm.runtime.cpu_measure import measure_cpu_step  # noqa: E402

N, M = 1000, 999
X_BYTES = N * M * 4                  # the argument
OUT_BYTES = N * 4                    # the output
SCRATCH_BYTES = 976 * 4096           # the N x M intermediate, 3,996,000 B, in whole 4 KiB pages


def _two_stage(a):
    # C stays a global buffer inside one kernel: the kernel asks for it at run time.
    c = te.compute((N, M), lambda i, j: a[i, j] * 2.0, name="C")
    k = te.reduce_axis((0, M), name="k")
    return te.compute((N,), lambda i: te.sum(c[i, k], axis=k), name="B")


@pytest.fixture(scope="module")
def two_stage_module():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((N, M), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit_te(_two_stage, x))
        bb.emit_func_output(out)
    return bb.get()


@pytest.fixture(scope="module")
def two_stage_exe(two_stage_module):
    return tvm.compile(two_stage_module, "llvm")


def test_kernel_scratch_finds_the_intermediate(two_stage_module):
    scratch = kernel_scratch(two_stage_module, "llvm")
    assert [(k, v.requests) for k, v in scratch.items()] == [("_two_stage", [(SCRATCH_BYTES, False)])]
    assert scratch["_two_stage"].bytes(threads=4) == SCRATCH_BYTES  # not in a parallel loop


def test_counter_measures_argument_output_and_scratch(two_stage_exe):
    args = [np.ones((N, M), "float32")]
    naive = measure_cpu_step(two_stage_exe, args, "main", allocator="naive", steps=1)
    assert naive.resident_bytes == X_BYTES
    assert naive.loaded_bytes == 0  # the module has no constants
    assert naive.peak_bytes == X_BYTES + OUT_BYTES + SCRATCH_BYTES
    # the workspace pool keeps its block after the kernel
    assert naive.retained_bytes[0] >= SCRATCH_BYTES
    pooled = measure_cpu_step(two_stage_exe, args, "main", allocator="pooled", steps=1)
    assert pooled.peak_bytes == X_BYTES + 4096 + SCRATCH_BYTES  # the output rounded up to a page


def test_measure_rejects_bad_requests(two_stage_exe):
    with pytest.raises(ValueError, match="allocator"):
        measure_cpu_step(two_stage_exe, [], "main", allocator="arena")
    with pytest.raises(ValueError, match="steps"):
        measure_cpu_step(two_stage_exe, [], "main", steps=0)


def test_scratch_peaks_model_the_pool():
    page = 4096
    # op 0: 10 pages of scratch early; op 2 is the plan's peak, with 1 page of scratch.
    live = [100, 200, 1000, 50]
    requests = [[(10 * page, False)], [], [(page, False)], []]
    got = scratch_peaks(live, requests)
    assert got.peak_bytes == 1000
    assert got.scratch_bytes == 10 * page
    assert got.peak_with_scratch_bytes == max(100 + 10 * page, 1000 + page)
    # the pool kept the 10-page block and lends it to op 2's 1-page request
    assert got.pool_peak_bytes == 1000 + 10 * page
    assert got.pool_bytes == 10 * page
    # two requests at once need two blocks; a later larger one replaces the largest free block
    got = scratch_peaks([0, 0], [[(page, False), (2 * page, False)], [(5 * page, False)]])
    assert got.pool_bytes == page + 5 * page
    # per-thread requests (parallel loops) count once per thread
    got = scratch_peaks([10], [[(page, True)]], threads=3)
    assert got.peak_with_scratch_bytes == got.pool_peak_bytes == 10 + 3 * page
    with pytest.raises(ValueError, match="request lists"):
        scratch_peaks([1, 2], [[]])


def test_symbolic_workspace_is_reported_not_raised_through_the_ffi():
    # A request whose size is a run-time value must surface as SymbolicScratch (then
    # "unknown"), not as a RuntimeError from inside TVM's structural walk.
    from tvm.script import tirx as T

    from roam_tvm.report.scratch import SymbolicScratch, _RequestCollector

    @T.prim_func(s_tir=True)
    def host(n: T.int64):
        T.evaluate(T.call_intrin("handle", "tirx.TVMBackendAllocWorkspace", 1, 0,
                                 T.Cast("uint64", n) * T.uint64(8), 2, 32))

    with pytest.raises(SymbolicScratch, match="run-time value"):
        _RequestCollector("host").collect(host)
