"""benchmarks/remat.py on small zoo models: 20 budgets each, monotone, exact, above the LP bound."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow  # ~30 s; the budget pipeline has its own fast tests (test_remat_*)
def test_twenty_budgets_on_small_zoo_models(tmp_path):
    out = tmp_path / "remat.json"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "remat.py"), "--models", "cnn",
                    "--small", "--target", "llvm", "--order-time-limit", "0.5", "--out", str(out)],
                   check=True, env=env, capture_output=True)
    rep = json.loads(out.read_text())
    assert [m["model"] for m in rep["models"]] == ["cnn"]
    for m in rep["models"]:
        rows = m["budgets"]
        assert len(rows) == 20
        # Recounted here, not read from the flags the benchmark wrote.
        for a, b in zip(rows, rows[1:]):
            assert a["budget_bytes"] <= b["budget_bytes"]
            assert b["overhead_time"] <= a["overhead_time"] and b["overhead_flops"] <= a["overhead_flops"]
        assert m["monotone"] and m["peaks_fit"]
        for r in rows:
            assert r["peak_bytes"] <= r["budget_bytes"]
            assert r["lp_bound_time"] is not None and r["lp_bound_time"] <= r["overhead_time"] + 1e-9
        assert rows[-1]["overhead_time"] == 0.0 and rows[0]["peak_bytes"] == m["floor_bytes"]
        assert m["baselines"]["pytorch"]["peak_bytes"] > 0
    assert "resnet" in rep["models"][0]["baselines"]["checkpoint"]["error"]  # no stages in the small CNN


def test_checkpointing_baseline_keeps_stage_inputs_and_recomputes_the_forward():
    from roam_tvm.report.checkpointed import checkpointed_spec, eager_step_time
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.zoo import get_model

    spec = get_model("resnet18", small=True, batch=4)
    ck, what = checkpointed_spec(spec)
    assert what == "4 ResNet stages"
    assert simulate_eager_step(ck)["peak_bytes"] < simulate_eager_step(spec)["peak_bytes"]
    plain, re = eager_step_time(spec), eager_step_time(ck)
    # The forward is about a third of the step's FLOPs; recomputing it once adds about that much.
    assert 0.2 < re["flops"] / plain["flops"] - 1 < 0.5
    assert re["ops"] > plain["ops"] and re["seconds"] > plain["seconds"]
