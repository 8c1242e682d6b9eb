"""Steps built here and run on a GPU machine that has only TVM's runtime (benchmarks/gpu_export.py,
benchmarks/gpu_run.py): the pieces that CI can check without a GPU.

* the runtime package imports and measures a step with TVM's runtime alone (``TVM_USE_RUNTIME_LIB=1``,
  in a child process), as on the GPU machine;
* arguments rebuilt from the exported specs are the arguments the build machine would make;
* the prebuilt-kernel callback answers with the binary of exactly the source asked for, and refuses
  a source it has no binary for.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.runtime.measure import inputs_from_signature, inputs_from_specs, signature_specs  # noqa: E402
from roam_tvm.runtime.prebuilt_kernels import use_prebuilt_kernels  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@R.function
def _step(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 3), "float32"), ids: R.Tensor((4,), "int64")):
    y = R.matmul(x, w)
    return (R.sum(y), ids)


def test_specs_give_the_arguments_of_the_signature():
    specs = signature_specs(_step)
    assert specs == [([4, 8], "float32"), ([8, 3], "float32"), ([4], "int64")]
    direct, rebuilt = inputs_from_signature(_step, seed=3), inputs_from_specs(json.loads(json.dumps(specs)), seed=3)
    assert all(a.dtype == b.dtype and a.tobytes() == b.tobytes() for a, b in zip(direct, rebuilt))
    other = inputs_from_specs(specs, seed=4)
    assert other[0].tobytes() != direct[0].tobytes()


def test_prebuilt_kernels_answer_with_the_binary_of_that_source(tmp_path):
    src = "extern \"C\" __global__ void k() {}\n"
    (tmp_path / f"{hashlib.sha256(src.encode()).hexdigest()}.cubin").write_bytes(b"\x7fELF-binary")
    use_prebuilt_kernels(str(tmp_path))
    compile_cuda = tvm.get_global_func("tvm_callback_cuda_compile")
    assert bytes(compile_cuda(src)) == b"\x7fELF-binary"
    with pytest.raises(Exception, match="no prebuilt kernels for source"):
        compile_cuda(src + "// changed\n")
    with pytest.raises(FileNotFoundError, match="no prebuilt kernel folder"):
        use_prebuilt_kernels(str(tmp_path / "missing"))


def test_runtime_alone_runs_and_measures_a_step_built_here(tmp_path):
    # Build with the compiler here; run in a child whose TVM loads its runtime library only.
    mod = tvm.IRModule({"main": _step.with_attr("global_symbol", "main")})
    exe = tvm.compile(mod, "llvm")
    lib = str(tmp_path / "step.so")
    exe.export_library(lib)
    specs = signature_specs(_step)
    expected = float(np.sum(inputs_from_specs(specs)[0] @ inputs_from_specs(specs)[1]))
    code = f"""
import json, numpy as np
import roam_tvm.runtime as rt
from roam_tvm.runtime.measure import StepRunner, inputs_from_specs
from roam_tvm.runtime.cpu_measure import measure_step
specs = json.loads({json.dumps(json.dumps(specs))})
args = inputs_from_specs(specs)
out = StepRunner({lib!r}, "cpu", func="main", inputs=args).run()
mem = measure_step({lib!r}, args, "main", "cpu", allocator="naive", steps=1)
print(json.dumps({{"runtime_only": rt.RUNTIME_ONLY, "has_build": hasattr(rt, "build"),
                  "loss": float(out[0].numpy()), "peak": mem.peak_bytes, "resident": mem.resident_bytes}}))
