"""Regenerate the planner comparison over the model zoo, the report and the README's results table.

    python benchmarks/run.py --quick                 # small sizes, every zoo architecture (minutes on 2 cores)
    python benchmarks/run.py                         # the zoo's default sizes (hours on 2 cores)
    python benchmarks/run.py --paper                 # + gpt2-xl-paper at batch 1, 2, 4 (the paper's anchors)
    python benchmarks/run.py --quick --models mlp cnn --out /tmp/r --readme /tmp/README.md
    python benchmarks/run.py --report-only           # rebuild report.md, plots and README from baseline.json
    python benchmarks/run.py --report-only --add xl.json   # add a `roam-tvm compare --json` report run apart

Each model runs in its own process (``python -m roam_tvm compare ... --json``), so a model that fails to
import or runs out of time is recorded as failed and the others go on. Writes, in ``--out``
(default ``benchmarks/results``):

``baseline.json``
    ``{"command", "mode", "target", "versions", "machine", "created", "entries": {key: report}}``; each
    report is what ``roam-tvm compare --json`` writes (with its own command, versions and machine), or
    ``{"error": ...}``. Entries of the same mode already in the file are kept unless re-run
    (``--fresh`` drops them).
``report.md``
    per model: peaks per planner (MiB), the lower bounds, the reduction of ``roam`` against
    ``tvm-default`` and against ``pytorch``, planning seconds, how each figure was obtained; the paper's
    GPT2-XL anchors beside ours; summaries of ``dsa.json`` and ``order.json`` when present; planned
    beside measured (CPU) bytes from ``measured_cpu.json`` when ``benchmarks/measure_cpu.py`` has
    written it (that script builds and runs each step for llvm; this one only plans).
``zoo_peaks.png``, ``zoo_plan_seconds.png``
    peaks relative to ``tvm-default`` per model and planner; planning seconds per model.

and rewrites the README between ``<!-- results:start -->`` and ``<!-- results:end -->`` (adding a
``## Results`` section with the markers at the end if they are missing).

How figures are obtained: ``planned`` = the peak of the memory-planned Relax program, read back and
simulated (``roam_tvm.report.simulate``; nothing runs); ``simulated`` = PyTorch's eager step replayed on
meta tensors in PyTorch's own op order with perfect packing; ``measured`` = ``torch.cuda.max_memory_allocated``
on a GPU. All figures include parameters, optimizer states and inputs (like the paper's).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
START, END = "<!-- results:start -->", "<!-- results:end -->"

sys.path.insert(0, HERE)
from zoo_tables import (PAPER_GPT2XL, PLANNERS, config_str, distinct_configurations, full_table,  # noqa: E402
                        generic_results,
                        mean_line, measured_table, mib, paper_rows, pct, peak, reduction, short_table, summary)

# --quick: every zoo architecture once, at sizes that plan in seconds. mlp and cnn are cheap at their
# default sizes; the others use their small test configurations. vit-b16, gpt2-medium and gpt2-xl are left
# out because their small configurations are the same networks as vit-tiny's and gpt2-small's.
QUICK = {
    "mlp": {},
    "cnn": {},
    "resnet18": {"small": True},
    "vgg11": {"small": True},
    "mobilenet_v2": {"small": True},
    "vit-tiny": {"small": True},
    "bert-base": {"small": True},
    "gpt2-small": {"small": True},
    "gpt2-xl-paper": {"small": True},
}



# ----------------------------------------------------------------------------------------------- running
def jobs_for(args) -> list[tuple[str, str, dict]]:
    """(entry key, zoo model, options) for every run asked for."""
    from roam_tvm.zoo import MODELS

    if args.quick:
        base = dict(QUICK)
    else:
        base = {m: {} for m in MODELS}
    names = args.models or list(base)
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        raise SystemExit(f"run.py: unknown model(s) {unknown}; valid: {', '.join(MODELS)}")
    jobs = [(m, m, dict(base.get(m, {"small": True} if args.quick else {}))) for m in names]
    if args.paper:
        for b in PAPER_GPT2XL:
            if b == 1 and not args.quick and any(m == "gpt2-xl-paper" for _, m, _ in jobs):
                continue  # the default-size entry is batch 1, seq 1024 already
            jobs.append((f"gpt2-xl-paper@batch{b}", "gpt2-xl-paper", {"batch": b, "seq": 1024}))
    return jobs


def compare_command(model: str, opts: dict, target: str, time_limit: float, json_path: str) -> list[str]:
    cmd = [sys.executable, "-m", "roam_tvm", "compare", "--model", model, "--target", target,
           "--time-limit", str(time_limit), "--json", json_path, "--quiet"]
    if opts.get("small"):
        cmd.append("--small")
    for k in ("batch", "seq", "image"):
        if opts.get(k):
            cmd += [f"--{k}", str(opts[k])]
    return cmd


def run_one(model: str, opts: dict, target: str, time_limit: float, timeout: float) -> dict:
    """One ``roam-tvm compare`` in its own process; its JSON report, or ``{"error": ...}``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        cmd = compare_command(model, opts, target, time_limit, path)
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"model": model, "options": opts, "error": f"timed out after {timeout:.0f} s",
                    "wall_seconds": time.perf_counter() - start}
        wall = time.perf_counter() - start
        if proc.returncode != 0 or not os.path.exists(path):
            tail = [ln for ln in (proc.stderr or "").splitlines() if ln.strip() and "Warning" not in ln][-6:]
            return {"model": model, "options": opts, "error": f"exit {proc.returncode}: " + " | ".join(tail),
                    "wall_seconds": wall}
        with open(path) as f:
            rep = json.load(f)
    rep["command"] = "python -m roam_tvm " + " ".join(cmd[3:]).replace(path, "REPORT.json")
    rep["wall_seconds"] = wall
    rep["options"] = opts
    return rep


