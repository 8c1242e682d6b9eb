"""Build zoo steps for CUDA here, to be run on a GPU machine that has only TVM's runtime.

    python benchmarks/gpu_export.py --out .gpu gpt2-small:batch=8:seq=1024 \\
        --budget gpt2-small:batch=24:seq=1024@9704255221

A machine lent with a GPU for a few minutes has PyTorch and CUDA but no TVM compiler, and
building a training step takes minutes of CPU; so the steps are planned and built here and
only run there (``benchmarks/gpu_run.py``). Per model this writes, under ``--out``:

``<key>.<planner>.so``
    the step built for CUDA (``sm_90a``) by ``tvm-default`` (TVM's StaticPlanBlockMemory) and
    ``roam`` (RoamOrder + RoamLayout); with ``--budget``, ``roam`` at the model's size and
    ``roam-budget`` (RoamRemat under the budget, then roam's order and layout);
``kernels/<sha256>.cubin``
    the kernels of each build compiled here with ``nvcc -cubin`` (TVM 0.27 stores CUDA C source
    in a library built without a GPU; ``gpu_run.py`` hands these binaries to the runtime instead
    of compiling again there), keyed by the SHA-256 of the source the runtime will ask for;
``manifest.json``
    per build: the planned peak (``roam-tvm compare``'s simulator, parameters, optimizer state
    and inputs included), the argument shapes and seed (``inputs_from_specs``), which build it
    must match bit for bit, the budget and the recomputation's predicted overheads, the
    command, versions and this machine.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
ARCH = "sm_90a"  # H100 and H200


def _load(name: str, sizes: dict):
    from roam_tvm.cli import load_step

    ns = argparse.Namespace(model=name, batch=sizes.get("batch"), seq=sizes.get("seq"), image=sizes.get("image"),
                            small=False, optimizer=None, lr=None, loss=None, quiet=True, precision=None,
                            loss_scale=None)
    return load_step(ns)


def _save_kernels(exe, out_dir: str) -> dict:
    """Compile the build's CUDA source with nvcc; ``{"source_sha256", "cubin", "kernels", "nvcc_seconds"}``."""
    from roam_tvm.runtime.build import compile_cuda_kernels, cuda_source

    src = cuda_source(exe).encode()
    digest = hashlib.sha256(src).hexdigest()
    path = os.path.join(out_dir, "kernels", f"{digest}.cubin")
    info = {"source_sha256": digest, "cubin": os.path.relpath(path, out_dir)}
    if not os.path.exists(path):
        res = compile_cuda_kernels(exe, arch=ARCH)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(res.cubin)
        info.update(kernels=res.kernels, nvcc_seconds=res.seconds)
    return info


def _entry(ts, exe, key: str, planner: str, out_dir: str, planned: dict, reference: str | None) -> dict:
    from roam_tvm.runtime.measure import signature_specs

    lib = f"{key}.{planner}.so"
    exe.export_library(os.path.join(out_dir, lib))
    return {"key": key, "planner": planner, "library": lib, "func": ts.func_name,
            "arguments": {"specs": signature_specs(ts.mod[ts.func_name]), "seed": 0, "scale": 0.1},
            "bit_identical_to": reference, **planned, "kernels": _save_kernels(exe, out_dir)}


def export_model(text: str, out_dir: str, time_limit: float) -> list[dict]:
    """tvm-default and roam builds of one model, planned figures beside them."""
    from remat import parse_model

    from roam_tvm.report.compare import compare_step
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.runtime import build, cuda_target

    name, sizes = parse_model(text)
    ts, spec = _load(name, sizes)
    key = text.replace(":", "_").replace("=", "")
    limits = {"time_limit": time_limit}
    target = cuda_target()
    report = compare_step(ts, planners=["tvm-default", "roam"], target=target, cut=False,
                          progress=False, order_options=limits, layout_options=limits)
    pytorch = simulate_eager_step(spec)["peak_bytes"]
    entries = []
    for planner, (order, layout) in (("tvm-default", (False, False)), ("roam", (True, True))):
        r = report["planners"][planner]
        start = time.perf_counter()
        exe = build(ts.mod, target, order=order, layout=layout, order_options=limits if order else None,
                    layout_options=limits if layout else None)
        planned = {"model": name, "sizes": sizes, "config": spec.config, "planned_bytes": r["peak_bytes"],
                   "peak_with_scratch_bytes": r.get("peak_with_scratch_bytes"),
                   "pytorch_simulated_bytes": pytorch,
                   "build_seconds": time.perf_counter() - start}
        entries.append(_entry(ts, exe, key, planner, out_dir, planned,
                              None if planner == "tvm-default" else f"{key}.tvm-default"))
        print(f"{key} {planner}: planned {r['peak_bytes']:,} B, built in {planned['build_seconds']:.0f} s", flush=True)
    return entries


