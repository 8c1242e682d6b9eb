"""Where the recomputation overhead goes: per op kind, at the peak, and what the bounds charge.

Usage::

    python benchmarks/remat_breakdown.py [--model resnet50:batch=184:image=224] [--fractions 0.53,0.40,0.33]
                                         [--out benchmarks/results/remat_resnet50_breakdown.json]

For each budget (a fraction of PyTorch eager's simulated peak, as in the
issue's targets): the planned overhead and the bounds, the recomputed ops
grouped by kernel family (digits stripped from the PrimFunc name) with their
share of the step's roofline time, the bytes live at the plan's peak step
grouped the same way, and the cost per byte freed of the items the
order-free bound (``roam_tvm.remat.cross_bound``) takes at its binding op.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from remat import parse_model  # noqa: E402
from remat_rows import baselines, order_free_bound, prepare  # noqa: E402

GIB = float(1 << 30)


def family(name: str) -> str:
    """Kernel family: the PrimFunc name without its numbering."""
    return re.sub(r"\d+", "", name)


def _grouped(pairs) -> list[dict]:
    """(family, bytes or cost) pairs summed per family, largest first."""
    acc: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for k, v in pairs:
        acc[k][0] += 1
        acc[k][1] += v
    return [{"family": k, "count": n, "value": v} for k, (n, v) in sorted(acc.items(), key=lambda kv: -kv[1][1])]


def live_at_peak(planner, i: int) -> list[dict]:
    """Bytes of the roots live at the first peak step of path state ``i``, per producer family (GiB)."""
    st, lv = planner.states[i], planner.lives[i]
    s = lv.at_peak[0]
    prod = {t: op.id for op in st.ops for t in op.outputs}
    pairs = [(family(st.ops[prod[r]].name) if r in prod else "-", st.tensors[r].size / GIB)
             for r, ps in lv.users.items() if ps[0] <= s <= ps[-1] or (r in lv.pinned and ps[0] <= s)]
    return _grouped(pairs)


def bound_items(xb, budget: int, costs_per_byte_unit: float) -> dict:
    """At the op binding the order-free bound: the excess and the cost per byte of each item taken."""
    import numpy as np

    best = None
    for o, (cb, cc, total) in enumerate(xb.items):
        excess = xb.fixed[o] + total - budget
        if excess <= 0:
            continue
        j = int(np.searchsorted(cb, excess))
        if j >= len(cb):
            return {"infeasible_at_op": o}
        cost = cc[j - 1] + (excess - cb[j - 1]) / (cb[j] - cb[j - 1]) * (cc[j] - cc[j - 1])
        if best is None or cost > best[0]:
            best = (cost, o, j, excess)
    if best is None:
        return {}
    _, o, j, excess = best
    cb, cc, _ = xb.items[o]
    ratio = np.diff(cc[:j + 1]) / np.diff(cb[:j + 1]) / costs_per_byte_unit
    mix: dict[str, float] = defaultdict(float)
    for r, b in zip(np.round(ratio, 1).tolist(), np.diff(cb[:j + 1]).tolist()):
        mix[f"{r:g}"] += b / GIB
    return {"op": o, "excess_gib": excess / GIB, "gib_by_time_per_byte_written": dict(sorted(mix.items()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50:batch=184:image=224")
    ap.add_argument("--fractions", default="0.53,0.40,0.33", help="shares of PyTorch eager's peak")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "remat_resnet50_breakdown.json"))
    args = ap.parse_args(argv)
    fractions = [float(x) for x in args.fractions.split(",")]
    name, sizes = parse_model(args.model)
    prep = prepare(name, sizes, False, "cuda", 2.0, 180.0, True)
    planner, g = prep["planner"], prep["g"]
    from roam_tvm.remat.cost import H100_BANDWIDTH
    from roam_tvm.remat.lp_bound import RelaxedBound

    step = sum(planner.costs)
    ref = baselines(name, sizes, False)["pytorch"]["peak_bytes"]
    lp = RelaxedBound(g, planner.base_order, planner.costs, planner.inplace)
    xb = order_free_bound(prep)
    report = {"command": "python benchmarks/remat_breakdown.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "model": args.model, "pytorch_peak_bytes": ref, "unbudgeted_peak_bytes": planner.unbudgeted_peak,
              "step_time_s": step,
              "step_share_by_family": [{**r, "value": r["value"] / step} for r in
                                       _grouped((family(op.name), c) for op, c in zip(g.ops, planner.costs))][:15],
              "unbudgeted_live_at_peak_gib": live_at_peak(planner.paths[0], 0), "budgets": []}
    for f in fractions:
        b = int(ref * f)
        plan = planner.plan(b)
        i, path = plan.report["path_index"], planner.path_of(plan)
        report["budgets"].append({
            "fraction_of_pytorch": f, "budget_bytes": b, "peak_bytes": plan.peak,
            "overhead_time": plan.report["overheads"]["roofline"], "lp_bound_time": lp.overhead(b),
            "order_free_bound_time": xb.overhead(b), "any_kernel_bound_time": xb.overhead(b, "any_kernel"),
            "path": plan.report["path"], "hoists": plan.report["hoists"], "copies": len(plan.source),
            "recomputed_share_by_family": [{**r, "value": r["value"] / step} for r in
                                           _grouped((family(g.ops[o].name), planner.costs[o])
                                                    for o in plan.source.values())],
            "peak_op": plan.graph.ops[plan.order[path.lives[i].at_peak[0]]].name,
            "live_at_peak_gib": live_at_peak(path, i),
            "order_free_bound_items": bound_items(xb, b, 1.0 / H100_BANDWIDTH)})
        r = report["budgets"][-1]
        print(f"{f:.0%} of PyTorch: overhead {r['overhead_time']:.2%}, order-free bound "
              f"{r['order_free_bound_time']:.2%}, any kernel {r['any_kernel_bound_time']:.2%}, "
              f"LP {r['lp_bound_time']:.2%}",
              flush=True)
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
