"""One model, one budget: the recomputation floor, what is live at its peak, and what the plan recomputes.

Usage::

    python benchmarks/remat_probe.py --model gpt2-small:batch=24:seq=1024 --budget 9704255221 \
        [--paths all|readers-first] [--time-limit 600] [--out /tmp/probe.json]

``--budget`` is bytes (the default, 9704255221 B, is roam's unbudgeted peak of
gpt2-small batch 8, the issue's budget for batch 24). Prints the floor (the
least peak the planner reaches) with the live bytes at that peak grouped by
the kernel that made them, the plan at the budget with its overhead under each
cost model and the kernels it runs again, and the order-free lower bound on
the overhead (``roam_tvm.remat.cross_bound``).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PATH_SETS = {"all": None, "readers-first": ((True, True, True, True),)}


def live_at_peak(g, st, lv) -> list[dict]:
    """Roots live at the state's first peak step beyond the always-live ones, by producer kernel."""
    s = lv.at_peak[0]
    prod = {t: op for op in st.ops for t in op.outputs}
    groups: dict = collections.defaultdict(lambda: [0, 0])
    for r, ps in lv.users.items():
        if ps[0] <= s <= ps[-1] or (r in lv.pinned and ps[0] <= s):
            op = prod.get(r)
            key = ("?", 0, False) if op is None else (op.name, len(op.outputs), op.id >= len(g.ops))
            groups[key][0] += 1
            groups[key][1] += st.tensors[r].size
    return [{"kernel": k[0], "outputs": k[1], "copy": k[2], "tensors": n, "bytes": b}
            for k, (n, b) in sorted(groups.items(), key=lambda kv: -kv[1][1])]


def recomputed(g, source: dict, costs: list) -> list[dict]:
    """Kernels run again by a plan: count and roofline seconds."""
    rec: dict = collections.defaultdict(lambda: [0, 0.0])
    for o in source.values():
        rec[g.ops[o].name][0] += 1
        rec[g.ops[o].name][1] += costs[o]
    return [{"kernel": k, "copies": n, "seconds": c} for k, (n, c) in sorted(rec.items(), key=lambda kv: -kv[1][1])
            if c > 0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-small:batch=24:seq=1024")
    ap.add_argument("--budget", type=int, default=9704255221)
    ap.add_argument("--paths", default="all", choices=sorted(PATH_SETS))
    ap.add_argument("--time-limit", type=float, default=None, help="search seconds (default: none)")
    ap.add_argument("--order-time-limit", type=float, default=2.0)
    ap.add_argument("--budgets", type=int, default=8, help="budgets of the monotone check (floor to unbudgeted)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from remat import parse_model
    name, sizes = parse_model(args.model)
    from remat_rows import prepare

    from roam_tvm.remat import BudgetError, RematPortfolio
    from roam_tvm.remat.cross_bound import CrossingBound

    t0 = time.perf_counter()
    prep = prepare(name, sizes, False, "cuda", args.order_time_limit, args.time_limit)
    base = prep["planner"]
    paths = PATH_SETS[args.paths]
    pf = base if paths is None else RematPortfolio(base.g, base.base_order, "roofline", base.flops,
                                                   time_limit=args.time_limit, inplace=_pairs(base),
                                                   paths=paths)
    out = {"command": "python benchmarks/remat_probe.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "model": args.model, "budget_bytes": args.budget, "step_seconds": sum(pf.costs)}
    try:
        plan = pf.plan(args.budget)
        out["plan"] = {"peak_bytes": plan.peak, "overheads": plan.report["overheads"], "path": plan.report["path"],
                       "plan_seconds": plan.report["plan_seconds"],
                       "recomputed": recomputed(pf.g, plan.source, pf.costs)}
    except BudgetError as e:
        out["plan"] = {"error": str(e)}
    fl = pf.floor()
    best = min(pf.paths, key=lambda p: p.lives[-1].peak)
    out["floor"] = {"bytes": fl.bytes, "describe": fl.describe(), "lower_bound_bytes": fl.lower_bound,
                    "truncated": fl.truncated, "overhead": best.states[-1].cost / sum(best.costs),
                    "live_at_peak": live_at_peak(pf.g, best.states[-1], best.lives[-1])}
    out["monotone"] = monotone(pf, fl.bytes, args.budgets)
    xb = CrossingBound(pf.g, pf.costs, "roofline", pf.inplace)
    out["order_free_bound_time"] = xb.overhead(args.budget)
    out["any_kernel_bound_time"] = xb.overhead(args.budget, "any_kernel")
    out["seconds"] = time.perf_counter() - t0
    _print(out)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def monotone(pf, floor: int, n: int) -> dict:
    """Plans at ``n`` budgets from the floor to the unbudgeted peak (the path is grown by now):
    each peak fits its budget, and a larger budget never costs more recomputation."""
    budgets = [floor + (pf.unbudgeted_peak - floor) * k // max(1, n - 1) for k in range(n)]
    plans = [pf.plan(b) for b in budgets]
    over = [p.overhead for p in plans]
    return {"budgets": budgets, "overheads": over, "peaks_fit": all(p.peak <= b for p, b in zip(plans, budgets)),
            "monotone": all(over[k + 1] <= over[k] for k in range(n - 1))}


def _pairs(planner) -> dict | None:
    """The in-place pairs the prepared planner was given (op -> [(input, output)])."""
    model = planner.inplace
    if not model:
        return None
    g = planner.g
    return {o: [(g.ops[o].inputs[k], g.ops[o].outputs[m]) for k, m in ps] for o, ps in model.positions.items()}


def _print(out: dict) -> None:
    gib = 1 << 30
    fl, plan = out["floor"], out["plan"]
    print(f"{out['model']}: step {out['step_seconds'] * 1e3:.2f} ms (H100 roofline)")
    print(f"floor: {fl['describe']} (overhead there {fl['overhead']:.1%}; truncated {fl['truncated']})")
    for row in fl["live_at_peak"][:12]:
        print(f"  {row['bytes'] / 2**20:10.1f} MiB {row['tensors']:4d} x {row['kernel'][:60]}"
              f"{' (%d outputs)' % row['outputs'] if row['outputs'] > 1 else ''}{' (copy)' if row['copy'] else ''}")
    if "error" in plan:
        print(f"budget {out['budget_bytes'] / gib:.2f} GiB: {plan['error']}")
    else:
        print(f"budget {out['budget_bytes'] / gib:.2f} GiB: peak {plan['peak_bytes'] / gib:.3f} GiB, overhead "
              + ", ".join(f"{k} {v:.2%}" for k, v in plan["overheads"].items())
              + f" (path {plan['path']}, {plan['plan_seconds']:.0f} s of search)")
        for row in plan["recomputed"][:14]:
            print(f"  {row['seconds'] * 1e3:8.3f} ms {row['copies']:4d} x {row['kernel'][:60]}")
    mono = out["monotone"]
    print(f"{len(mono['budgets'])} budgets from the floor to the unbudgeted peak: peaks fit {mono['peaks_fit']}, "
          f"monotone {mono['monotone']} (overheads " + ", ".join(f"{o:.2%}" for o in mono["overheads"]) + ")")
    print(f"order-free lower bound on the overhead at that budget: {out['order_free_bound_time']:.2%} "
          f"(same kernels), {out['any_kernel_bound_time']:.2%} (any kernel)")


if __name__ == "__main__":
    raise SystemExit(main())
