"""Benchmark plan_order on exported zoo graphs (``benchmarks/export_graphs.py``) or random graphs.

Usage::

    python benchmarks/order.py                      # every graph in benchmarks/graphs/index.json
    python benchmarks/order.py --graphs-dir benchmarks/graphs/small
    python benchmarks/order.py g1.json g2.json      # given graph files
    python benchmarks/order.py --random 2500,12000  # random training graphs
        [--time-limit 10] [--total-time-limit S] [--jobs 2] [--out benchmarks/results/order.json]

Writes per graph: program-order peak, chosen peak, ``cut`` bound (all with
perfect packing), ratio chosen / cut, planning seconds, piece and reuse counts;
models whose export failed are listed with their error. Plus the command,
package versions and the machine (``roam_tvm.report.compare``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from roam_tvm.graph.bounds import cut_profile
from roam_tvm.graph.model import Graph
from roam_tvm.graph.random import random_training_graph
from roam_tvm.order import plan_order

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20


def _load_index(graphs_dir: str) -> tuple[list[tuple[str, str]], dict]:
    """(name, path) of exported graphs, and name -> error of the failed exports."""
    path = os.path.join(graphs_dir, "index.json")
    if not os.path.exists(path):
        return [], {}
    with open(path) as f:
        index = json.load(f)
    ok, failed = [], {}
    for name, row in index.items():
        if "error" in row:
            failed[name] = row["error"]
        else:
            ok.append((name, os.path.join(graphs_dir, f"{name}.json")))
    return ok, failed


def bench(g: Graph, args, config=None) -> dict:
    t = time.perf_counter()
    res = plan_order(g, time_limit=args.time_limit, node_budget=args.node_budget, jobs=args.jobs,
                     total_time_limit=args.total_time_limit, progress=sys.stderr.isatty())
    seconds = time.perf_counter() - t
    t = time.perf_counter()
    prof = cut_profile(g, [res.order])  # the full bound, not the planner's time-limited one
    lb = prof.bound
    rep = res.report
    row = {"graph": g.name, "config": config or g.meta.get("config"), "ops": len(g.ops),
           "always_live_bytes": g.always_live_bytes,
           "program_peak": res.program_peak, "peak": res.peak, "cut_bound": lb,
           "program_peak_mib": round(res.program_peak / MIB, 2), "peak_mib": round(res.peak / MIB, 2),
           "cut_bound_mib": round(lb / MIB, 2),
           "ratio_to_cut": res.peak / lb if lb else None,
           "vs_program": res.peak / res.program_peak if res.program_peak else None,
           "within_1pct_of_cut": bool(lb and res.peak <= 1.01 * lb),
           "plan_seconds": round(seconds, 2), "bound_seconds": round(time.perf_counter() - t, 2),
           "best_heuristic": min(rep.get("heuristics", {"-": 0}), key=rep.get("heuristics", {"-": 0}).get),
           "pieces": res.pieces, "optimal": res.optimal, "time_limited": res.time_limited,
           "fallback": res.fallback, "reused": res.reused, "repeats": rep.get("repeats"),
           "stopped": rep.get("stopped"), "total_time_limit": rep["budget"]["total_time_limit"]}
    print(f"{g.name}: {res.summary()}; ratio to cut {row['ratio_to_cut']:.4f}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="*", help="graph JSON files (default: the exported zoo graphs)")
    ap.add_argument("--graphs-dir", default=os.path.join(HERE, "graphs"))
    ap.add_argument("--only", default="", help="comma-separated graph names from the index")
    ap.add_argument("--random", default="", help="comma-separated sizes of random training graphs")
    ap.add_argument("--program", default="updates_last", help="program order of random graphs")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--total-time-limit", type=float, default=None)
    ap.add_argument("--node-budget", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "order.json"))
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of graphs already in --out that are not re-run now")
    args = ap.parse_args(argv)
    from roam_tvm.report.compare import machine, versions

    todo: list[tuple[str, object]] = [(os.path.basename(p), p) for p in args.graphs]
    failed: dict = {}
    if not args.graphs and not args.random:
        listed, failed = _load_index(args.graphs_dir)
        only = [s for s in args.only.split(",") if s]
        todo += [(n, p) for n, p in listed if not only or n in only]
        failed = {n: e for n, e in failed.items() if not only or n in only}
    for s in filter(None, args.random.split(",")):
        todo.append((f"random_training_{s}", random_training_graph(int(s), 1, program=args.program)))
    rows = []
    for name, src in todo:
        try:
            g = Graph.load(src) if isinstance(src, str) else src
            rows.append(bench(g, args))
        except Exception as e:  # noqa: BLE001 -- one bad graph must not lose the others
            rows.append({"graph": name, "error": f"{type(e).__name__}: {e}"[:2000]})
            print(f"{name}: FAILED {e}", file=sys.stderr, flush=True)
    out = {"command": " ".join(["python"] + [os.path.relpath(sys.argv[0])] + sys.argv[1:]),
           "versions": versions(), "machine": machine(),
           "note": "peaks with perfect packing (no fragmentation) on the lowered, fused train_step "
                   "graph (target cuda) that memory planning sees; cut = min-cut lower bound",
           "results": rows,
           "export_errors": failed}
    if args.merge and os.path.exists(args.out):  # keep earlier rows of graphs not re-run now
        with open(args.out) as f:
            old = json.load(f)
        names = {r["graph"] for r in rows}
        rows[:0] = [r for r in old.get("results", []) if r.get("graph") not in names]
        out["results"] = rows
        out["commands"] = old.get("commands", [old.get("command")]) + [out["command"]]
        failed = {**{k: v for k, v in old.get("export_errors", {}).items() if k not in names}, **failed}
        failed = {k: v for k, v in failed.items() if k not in {r["graph"] for r in rows if "error" not in r}}
        out["export_errors"] = failed
    ok = [r for r in rows if "ratio_to_cut" in r]
    out["summary"] = {"graphs": len(ok), "within_1pct_of_cut": sum(r["within_1pct_of_cut"] for r in ok),
                      "max_ratio_to_cut": max((r["ratio_to_cut"] for r in ok), default=None),
                      "max_plan_seconds": max((r["plan_seconds"] for r in ok), default=None),
                      "failed": sorted(list(failed) + [r["graph"] for r in rows if "error" in r])}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
