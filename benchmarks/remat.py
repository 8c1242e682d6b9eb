"""Recomputation under 20 budgets per zoo model: peak, overhead, LP bound, baselines, the issue's targets.

Usage::

    python benchmarks/remat.py [--models mlp,cnn,resnet18,resnet50:batch=184:image=224] [--small] [--budgets 20]
                               [--targets] [--target cuda] [--out benchmarks/results/remat.json]

Per model (``name`` or ``name:batch=B:seq=S:image=I``): import (``load_step``),
dispatch/legalize/fuse (``schedule_for``), ``RoamOrder`` (roam's unbudgeted
order), extract the call_tir-level graph, estimate each kernel's FLOPs from
its TIR, then plan recomputation with the H100 roofline cost model for
budgets evenly spaced from the floor to roam's unbudgeted peak. Peaks are
perfect-packing peaks of that graph (what the recomputation planner
guarantees; the laid-out arena is what ``roam-tvm compare --budget``
reports). Each budget also gets the LP-relaxation lower bound on the
overhead (``roam_tvm.remat.lp_bound``) and the gap to it, and the order-free
bounds of ``roam_tvm.remat.cross_bound`` (any order; same kernels, or any). ``monotone`` says
whether a larger budget never cost more recomputation, for every pair of
budgets. ``plan_seconds`` of a budget is the recomputation search a fresh
planner needs to reach it (the path grown so far), the figure the 180 s
target is about.

Baselines on the same eager simulator (``roam_tvm.report.pytorch_peak``):
PyTorch eager, and ``torch.utils.checkpoint`` around every ResNet stage or
transformer block (``roam_tvm.report.checkpointed``), whose overhead is an
eager roofline (FLOPs and bytes of the aten ops PyTorch runs).

``--targets`` adds the issue's rows (ResNet-50 batch 184 at 53/40/33% of
PyTorch's peak; GPT-2 small 1,024 tokens, batch 24 under roam's batch-8
peak; GPT2-XL paper setup, batch 8 and 16 under 80 GiB) to ``targets``,
each with ``met`` and, when missed, by how much.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from remat_rows import baselines, plan_row, prepare  # noqa: E402

GIB = 1 << 30
TARGETS = [  # (model spec, budget kind, value, overhead limit)
    ("resnet50:batch=184:image=224", "pytorch", 0.53, 0.04),
    ("resnet50:batch=184:image=224", "pytorch", 0.40, 0.07),
    ("resnet50:batch=184:image=224", "pytorch", 0.33, 0.10),
    ("gpt2-small:batch=24:seq=1024", "roam:gpt2-small:batch=8:seq=1024", 1.0, 0.06),
    ("gpt2-xl-paper:batch=8:seq=1024", "bytes", 80 * GIB, 0.05),
    ("gpt2-xl-paper:batch=16:seq=1024", "bytes", 80 * GIB, 0.30),
]


def parse_model(text: str) -> tuple[str, dict]:
    """``'name:batch=8:seq=16'`` -> ``('name', {'batch': 8, 'seq': 16})``."""
    name, *rest = text.split(":")
    sizes = {}
    for kv in filter(None, rest):
        k, _, v = kv.partition("=")
        if k not in ("batch", "seq", "image") or not v.isdigit():
            raise SystemExit(f"bad model size {kv!r} in {text!r}: use batch=, seq= or image= with an integer")
        sizes[k] = int(v)
    return name, sizes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,cnn,resnet18", help="comma-separated; empty for none")
    ap.add_argument("--small", action="store_true", help="the zoo's small test configurations")
    ap.add_argument("--budgets", type=int, default=20)
    ap.add_argument("--targets", action="store_true", help="also run the issue's target rows")
    ap.add_argument("--target", default="cuda", choices=["cuda", "llvm"])
    ap.add_argument("--order-time-limit", type=float, default=2.0, help="RoamOrder seconds per piece")
    ap.add_argument("--time-limit", type=float, default=180.0, help="recomputation search seconds per model")
    ap.add_argument("--no-inplace", action="store_true",
                    help="never write an output into a dying input (the figures before in-place planning)")
    ap.add_argument("--only-targets", default="",
                    help="comma-separated substrings: run only the target rows whose model matches one")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "remat.json"))
    args = ap.parse_args(argv)
    if args.budgets < 2:
        ap.error("--budgets must be at least 2")
    models = [parse_model(m) for m in args.models.split(",") if m]  # bad sizes fail before any work
    from roam_tvm.report.compare import machine, versions

    report = {"command": "python benchmarks/remat.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "versions": versions(), "machine": machine(),
              "peak_model": "perfect packing on the call_tir-level graph (roam's order + copies)",
              "cost_model": "H100 roofline: max(FLOPs / 989e12, bytes / 3.35e12) per op",
              "lp_bound": "LP relaxation over the planner's candidates (roam_tvm.remat.lp_bound): a lower bound "
                          "for plans that drop the same roots between their users in the same base order",
              "order_free_bound": "roam_tvm.remat.cross_bound: a lower bound for every plan in any order that "
                                  "recomputes with the same kernels (order_free_bound_time), or with any kernel, "
                                  "fused ones included (any_kernel_bound_time: the bytes written again)",
              "models": [], "targets": []}
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)

    def save():
        with open(out, "w") as f:
            json.dump(report, f, indent=1)

    for name, sizes in models:
        print(f"{name} {sizes} ...", flush=True)
        prep = prepare(name, sizes, args.small, args.target, args.order_time_limit, args.time_limit,
                       not args.no_inplace)
        row = plan_row(prep, args.budgets)
        row["baselines"] = baselines(name, sizes, args.small)
        report["models"].append(row)
        save()
        print(f"{name}: {row['ops']} ops, unbudgeted {row['unbudgeted_peak_bytes'] / 2**20:,.1f} MiB, floor "
              f"{row['floor_bytes'] / 2**20:,.1f} MiB, monotone {row['monotone']}, path {row['path_seconds']:.1f} s",
              flush=True)
    if args.targets:
        from remat_rows import run_targets

        only = [x for x in args.only_targets.split(",") if x]
        rows = [t for t in TARGETS if not only or any(x in t[0] for x in only)]
        report["targets"] = run_targets(rows, args, parse_model, save_to=(report, save))
    save()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