# ---------------------------------------------------------------------------------------------- figures
def plots(entries: dict, out: str) -> list[str]:
    import numpy as np

    from roam_tvm.report.plots import _PLANNER_COLORS, plt, save

    ok = {k: r for k, r in entries.items() if "error" not in r and peak(r, "tvm-default")}
    if not ok:
        return []
    paths = []
    keys = list(ok)
    planners = [p for p in PLANNERS if any(peak(r, p) is not None for r in ok.values())]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(keys) + 2), 4.5))
    width = 0.8 / max(1, len(planners))
    xs = np.arange(len(keys))
    for i, p in enumerate(planners):
        vals = [(peak(ok[k], p) or float("nan")) / peak(ok[k], "tvm-default") for k in keys]
        ax.bar(xs + (i - (len(planners) - 1) / 2) * width, vals, width, label=p,
               color=_PLANNER_COLORS.get(p), edgecolor="black", linewidth=0.4)
    cut = [ok[k].get("lower_bounds", {}).get("cut") for k in keys]
    if any(c is not None for c in cut):
        ax.scatter(xs, [(c or float("nan")) / peak(ok[k], "tvm-default") for c, k in zip(cut, keys)],
                   marker="_", s=400, color="#cc3311", zorder=5, label="lower bound: cut")
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{k}\n{config_str(ok[k])}" for k in keys], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("peak / tvm-default peak")
    ax.set_title("peak memory of one training step, relative to TVM's default planner")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    paths.append(save(fig, os.path.join(out, "zoo_peaks.png")))

    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(keys) + 2), 4.0))
    for i, p in enumerate(("roam-order-only", "roam-layout-only", "roam")):
        vals = [max(ok[k]["planners"].get(p, {}).get("plan_seconds", float("nan")), 1e-3) for k in keys]
        ax.bar(xs + (i - 1) * 0.27, vals, 0.27, label=p, color=_PLANNER_COLORS.get(p), edgecolor="black",
               linewidth=0.4)
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{k}\n({ok[k].get('ops', '?')} ops)" for k in keys], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("planning seconds (log)")
    ax.set_title("planning time per model (2 cores)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    paths.append(save(fig, os.path.join(out, "zoo_plan_seconds.png")))
    return paths


# ----------------------------------------------------------------------------------------------- report
def adam_state_bytes(rep: dict):
    """Adam's two state tensors for the model of a ``gpt2-xl-paper`` report (2 x its parameter bytes),
    counted on the zoo's model built on the meta device; None for other models or optimizers."""
    cfg = rep.get("config") or {}
    if rep.get("model") != "gpt2-xl-paper" or cfg.get("optimizer") not in ("adam", "adamw"):
        return None
    sys.path.insert(0, ROOT)
    from roam_tvm.zoo import get_model

    spec = get_model("gpt2-xl-paper", batch=cfg.get("batch"), seq=cfg.get("seq"), meta=True)
    return 2 * spec.param_bytes()


def readme_section(zoo: dict, report_rel: str) -> str:
    entries = zoo["entries"]
    s = summary(entries)
    lines = [f"Generated by `{zoo['command']}` on {zoo['created']} ({zoo['mode']} sizes, planned for "
             f"`{zoo['target']}`; {zoo['machine'].get('cpus')} CPUs, GPU: {zoo['machine'].get('gpu') or 'none'}). "
             "Peaks in MiB, parameters, optimizer states and inputs included; negative = less memory. "
             f"Details, every planner, the lower bounds and plots: [{report_rel}]({report_rel}).", ""]
    lines += short_table(entries)
    lines += ["", mean_line(s), ""]
    lines += ["The ROAM paper's GPT2-XL figures (simulated/planned, PyTorch 1.13, Gurobi) beside ours:", ""]
    lines += paper_rows(entries, zoo['mode'], adam_state_bytes)
    return "\n".join(lines)


def write_report(zoo: dict, out: str, plot_paths: list[str]) -> str:
    entries = zoo["entries"]
    s = summary(entries)
    lines = ["# roam-tvm benchmark report", "",
             f"Generated by `{zoo['command']}` on {zoo['created']}; {zoo['mode']} sizes; memory planned for "
             f"target `{zoo['target']}`.", "",
             f"Versions: {', '.join(f'{k} {v}' for k, v in zoo['versions'].items() if v)}. "
             f"Machine: {zoo['machine'].get('platform')}, {zoo['machine'].get('cpus')} CPUs, "
             f"GPU: {zoo['machine'].get('gpu') or 'none'}.", "",
             "## How the figures were obtained", "",
             "- **planned**: the training step is compiled by the planner's Relax pipeline up to and including "
             "memory planning; the planned program is read back at storage level and its peak is simulated "
             "in program order (`roam_tvm.report.simulate`). Nothing is executed.",
             "- **pytorch simulated**: PyTorch's eager step (forward, `backward()`, `optimizer.step()`, after a "
             "warm-up step) replayed on meta tensors in PyTorch's own op order, perfect packing "
             "(`roam_tvm.report.pytorch_peak`): a lower bound of what the CUDA caching allocator reports.",
             "- **pytorch measured**: `torch.cuda.max_memory_allocated` on a GPU.",
             "- Lower bounds (on tvm-default's unplanned graph): `order` = perfect packing in program order, "
             "`any` = the largest single op's footprint, `cut` = the least any topological order can reach.",
             "- Every figure includes parameters, optimizer states and inputs (always live), like the paper's.",
             "", "## Peaks per model (MiB)", ""]
    lines += full_table(entries)
    lines += ["", "## Reductions", ""] + short_table(entries) + ["", mean_line(s), ""]
    lines += ["## The paper's GPT2-XL anchors", "",
              "Setup: `GPT2Model` 1.5B without LM head, 1024 tokens, hidden state (1600) as logits against "
              "all-zero targets, Adam(lr=0.1, weight_decay=1e-4) (zoo model `gpt2-xl-paper`). The paper's "
              "figures are planned/simulated (PyTorch 1.13 + Gurobi); ours are planned for "
              f"`{zoo['target']}`. Run `python benchmarks/run.py --paper` for ours at full size.", ""]
    lines += paper_rows(entries, zoo['mode'], adam_state_bytes) + [""]
    if plot_paths:
        lines += ["## Plots", ""] + [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plot_paths] + [""]
    measured = os.path.join(out, "measured_cpu.json")
    if os.path.exists(measured):
        with open(measured) as f:
            data = json.load(f)
        lines += ["## Planned against measured (CPU, llvm)", "",
                  "Bytes. **planned**: the plan's peak, as above (planned for llvm here). **largest scratch**: "
                  "the most global-scope scratch one kernel asks for at run time (`TVMBackendAllocWorkspace`, "
                  "whole 4 KiB pages). **planned + scratch**: at each op, live plus that op's scratch. "
                  "**planned + TVM's pool**: live plus what TVM's workspace pool holds (it keeps every block "
                  "between kernels and steps). **measured (CPU)**: the most bytes live during a step, every "
                  "aligned allocation of TVM's CPU runtime counted in a child process (naive VM allocator: "
                  "exact sizes; second step, pool filled; without the module's constants, which plans count as always "
                  "live: a few bytes to 3 KB here, `measured_with_constants_bytes` in the JSON where recorded); **pooled**: the same under TVM's default VM allocator, which "
                  "rounds to 4 KiB and keeps freed storages for reuse by the same size. Commands: "
                  + "; ".join(f"`{e['command']}`" for e in {e['command']: e for e in data.get('entries', {}).values()}.values())
                  + ".", ""]
        lines += measured_table(data) + [""]
    others = [n for n in ("dsa.json", "order.json") if os.path.exists(os.path.join(out, n))]
    if others:
        lines += ["## Other benchmarks", ""]
        for n in others:
            try:
                with open(os.path.join(out, n)) as f:
                    lines += generic_results(n, json.load(f))
            except (OSError, ValueError) as err:
                lines += [f"### `{n}`", "", f"(unreadable: {err})", ""]
    lines += ["## Commands", ""] + [f"- {k}: `{r['command']}`" for k, r in entries.items() if r.get("command")]
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def update_readme(path: str, section: str) -> None:
    with open(path) as f:
        text = f.read()
    block = f"{START}\n{section}\n{END}"
    if START in text and END in text and text.index(START) < text.index(END):
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n## Results\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)


# ------------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes on 2 cores)")
    ap.add_argument("--models", nargs="+", default=None, help="zoo models to run (default: all for the mode)")
    ap.add_argument("--paper", action="store_true", help="also gpt2-xl-paper at batch 1, 2, 4 and seq 1024")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="results folder")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"), help="README to update")
    ap.add_argument("--no-readme", action="store_true", help="leave the README alone")
    ap.add_argument("--target", default="cuda", choices=["cuda", "llvm"],
                    help="target whose lowering is planned (default cuda, as in the paper; nothing runs)")
    ap.add_argument("--time-limit", type=float, default=None, help="solver seconds per piece (default 5 quick, 10)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per model (default 900 quick, 7200)")
    ap.add_argument("--fresh", action="store_true", help="drop entries of baseline.json that are not re-run")
    ap.add_argument("--report-only", action="store_true", help="rebuild report, plots and README from baseline.json")
    ap.add_argument("--add", nargs="+", default=[], metavar="JSON",
                    help="add reports written by `roam-tvm compare --json` (e.g. a long run done apart)")
    args = ap.parse_args(argv)
    argv_used = sys.argv[1:] if argv is None else list(argv)
    os.makedirs(args.out, exist_ok=True)
    zoo_path = os.path.join(args.out, "baseline.json")

    sys.path.insert(0, ROOT)
    from roam_tvm.report.compare import machine, versions

    mode = "quick" if args.quick else "default"
    old = {}
    if os.path.exists(zoo_path):
        with open(zoo_path) as f:
            old = json.load(f)
    if args.report_only:
        if not old:
            raise SystemExit(f"run.py: {zoo_path} not found; run without --report-only first")
        zoo = old
    else:
        entries = {} if (args.fresh or old.get("mode") != mode) else dict(old.get("entries", {}))
        time_limit = args.time_limit or (5.0 if args.quick else 10.0)
        timeout = args.timeout or (900.0 if args.quick else 7200.0)
        for key, model, opts in jobs_for(args):
            print(f"[run.py] {key} {opts or '(default sizes)'} ...", flush=True)
            rep = run_one(model, opts, args.target, time_limit, timeout)
            entries[key] = rep
            if "error" in rep:
                print(f"[run.py]   FAILED: {rep['error']}", flush=True)
            else:
                d, r, p = peak(rep, "tvm-default"), peak(rep, "roam"), peak(rep, "pytorch")
                print(f"[run.py]   tvm-default {mib(d)}  pytorch {mib(p)}  roam {mib(r)} MiB  "
                      f"(roam {pct(reduction(r, d))} vs tvm-default, {pct(reduction(r, p))} vs pytorch; "
                      f"{rep['wall_seconds']:.0f} s)", flush=True)
        # keep the zoo's order, then anything else
        from roam_tvm.zoo import MODELS

        order = list(MODELS)
        entries = dict(sorted(entries.items(), key=lambda kv: (order.index(kv[0].split("@")[0])
                                                                if kv[0].split("@")[0] in order else len(order), kv[0])))
        zoo = {"command": "python benchmarks/run.py " + " ".join(argv_used), "mode": mode, "target": args.target,
               "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "versions": versions(), "machine": machine(),
               "entries": entries}
        with open(zoo_path, "w") as f:
            json.dump(zoo, f, indent=1)
        print(f"[run.py] wrote {zoo_path}")
    if args.add:
        for path in args.add:
            with open(path) as f:
                rep = json.load(f)
            cfg = rep.get("config") or {}
            key = rep.get("model", os.path.basename(path)) + "@" + ",".join(
                f"{k}{cfg[k]}" for k in ("batch", "seq", "image") if cfg.get(k) is not None)
            rep.setdefault("options", {k: cfg[k] for k in ("batch", "seq", "image", "small") if k in cfg})
            rep["added_from"] = os.path.basename(path)
            zoo["entries"][key] = rep
            print(f"[run.py] added {path} as {key}")
        with open(zoo_path, "w") as f:
            json.dump(zoo, f, indent=1)
    plot_paths = plots(distinct_configurations(zoo["entries"]), args.out)
    report = write_report(zoo, args.out, plot_paths)
    print(f"[run.py] wrote {report}" + "".join(f", {p}" for p in plot_paths))
    if not args.no_readme:
        rel = os.path.relpath(report, os.path.dirname(os.path.abspath(args.readme)))
        update_readme(args.readme, readme_section(zoo, rel))
        print(f"[run.py] updated {args.readme} between {START} and {END}")
    print("\n".join(short_table(zoo["entries"])))
    print(mean_line(summary(zoo["entries"])))
    return 0 if not summary(zoo["entries"])["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
