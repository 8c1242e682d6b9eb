"""Benchmark plan_order on graph JSON files (``Graph.save``) or random graphs.

Usage::

    python benchmarks/order.py [graph.json ...] [--time-limit 10] [--jobs 2]
                               [--random 2500,12000] [--out benchmarks/results/order.json]

Writes per graph: program peak, chosen peak, cut bound, ratio (chosen / cut),
seconds, piece counts; plus the command, package versions and the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata

from roam_tvm.graph.bounds import cut_bound
from roam_tvm.graph.model import Graph
from roam_tvm.graph.random import random_training_graph
from roam_tvm.order import plan_order


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("roam-tvm", "numpy", "scipy", "cvxpy", "highspy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="*", help="graph JSON files")
    ap.add_argument("--random", default="", help="comma-separated sizes of random training graphs")
    ap.add_argument("--program", default="updates_last", help="program order of random graphs")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--node-budget", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "order.json"))
    args = ap.parse_args(argv)
    graphs: list[Graph] = [Graph.load(p) for p in args.graphs]
    for s in filter(None, args.random.split(",")):
        graphs.append(random_training_graph(int(s), 1, program=args.program))
    if not graphs:
        graphs = [random_training_graph(n, 1, program=args.program) for n in (2500, 12000)]
    rows = []
    for g in graphs:
        res = plan_order(g, time_limit=args.time_limit, node_budget=args.node_budget,
                         jobs=args.jobs, progress=sys.stderr.isatty())
        t = time.perf_counter()
        lb = cut_bound(g, orders=[res.order])
        rows.append({"graph": g.name, "ops": len(g.ops), "program_peak": res.program_peak,
                     "peak": res.peak, "cut_bound": lb,
                     "ratio": res.peak / lb if lb else None,
                     "vs_program": res.peak / res.program_peak if res.program_peak else None,
                     "seconds": round(res.seconds, 3), "bound_seconds": round(time.perf_counter() - t, 3),
                     "pieces": res.pieces, "optimal": res.optimal,
                     "time_limited": res.time_limited, "fallback": res.fallback})
        print(f"{g.name}: {res.summary()}", flush=True)
    out = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv),
           "versions": _versions(),
           "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                       "processor": platform.processor()},
           "results": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
