"""benchmarks/run.py rebuilds baseline.json, report.md, the plots and the README's results section."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")


def _load_run():
    spec = importlib.util.spec_from_file_location("benchmarks_run", RUN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _between(text, start, end):
    assert text.count(start) == 1 and text.count(end) == 1, "markers must appear exactly once"
    return text.split(start, 1)[1].split(end, 1)[0]


def test_update_readme_adds_then_replaces_section(tmp_path):
    run = _load_run()
    readme = tmp_path / "README.md"
    readme.write_text("# project\n\nintro\n")
    run.update_readme(str(readme), "| a | b |")
    text = readme.read_text()
    assert text.startswith("# project\n\nintro\n") and "## Results" in text
    assert _between(text, run.START, run.END).strip() == "| a | b |"
    run.update_readme(str(readme), "| c | d |")
    text2 = readme.read_text()
    assert _between(text2, run.START, run.END).strip() == "| c | d |"
    assert text2.count("## Results") == 1 and "| a | b |" not in text2


@pytest.mark.slow  # a real benchmark run: ~15 s
def test_run_quick_mlp_rebuilds_readme_table(tmp_path):
    run = _load_run()
    out = tmp_path / "results"
    readme = tmp_path / "README.md"
    original = open(os.path.join(ROOT, "README.md")).read()
    # a README copy whose results section holds a stale, hand-typed table
    if run.START in original:
        head, rest = original.split(run.START, 1)
        tail = rest.split(run.END, 1)[1]
    else:
        head, tail = original + "\n## Results\n\n", "\n"
    readme.write_text(head + run.START + "\n| stale | 1 |\n" + run.END + tail)

    proc = subprocess.run([sys.executable, RUN, "--quick", "--models", "mlp", "--out", str(out),
                           "--readme", str(readme), "--target", "llvm", "--time-limit", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    zoo = json.loads((out / "baseline.json").read_text())
    assert zoo["mode"] == "quick" and zoo["command"].startswith("python benchmarks/run.py")
    assert zoo["versions"]["apache-tvm"] and "cpus" in zoo["machine"]
    mlp = zoo["entries"]["mlp"]
    assert "error" not in mlp, mlp
    for planner in ("tvm-default", "roam-order-only", "roam-layout-only", "roam", "pytorch"):
        assert mlp["planners"][planner]["peak_bytes"] > 0
    assert mlp["planners"]["roam"]["peak_bytes"] <= mlp["planners"]["tvm-default"]["peak_bytes"]
    assert mlp["command"].startswith("python -m roam_tvm compare --model mlp")

    report = (out / "report.md").read_text()
    assert "| mlp |" in report and "27,639" in report and "19,243" in report
    for png in ("zoo_peaks.png", "zoo_plan_seconds.png"):
        assert (out / png).stat().st_size > 1000

    text = readme.read_text()
    section = _between(text, run.START, run.END)
    assert "stale" not in section
    row = next(line for line in section.splitlines() if line.startswith("| mlp |"))
    d = mlp["planners"]["tvm-default"]["peak_bytes"] / 2**20
    r = mlp["planners"]["roam"]["peak_bytes"] / 2**20
    assert run.mib(d * 2**20) in row and run.mib(r * 2**20) in row
    assert f"{100 * (r - d) / d:+.1f}%" in row
    # everything outside the markers is untouched
    assert text.split(run.START)[0] == head and text.split(run.END)[1] == tail

    # --report-only rebuilds from baseline.json without re-running and replaces the section in place
    proc = subprocess.run([sys.executable, RUN, "--report-only", "--out", str(out), "--readme", str(readme)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = readme.read_text()
    assert again.count(run.START) == 1 and "| mlp |" in _between(again, run.START, run.END)


def _report(name, cfg, default, roam, pytorch):
    planners = {"tvm-default": {"peak_bytes": default}, "roam": {"peak_bytes": roam},
                "pytorch": {"peak_bytes": pytorch, "method": "simulated"}}
    return {"model": name, "config": {"name": name, **cfg}, "ops": 10, "planners": planners}


def test_tables_list_each_configuration_once_and_average_over_distinct_ones():
    run = _load_run()
    tables = sys.modules["zoo_tables"]
    net = {"batch": 2, "seq": 16, "small": True, "layers": 2, "width": 64, "optimizer": "adamw"}
    entries = {
        "gpt2-small": _report("gpt2-small", net, 100, 80, 90),       # -20% vs default
        "gpt2-medium": _report("gpt2-medium", net, 100, 80, 90),     # the same network
        "mlp": _report("mlp", {"batch": 64, "optimizer": "sgd"}, 100, 40, 50),  # -60%
        "mlp@batch64": _report("mlp", {"batch": 64, "optimizer": "sgd"}, 100, 40, 50),
        "gpt2-small@seq128": _report("gpt2-small", {**net, "seq": 128, "small": False}, 100, 90, 95),  # -10%
    }
    groups = tables.distinct_configurations(entries)
    assert list(groups) == ["gpt2-small / gpt2-medium", "mlp / mlp@batch64", "gpt2-small@seq128"]
    s = run.summary(entries)
    assert s["models"] == 3 and abs(s["mean_vs_default"] - (-30.0)) < 1e-9
    rows = [ln for ln in run.short_table(entries)[2:]]
    assert len(rows) == 3 and rows[0].startswith("| gpt2-small / gpt2-medium |")


def test_paper_rows_give_both_accountings():
    run = _load_run()
    tables = sys.modules["zoo_tables"]
    mib = 2**20
    rep = _report("gpt2-xl-paper", {"batch": 2, "seq": 1024, "small": False, "optimizer": "adam"},
                  40000 * mib, 30000 * mib, 42000 * mib)
    rows = tables.paper_rows({"x": rep}, "default", lambda r: 10000 * mib)
    batch2 = next(r for r in rows if r.startswith("| 2 |")).split(" | ")
    # our pytorch 42,000 - 10,000 state = 32,000 as the paper counts; roam 30,000 - 10,000 = 20,000
    assert batch2[5:10] == ["10,000", "32,000", f"{100 * (32000 - 34215) / 34215:+.1f}%", "20,000",
                            f"{100 * (20000 - 32468) / 32468:+.1f}%"]
    assert "not run" in next(r for r in rows if r.startswith("| 1 |"))