"""
    env = dict(os.environ, TVM_USE_RUNTIME_LIB="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["runtime_only"] is True and res["has_build"] is False
    assert res["loss"] == pytest.approx(expected, rel=1e-5)
    assert res["resident"] == 4 * 8 * 4 + 8 * 3 * 4 + 4 * 8  # the three arguments, counted at the allocator
    assert res["peak"] >= res["resident"] + 4 * 3 * 4  # and the matmul's output on top


def _flat(value) -> list:
    return [value.numpy()] if hasattr(value, "numpy") else [a for item in value for a in _flat(item)]


@pytest.mark.slow  # ~18 s; the budgeted pipeline's fit and bit-identity: test_remat_families by default
def test_budgeted_module_builds_fits_and_matches_the_unbudgeted_step():
    # plan_budgeted's module is what gpu_export.py compiles: built for llvm, the bytes it
    # allocates (counted at the allocator) stay within the budget, and its results are the
    # unbudgeted roam build's, bit for bit.
    import argparse

    from roam_tvm.cli import load_step
    from roam_tvm.remat.budget import Budget
    from roam_tvm.remat.compare import plan_budgeted
    from roam_tvm.report.compare import compare_step
    from roam_tvm.runtime import build
    from roam_tvm.runtime.cpu_measure import measure_step
    from roam_tvm.runtime.measure import StepRunner
    from roam_tvm.runtime.pipeline import finalize_rest_passes

    ts, _ = load_step(argparse.Namespace(model="cnn", batch=None, seq=None, image=None, small=True, optimizer=None,
                                         lr=None, loss=None, quiet=True, precision=None, loss_scale=None))
    opts = {"time_limit": 2.0}
    roam = compare_step(ts, ["roam"], target="llvm", cut=False, order_options=opts, layout_options=opts,
                        progress=False)["planners"]["roam"]["peak_bytes"]
    budget = int(0.9 * roam)
    plan = plan_budgeted(ts, Budget(bytes=budget, text=str(budget)), "llvm", roam, opts, opts, 60.0)
    assert plan.report["planner"]["fits"] and plan.report["planner"]["recomputed_ops"] > 0
    with tvm.target.Target("llvm"):
        rest = tvm.transform.Sequential(finalize_rest_passes("llvm"))
    budgeted = tvm.compile(plan.module, "llvm", relax_pipeline=rest)
    plain = build(ts.mod, "llvm", order_options=opts, layout_options=opts)
    args = inputs_from_signature(ts.mod[ts.func_name])
    assert measure_step(budgeted, args, ts.func_name, "cpu", steps=1).peak_bytes <= budget
    results = []
    for exe in (budgeted, plain):
        runner = StepRunner(exe, "cpu", func=ts.func_name, inputs=args)
        out = runner.run()
        results.append(_flat(out) + [t.numpy() for t in runner.inputs])
    assert all(a.tobytes() == b.tobytes() for a, b in zip(*results)) and len(results[0]) == len(results[1])


def test_gpu_run_table_lists_every_build_of_a_measured_run():
    # The committed H200 run: every build and every PyTorch row appears with its measured bytes,
    # and the budgeted build's measured overhead is its time over the unbudgeted build's.
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_run", os.path.join(ROOT, "benchmarks", "gpu_run.py"))
    gpu_run = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    spec.loader.exec_module(gpu_run)
    with open(os.path.join(ROOT, "benchmarks", "results", "gpu_truth_h200.json"), encoding="utf-8") as f:
        result = json.load(f)
    text = gpu_run.table(result)
    for e in result["entries"].values():
        assert f"| {e['key']} | {e['planner']} | {e['planned_bytes']:,} | {e['measured_bytes']:,} |" in text
    for key, p in result["pytorch"].items():
        assert f"| {key} | {p['max_memory_allocated_bytes']:,} |" in text
    budget = result["entries"]["gpt2-small_batch24_seq1024.roam-budget"]
    base = result["entries"]["gpt2-small_batch24_seq1024.roam"]
    assert budget["measured_overhead_time"] == pytest.approx(budget["step_ms"] / base["step_ms"] - 1)
    assert budget["measured_bytes"] <= budget["budget_bytes"] and budget["bit_identical"] is True
