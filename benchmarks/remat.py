"""Recomputation under 20 budgets per zoo model: peak, overhead, monotonicity (``roam_tvm.remat``).

Usage::

    python benchmarks/remat.py [--models mlp,cnn,resnet18] [--small] [--budgets 20]
                               [--target cuda] [--out benchmarks/results/remat.json]

Per model: import (``load_step``), dispatch/legalize/fuse (``schedule_for``),
``RoamOrder`` (roam's unbudgeted order), extract the call_tir-level graph,
estimate each kernel's FLOPs from its TIR, then plan recomputation with the
H100 roofline cost model for budgets evenly spaced from the floor to roam's
unbudgeted peak. Peaks are perfect-packing peaks of that graph (what the
recomputation planner guarantees; the laid-out arena is what
``roam-tvm compare --budget`` reports). ``monotone`` says whether a larger
budget never cost more recomputation, for every pair of budgets.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from argparse import Namespace

HERE = os.path.dirname(os.path.abspath(__file__))


def run_model(model: str, small: bool, target: str, n_budgets: int, order_time: float) -> dict:
    """Plan ``n_budgets`` budgets on one zoo model; returns one JSON row."""
    import tvm

    from roam_tvm.cli import load_step
    from roam_tvm.passes import RoamOrder, extract_graph
    from roam_tvm.remat import RematPlanner
    from roam_tvm.remat.relax_remat import op_flops
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.simulate import schedule_for

    args = Namespace(model=model, batch=None, seq=None, image=None, small=small, optimizer=None,
                     lr=None, loss=None, quiet=True)
    ts, spec = load_step(args)
    func = ts.func_name
    t0 = time.perf_counter()
    scheduled = schedule_for(with_param_kinds(ts), target)
    with tvm.target.Target(target):
        ordered = RoamOrder(functions=[func], time_limit=order_time)(scheduled)
    g = extract_graph(ordered[func], ordered, func).graph
    flops = op_flops(ordered, g)
    prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    planner = RematPlanner(g, list(range(len(g.ops))), "roofline", flops)
    floor = planner.floor()
    floor_seconds = time.perf_counter() - t0
    top = planner.unbudgeted_peak
    rows = []
    for k in range(n_budgets):
        budget = floor.bytes + (top - floor.bytes) * k // max(1, n_budgets - 1)
        t = time.perf_counter()
        plan = planner.plan(budget)
        over = plan.report["overheads"]
        rows.append({"budget_bytes": budget, "fraction_of_unbudgeted": budget / top, "peak_bytes": plan.peak,
                     "recomputed_ops": len(plan.source), "overhead_time": over.get("roofline"),
                     "overhead_flops": over.get("flops"), "overhead_bytes": over.get("bytes"),
                     "plan_seconds": time.perf_counter() - t})
    costs = [r["overhead_time"] for r in rows]
    return {"model": model, "small": small, "config": {k: v for k, v in spec.config.items()
                                                       if isinstance(v, (int, float, str, bool))},
            "ops": len(g.ops), "unbudgeted_peak_bytes": top, "floor_bytes": floor.bytes,
            "floor": floor.describe(), "lower_bound_bytes": floor.lower_bound,
            "path_states": len(planner.states), "prepare_seconds": prep, "floor_seconds": floor_seconds,
            "monotone": all(costs[i + 1] <= costs[i] for i in range(len(costs) - 1)),
            "peaks_fit": all(r["peak_bytes"] <= r["budget_bytes"] for r in rows), "budgets": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,cnn,resnet18")
    ap.add_argument("--small", action="store_true", help="the zoo's small test configurations")
    ap.add_argument("--budgets", type=int, default=20)
    ap.add_argument("--target", default="cuda", choices=["cuda", "llvm"])
    ap.add_argument("--order-time-limit", type=float, default=2.0, help="RoamOrder seconds per piece")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "remat.json"))
    args = ap.parse_args(argv)
    if args.budgets < 2:
        ap.error("--budgets must be at least 2")
    from roam_tvm.report.compare import machine, versions

    report = {"command": "python benchmarks/remat.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "versions": versions(), "machine": machine(),
              "peak_model": "perfect packing on the call_tir-level graph (roam's order + copies)",
              "cost_model": "H100 roofline: max(FLOPs / 989e12, bytes / 3.35e12) per op", "models": []}
    for model in [m for m in args.models.split(",") if m]:
        print(f"{model} ...", flush=True)
        row = run_model(model, args.small, args.target, args.budgets, args.order_time_limit)
        report["models"].append(row)
        b = row["budgets"]
        print(f"{model}: {row['ops']} ops, unbudgeted {row['unbudgeted_peak_bytes'] / 2**20:,.1f} MiB, floor "
              f"{row['floor_bytes'] / 2**20:,.1f} MiB (lower bound {row['lower_bound_bytes'] / 2**20:,.1f}), "
              f"at the floor +{100 * (b[0]['overhead_time'] or 0):.1f}% time, monotone {row['monotone']}",
              flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
