"""Realistic-size rows for the families beyond the zoo: LLaMA ~1B (bf16 AMP), T5-base, DenseNet-121, a small MoE,
Swin-T, a GroupNorm U-Net, a 2-layer LSTM and a 2-layer GRU (hidden 1,024, 128 steps).

    python benchmarks/families.py                      # every row, one at a time
    python benchmarks/families.py llama t5             # some rows
    python benchmarks/families.py --probe              # the reduced configurations first (family_probes.py)
    nice python benchmarks/families.py --max-rss-gb 6 --timeout 1200 densenet

Each row is one ``roam-tvm compare --model roam_tvm/zoo/families.py:<f>_realistic --optimizer adam
--planners tvm-default pytorch roam`` (``--precision bf16-amp`` for LLaMA) in its own process,
watched for wall time and resident memory (the process and its children, from ``/proc``); a row
that passes ``--timeout`` seconds or ``--max-rss-gb`` is stopped and recorded as such, with what
was measured up to then. It writes ``benchmarks/results/runs/families/<f>-realistic.json``
(``<f>-probe.json`` with ``--probe``, ``-<target>`` added with ``--target``): the compare report, plus

``run``
    ``{"command", "wall_seconds", "max_rss_bytes", "returncode", "stopped"}``;
``checks``
    ``roam_over_cut`` and whether ``roam`` is at most 1.01x ``cut`` and below ``tvm-default`` and
    ``pytorch`` (``null`` where a figure is missing), each failure with the figures behind it.

A row that fails or is stopped is written as ``{"error" | "stopped", "run", "last_progress"}`` (no
figures); ``<f>-realistic.log`` keeps the row's progress output (the stage it reached).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "results", "runs", "families")
ROWS = {"llama": ["--precision", "bf16-amp"], "t5": [], "densenet": [], "moe": [], "swin": [], "unet": [],
        "lstm": [], "gru": []}
CUT_SLACK = 1.01


def factory_ref(family: str, probe: bool) -> str:
    return f"benchmarks/family_probes.py:{family}_probe" if probe else f"roam_tvm/zoo/families.py:{family}_realistic"


def compare_command(family: str, probe: bool, json_path: str, time_limit: float,
                    target: str | None = None) -> list[str]:
    extra = ["--target", target] if target else []  # none: compare's default (cuda)
    return [sys.executable, "-m", "roam_tvm", "compare", "--model", factory_ref(family, probe), "--optimizer", "adam",
            "--planners", "tvm-default", "pytorch", "roam", *ROWS[family], *extra, "--time-limit", str(time_limit),
            "--json", json_path]  # not --quiet: the progress goes to the row's log


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as f:
                todo.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total


def watch(cmd: list[str], timeout: float, max_rss: int, log_path: str) -> dict:
    """Run ``cmd``; stop it past ``timeout`` s or ``max_rss`` bytes. What happened, measured."""
    start = time.perf_counter()
    peak, stopped = 0, None
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")))
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            elapsed = time.perf_counter() - start
            if peak > max_rss:
                stopped = f"resident memory reached {peak / 2**30:.2f} GiB (> --max-rss-gb) after {elapsed:.0f} s"
            elif elapsed > timeout:
                stopped = f"still running after {elapsed:.0f} s (> --timeout), resident peak {peak / 2**30:.2f} GiB"
            if stopped:
                os.killpg(proc.pid, signal.SIGKILL)  # the session we started: compare and its children
                proc.wait()
                break
            time.sleep(1.0)
    return {"command": " ".join(cmd[1:]).replace("-m roam_tvm", "roam-tvm", 1),
            "wall_seconds": time.perf_counter() - start,
            "max_rss_bytes": peak, "returncode": proc.returncode, "stopped": stopped}


def best_bound(bounds: dict) -> int | None:
    """The tightest lower bound a compare report gives (``cut``, ``pair``, ``set``, ``exact`` or, for
    roam's aligned arena, ``cut_aligned``); roam at it is a proved optimum. None when it gives none."""
    return max((bounds.get(k) or 0 for k in ("cut", "pair", "set", "exact", "cut_aligned")), default=0) or None


def checks(report: dict) -> dict:
    """roam against cut, tvm-default and pytorch, with the figures."""
    peaks = {k: v.get("peak_bytes") for k, v in report.get("planners", {}).items()}
    cut = report.get("lower_bounds", {}).get("cut")
    roam = peaks.get("roam")
    out = {"roam_bytes": roam, "cut_bytes": cut, "tvm_default_bytes": peaks.get("tvm-default"),
           "pytorch_bytes": peaks.get("pytorch"),
           "pytorch_method": report.get("planners", {}).get("pytorch", {}).get("method")}
    out["roam_over_cut"] = roam / cut if roam and cut else None
    out["roam_within_1pct_of_cut"] = None if out["roam_over_cut"] is None else out["roam_over_cut"] <= CUT_SLACK
    best = best_bound(report.get("lower_bounds", {}))
    out["best_bound_bytes"] = best
    out["roam_over_best_bound"] = roam / best if roam and best else None
    for key in ("tvm_default", "pytorch"):
        other = out[f"{key}_bytes"]
        out[f"roam_below_{key}"] = None if roam is None or other is None else roam < other
    return out


def run_row(family: str, args) -> dict:
    name = f"{family}-{'probe' if args.probe else 'realistic'}" + (f"-{args.target}" if args.target else "")
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="roam_family_") as tmp:
        report_path = os.path.join(tmp, "report.json")
        run = watch(compare_command(family, args.probe, report_path, args.time_limit, args.target), args.timeout,
                    int(args.max_rss_gb * 2**30), os.path.join(args.out, f"{name}.log"))
        if run["stopped"] or run["returncode"] != 0 or not os.path.exists(report_path):
            with open(os.path.join(args.out, f"{name}.log"), encoding="utf-8", errors="replace") as f:
                tail = f.read().replace("\r", "\n")[-1500:]
            row = {"model": factory_ref(family, args.probe), "run": run, "last_progress": tail,
                   ("stopped" if run["stopped"] else "error"): run["stopped"] or tail}
        else:
            with open(report_path, encoding="utf-8") as f:
                row = json.load(f)
            row.update(run=run, checks=checks(row))
    final = os.path.join(args.out, f"{name}.json")
    run["command"] = run["command"].replace(report_path, os.path.relpath(final, ROOT))  # not the temporary path
    with open(final, "w", encoding="utf-8") as f:
        json.dump(row, f, indent=1)
    c = row.get("checks", {})
    print(f"{name}: {run['wall_seconds']:.0f} s, RSS {run['max_rss_bytes'] / 2**30:.2f} GiB, "
          + (f"roam/cut {c['roam_over_cut']:.4f}, roam/best bound {c['roam_over_best_bound']:.4f}, "
             f"below tvm-default {c['roam_below_tvm_default']}, "
             f"below pytorch {c['roam_below_pytorch']}" if c.get("roam_over_cut") else
             f"no figures: {row.get('stopped') or 'failed (see the log)'}"), flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("families", nargs="*", default=list(ROWS), help=f"rows to run (default all: {', '.join(ROWS)})")
    ap.add_argument("--probe", action="store_true", help="the reduced configurations of family_probes.py")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds before a row is stopped")
    ap.add_argument("--max-rss-gb", type=float, default=12.0, help="resident GiB before a row is stopped")
    ap.add_argument("--time-limit", type=float, default=10.0, help="roam-tvm compare --time-limit")
    ap.add_argument("--target", choices=["cuda", "llvm"], default=None,
                    help="compare --target (default: compare's, cuda); a named target is added to the file names")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)
    unknown = [f for f in args.families if f not in ROWS]
    if unknown:
        ap.error(f"unknown row(s) {unknown}; valid: {', '.join(ROWS)}")
    if args.timeout <= 0 or args.max_rss_gb <= 0 or args.time_limit <= 0:
        ap.error("--timeout, --max-rss-gb and --time-limit must be above 0")
    for family in args.families:
        run_row(family, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
