"""benchmarks/families.py: the row checks, and the watchdog that stops a row (no planning here)."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    path = os.path.join(ROOT, "benchmarks", "families.py")
    spec = importlib.util.spec_from_file_location("benchmarks_families", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _report(roam, cut, default, torch):
    return {"planners": {"roam": {"peak_bytes": roam}, "tvm-default": {"peak_bytes": default},
                         "pytorch": {"peak_bytes": torch, "method": "simulated"}},
            "lower_bounds": {"cut": cut}}


def test_checks_compare_roam_with_cut_default_and_pytorch():
    fam = _load()
    good = fam.checks(_report(1010, 1000, 1200, 1100))
    assert good["roam_over_cut"] == pytest.approx(1.01) and good["roam_within_1pct_of_cut"] is True
    assert good["roam_below_tvm_default"] is True and good["roam_below_pytorch"] is True
    bad = fam.checks(_report(1020, 1000, 1020, 1000))
    assert bad["roam_within_1pct_of_cut"] is False
    assert bad["roam_below_tvm_default"] is False and bad["roam_below_pytorch"] is False
    missing = fam.checks({"planners": {"roam": {"peak_bytes": 5}}, "lower_bounds": {}})
    assert missing["roam_over_cut"] is None and missing["roam_below_pytorch"] is None


def test_the_llama_row_is_bf16_amp_and_names_the_realistic_factory(tmp_path):
    fam = _load()
    cmd = fam.compare_command("llama", False, str(tmp_path / "r.json"), 10.0)
    assert "roam_tvm/zoo/families.py:llama_realistic" in cmd and cmd[cmd.index("--precision") + 1] == "bf16-amp"
    assert cmd[cmd.index("--planners") + 1:cmd.index("--planners") + 4] == ["tvm-default", "pytorch", "roam"]
    assert "--precision" not in fam.compare_command("t5", False, "x", 10.0)
    assert "benchmarks/family_probes.py:moe_probe" in fam.compare_command("moe", True, "x", 10.0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_watch_stops_a_row_past_its_timeout(tmp_path):
    fam = _load()
    run = fam.watch([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1.5, max_rss=2**40,
                    log_path=str(tmp_path / "log"))
    assert run["stopped"] and "--timeout" in run["stopped"] and run["wall_seconds"] < 30
    assert run["max_rss_bytes"] > 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_watch_stops_a_row_past_its_memory():
    fam = _load()
    grow = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(60)"
    run = fam.watch([sys.executable, "-c", grow], timeout=50, max_rss=100 * 2**20, log_path=os.devnull)
    assert run["stopped"] and "--max-rss-gb" in run["stopped"] and run["max_rss_bytes"] > 100 * 2**20


def test_unknown_row_is_refused(capsys):
    fam = _load()
    with pytest.raises(SystemExit) as err:
        fam.main(["gpt5"])
    assert err.value.code == 2 and "unknown row" in capsys.readouterr().err
