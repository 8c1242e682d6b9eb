"""Planned against measured: build each zoo step for llvm, run it, count what it allocates.

    python benchmarks/measure_cpu.py --small mlp cnn gpt2-small        # the zoo's small configurations
    python benchmarks/measure_cpu.py --batch 1 --seq 256 gpt2-small     # GPT-2 small at 256 tokens
    python benchmarks/measure_cpu.py mlp --small --planners roam        # one planner (models first)

For each model and planner (``tvm-default``, ``roam``) it writes, into ``--out``
(default ``benchmarks/results/measured_cpu.json``, entries merged by key):

``planned_bytes``
    the planned peak (``roam-tvm compare``'s ``peak_bytes``); for ``roam`` it includes
    kernel scratch, placed in the plan (``LiftKernelScratch``);
``scratch_bytes``, ``peak_with_scratch_bytes``, ``pool_peak_bytes``
    the largest kernel scratch left outside the plan (0 for ``roam`` when every kernel's
    was placed or removed), the peak with each op's scratch, and the peak with TVM's
    workspace pool modelled (``roam_tvm.report.workspace_pool``);
``measured_bytes``
    the highest bytes live during a step, counted at the allocator in a child
    process (``roam_tvm.runtime.cpu_measure``, VM allocator ``naive``: exact sizes;
    two steps, the second with the scratch pool already filled), without the module's
    constants (allocated when it loads; ``measured_with_constants_bytes`` adds them, as
    plans count them);
``measured_over_planned``, ``measured_over_with_scratch``, ``measured_over_pool``
    the ratios the README quotes;
``measured_pooled_bytes`` (with ``--pooled``)
    the same under the VM's pooled allocator (TVM's default ``memory_cfg``), which
    rounds to 4 KiB and keeps every freed storage for a later one of the same size.

Each entry records its command, the versions and the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
_PASSES = {"tvm-default": (False, False), "roam": (True, True)}


def entry_key(model: str, args) -> str:
    if args.small:
        return f"{model}@small"
    sizes = [f"{k}{getattr(args, k)}" for k in ("batch", "seq", "image") if getattr(args, k)]
    return "@".join([model] + sizes) if sizes else model


def measure_model(model: str, args) -> dict:
    """Compare, build, run and count one model; the JSON entry."""
    from roam_tvm.cli import optimizer_from_config
    from roam_tvm.frontend import from_torch
    from roam_tvm.report.compare import compare_step, machine, versions
    from roam_tvm.runtime import build
    from roam_tvm.runtime.cpu_measure import measure_cpu_step
    from roam_tvm.runtime.measure import inputs_from_signature
    from roam_tvm.zoo import get_model

    spec = get_model(model, batch=args.batch, seq=args.seq, image=args.image, small=args.small)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer))
    # The same solver limits for the report and the build, so that both plan alike.
    limits = {"time_limit": args.time_limit}
    report = compare_step(ts, planners=list(args.planners), target="llvm", cut=False, progress=False,
                          order_options=limits, layout_options=limits)
    step_args = inputs_from_signature(ts.mod[ts.func_name])
    out = {"model": model, "sizes": {k: getattr(args, k) for k in ("batch", "seq", "image")}, "small": args.small,
           "command": "python benchmarks/measure_cpu.py " + " ".join(sys.argv[1:]),
           "scratch_threads": report["scratch"]["threads"], "planners": {},
           "versions": versions(), "machine": machine()}
    for planner in args.planners:
        r = report["planners"][planner]
        order, layout = _PASSES[planner]
        start = time.perf_counter()
        exe = build(ts.mod, "llvm", order=order, layout=layout, order_options=limits if order else None,
                    layout_options=limits if layout else None)
        build_s = time.perf_counter() - start
        m = measure_cpu_step(exe, step_args, ts.func_name, allocator="naive", steps=2)
        extra = {}
        if args.pooled:
            pooled = measure_cpu_step(exe, step_args, ts.func_name, allocator="pooled", steps=2)
            extra = {"measured_pooled_bytes": pooled.peak_bytes, "measured_pooled": pooled.to_dict()}
        out["planners"][planner] = {**extra,
            "planned_bytes": r["peak_bytes"], "scratch_bytes": r["scratch_bytes"],
            "peak_with_scratch_bytes": r["peak_with_scratch_bytes"], "pool_peak_bytes": r["pool_peak_bytes"],
            "measured_bytes": m.peak_bytes, "measured": m.to_dict(), "build_seconds": build_s,
            # plans count the module's constants as always live; the step's bytes do not include them
            "measured_with_constants_bytes": m.peak_bytes + m.loaded_bytes,
            "measured_over_planned": m.peak_bytes / r["peak_bytes"],
            "measured_over_with_scratch": m.peak_bytes / r["peak_with_scratch_bytes"],
            "measured_over_pool": m.peak_bytes / r["pool_peak_bytes"]}
        print(f"{model} {planner}: planned {r['peak_bytes']:,} B, with scratch {r['peak_with_scratch_bytes']:,} B, "
              f"pool {r['pool_peak_bytes']:,} B, measured {m.peak_bytes:,} B", flush=True)
    return out


def main(argv=None) -> int:
    from roam_tvm.zoo import MODELS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="zoo models")
    ap.add_argument("--small", action="store_true", help="the zoo's small configurations")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--image", type=int)
    ap.add_argument("--planners", nargs="+", default=list(_PASSES), choices=list(_PASSES))
    ap.add_argument("--pooled", action="store_true",
                    help="also measure under the VM's pooled allocator (TVM's default; see cpu_measure)")
    ap.add_argument("--time-limit", type=float, default=10.0,
                    help="RoamOrder's and RoamLayout's time limit, seconds (as roam-tvm compare)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "measured_cpu.json"))
    args = ap.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; valid: {', '.join(MODELS)}")
    data = {"entries": {}}
    if os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as f:
            data = json.load(f)
    for model in args.models:
        data["entries"][entry_key(model, args)] = measure_model(model, args)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:  # after each model: a later failure keeps it
            json.dump(data, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