def export_budget(text: str, out_dir: str, time_limit: float, search_limit: float, paths: str) -> list[dict]:
    """roam at the model's size without a budget, and roam under the budget: ``model@bytes``."""
    from remat import parse_model
    from remat_probe import PATH_SETS

    import tvm
    from roam_tvm.remat.budget import Budget
    from roam_tvm.remat.compare import plan_budgeted
    from roam_tvm.report.compare import compare_step
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.runtime import build, cuda_target
    from roam_tvm.runtime.kernel_audit import RequireDeviceKernels
    from roam_tvm.report.scratch import kernel_scratch
    from roam_tvm.runtime.pipeline import finalize_rest_passes, schedule_passes

    model, _, budget_text = text.rpartition("@")
    name, sizes = parse_model(model)
    ts, spec = _load(name, sizes)
    key = model.replace(":", "_").replace("=", "")
    limits = {"time_limit": time_limit}
    target = cuda_target()
    report = compare_step(ts, planners=["roam"], target=target, cut=False, progress=False,
                          order_options=limits, layout_options=limits)
    unbudgeted = report["planners"]["roam"]["peak_bytes"]
    common = {"model": name, "sizes": sizes, "config": spec.config,
              "pytorch_simulated_bytes": simulate_eager_step(spec)["peak_bytes"]}
    start = time.perf_counter()
    exe = build(ts.mod, target, order=True, layout=True, order_options=limits, layout_options=limits)
    entries = [_entry(ts, exe, key, "roam", out_dir, {**common, "planned_bytes": unbudgeted,
                                                       "build_seconds": time.perf_counter() - start}, None)]
    start = time.perf_counter()
    budget = Budget(bytes=int(budget_text), text=budget_text)
    # Planned on unscheduled kernels (RoamRemat proves in-place writes on their TIR, with the rule
    # for GPU kernels), scheduled afterwards; any global scratch a schedule then needs is outside
    # the plan, so it is counted here and stated (the GPU run measures it).
    plan = plan_budgeted(ts, budget, target, unbudgeted, limits, limits, search_limit, PATH_SETS[paths])
    with target:
        scheduled = tvm.transform.Sequential(schedule_passes(target))(plan.module)
        rest = tvm.transform.Sequential(finalize_rest_passes(target) + [RequireDeviceKernels(target)])
    scratch = {k: v.bytes() for k, v in kernel_scratch(scheduled, target).items() if v.bytes()}
    exe = tvm.compile(scheduled, target, relax_pipeline=rest)
    p = plan.report["planner"]
    entries.append(_entry(ts, exe, key, "roam-budget", out_dir, {
        **common, "planned_bytes": p["peak_bytes"], "budget_bytes": plan.report["budget_bytes"],
        "floor_bytes": plan.report["floor_bytes"], "fits": p["fits"], "valid": p["valid"],
        "overhead_time": p["overhead_time"], "overhead_flops": p["overhead_flops"],
        "recomputed_ops": p["recomputed_ops"], "inplace_ops": p["inplace_ops"], "paths": paths,
        "unplanned_scratch_bytes": scratch,
        "build_seconds": time.perf_counter() - start}, f"{key}.roam"))
    print(f"{key} roam-budget: planned {p['peak_bytes']:,} B under {plan.report['budget_bytes']:,} "
          f"(fits {p['fits']}, +{100 * (p['overhead_time'] or 0):.2f}% roofline time, "
          f"unplanned kernel scratch {sum(scratch.values()):,} B)", flush=True)
    return entries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="name:batch=B:seq=S:image=I (zoo models)")
    ap.add_argument("--budget", nargs="*", default=[], help="name:sizes@BYTES: roam with and without the budget")
    ap.add_argument("--out", required=True, help="folder for the libraries, kernels and manifest.json")
    ap.add_argument("--time-limit", type=float, default=10.0, help="RoamOrder's and RoamLayout's, seconds")
    ap.add_argument("--search-limit", type=float, default=400.0, help="the recomputation search's, seconds")
    ap.add_argument("--paths", default="readers-first", choices=["all", "readers-first"])
    args = ap.parse_args(argv)
    from roam_tvm.report.compare import machine, versions

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "manifest.json")
    manifest = {"entries": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    command = "python benchmarks/gpu_export.py " + " ".join(sys.argv[1:] if argv is None else argv)
    manifest.setdefault("commands", []).append(command)
    manifest.update(versions=versions(), machine=machine(), arch=ARCH)
    jobs = [(text, lambda t: export_model(t, args.out, args.time_limit)) for text in args.models]
    jobs += [(text, lambda t: export_budget(t, args.out, args.time_limit, args.search_limit, args.paths))
             for text in args.budget]
    for text, export in jobs:
        new = export(text)
        for e in new:
            e["command"] = command
        built = {(e["key"], e["planner"]) for e in new}
        manifest["entries"] = [e for e in manifest["entries"] if (e["key"], e["planner"]) not in built] + new
        with open(path, "w", encoding="utf-8") as f:  # after each model: a later failure keeps it
            json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
