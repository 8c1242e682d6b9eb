"""benchmarks/measure_cpu.py and the planned-against-measured table of report.md."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", os.path.join(ROOT, "benchmarks", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_measured_table_puts_measured_beside_planned():
    run = _load("run")
    entry = {"planned_bytes": 1000, "scratch_bytes": 4096, "peak_with_scratch_bytes": 5096,
             "pool_peak_bytes": 5096, "measured_bytes": 5000, "measured_over_planned": 5.0,
             "measured_over_with_scratch": 5000 / 5096, "measured_over_pool": 5000 / 5096}
    lines = run.measured_table({"entries": {"m@small": {"planners": {"roam": entry}}}})
    assert len(lines) == 3
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == ["m@small", "roam", "1,000", "4,096", "5,096", "5,096", "5,000", "+400.0%", "-1.9%", "-1.9%", "–"]


@pytest.mark.slow
def test_measure_cpu_mlp(tmp_path):
    out = tmp_path / "m.json"
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "measure_cpu.py"), "--small", "mlp",
                    "--planners", "roam", "--out", str(out)], check=True, cwd=ROOT, timeout=900)
    ent = json.loads(out.read_text())["entries"]["mlp@small"]["planners"]["roam"]
    assert ent["measured_bytes"] <= 1.02 * ent["pool_peak_bytes"]


def test_measure_cpu_rejects_unknown_model():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "measure_cpu.py"), "no-such-model"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and "unknown model" in proc.stderr and "Traceback" not in proc.stderr
