"""Export the fused ``train_step`` graph of every zoo model to ``benchmarks/graphs/NAME.json``.

Usage::

    python benchmarks/export_graphs.py [--small] [--only mlp,gpt2-small-1024] [--target cuda]
                                       [--out benchmarks/graphs]

For each model: import with the frontend (``roam_tvm.cli.load_step``), dispatch /
legalize / fuse (``schedule_for(mod, target)``), lower the dataflow
(``dataflow_lower_passes``) and extract the plain graph of ``train_step`` at the
level where memory is planned (``extract_graph``), exactly as the simulator's
planners see it; ``Graph.save`` writes it. Failures are recorded (not raised)
in ``benchmarks/graphs/index.json`` so ``benchmarks/order.py`` can report them.

Besides the zoo at its default sizes, two paper-style configurations are
exported: ``gpt2-small-1024`` (batch 1, seq 1024, Adam) and ``gpt2-xl-paper``
(batch 1, seq 1024, Adam, built with meta weights).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from argparse import Namespace

HERE = os.path.dirname(os.path.abspath(__file__))

# extra configurations: name -> (zoo model, overrides)
EXTRA = {
    "gpt2-small-1024": ("gpt2-small", {"batch": 1, "seq": 1024, "optimizer": "adam"}),
}


def configs(small: bool) -> dict[str, tuple[str, dict]]:
    """Export name -> (zoo model name, load_step overrides)."""
    from roam_tvm import zoo

    out = {name: (name, {}) for name in zoo.MODELS}
    if not small:
        out.update(EXTRA)
        out["gpt2-xl-paper"] = ("gpt2-xl-paper", {"batch": 1, "seq": 1024})
    return out


def export_one(name: str, model: str, overrides: dict, small: bool, target: str, out_dir: str,
               log=print) -> dict:
    """Import, schedule, lower, extract and save one model; returns an index row."""
    import tvm

    from roam_tvm.cli import load_step
    from roam_tvm.passes import extract_graph
    from roam_tvm.report.compare import count_ops, with_param_kinds
    from roam_tvm.report.simulate import schedule_for
    from roam_tvm.runtime.pipeline import dataflow_lower_passes

    args = Namespace(model=model, batch=overrides.get("batch"), seq=overrides.get("seq"),
                     image=overrides.get("image"), small=small, optimizer=overrides.get("optimizer"),
                     lr=None, loss=None, quiet=True)
    row: dict = {"name": name, "model": model, "small": small, "target": target}
    t = time.perf_counter()
    ts, spec = load_step(args)  # meta weights where the zoo says so (gpt2-xl, gpt2-xl-paper)
    row["config"] = {**{k: v for k, v in spec.config.items() if isinstance(v, (int, float, str, bool))},
                     "optimizer": spec.optimizer.kind}
    row["import_seconds"] = round(time.perf_counter() - t, 2)
    mod = with_param_kinds(ts)
    row["ops_unfused"] = count_ops(mod[ts.func_name])
    t = time.perf_counter()
    scheduled = schedule_for(mod, target)
    tgt = tvm.target.Target(target)
    with tgt:
        lowered = tvm.transform.Sequential(dataflow_lower_passes(tgt))(scheduled)
    g = extract_graph(lowered[ts.func_name], lowered, ts.func_name).graph
    row["lower_seconds"] = round(time.perf_counter() - t, 2)
    g.name = name
    g.meta.update({"model": model, "config": row["config"], "target": target,
                   "level": "lowered (dataflow_lower_passes), before memory planning"})
    path = os.path.join(out_dir, f"{name}.json")
    g.save(path)
    row.update({"path": os.path.relpath(path, HERE), "ops": len(g.ops), "tensors": len(g.tensors),
                "always_live_bytes": g.always_live_bytes, "program_peak": g.peak()})
    log(f"{name}: {len(g.ops)} ops, program peak {g.peak() / 2**20:,.1f} MiB -> {path}")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="the zoo's small test configurations")
    ap.add_argument("--only", default="", help="comma-separated export names")
    ap.add_argument("--target", default="cuda", choices=["cuda", "llvm"])
    ap.add_argument("--out", default=os.path.join(HERE, "graphs"))
    args = ap.parse_args(argv)
    out_dir = os.path.join(args.out, "small") if args.small else args.out
    os.makedirs(out_dir, exist_ok=True)
    index_path = os.path.join(out_dir, "index.json")
    index = {}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    todo = configs(args.small)
    only = [s for s in args.only.split(",") if s]
    if only:
        unknown = [s for s in only if s not in todo]
        if unknown:
            ap.error(f"unknown export name(s) {unknown}; choose from {', '.join(todo)}")
        todo = {k: v for k, v in todo.items() if k in only}
    for name, (model, overrides) in todo.items():
        print(f"exporting {name} ...", flush=True)
        try:
            row = export_one(name, model, overrides, args.small, args.target, out_dir)
        except Exception as e:  # noqa: BLE001 -- record and go on with the next model
            row = {"name": name, "model": model, "small": args.small,
                   "error": f"{type(e).__name__}: {e}"[:2000],
                   "traceback": traceback.format_exc()[-4000:]}
            print(f"{name}: FAILED {row['error'][:300]}", file=sys.stderr, flush=True)
        index[name] = row
        with open(index_path, "w") as f:
            json.dump(index, f, indent=1)
    print(f"wrote {index_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
