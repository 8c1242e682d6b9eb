"""benchmarks/outside_probes.py: every factory of benchmarks/outside/ is a row, and the summary flags
are computed right from hand-made compare reports (no model is run)."""
from __future__ import annotations

import ast
import glob
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def probes():
    spec = importlib.util.spec_from_file_location("benchmarks_outside_probes",
                                                  os.path.join(ROOT, "benchmarks", "outside_probes.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _public_functions(path: str) -> set[str]:
    """Top-level public functions of a file, read from its syntax tree (not imported)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


def test_every_factory_is_a_row(probes):
    files = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "outside", "*.py")))
    assert files
    found = {name: os.path.basename(path) for path in files for name in _public_functions(path)}
    assert found == probes.ROWS  # each factory listed, with its file, and no row without a factory
    assert probes.factory_ref("stn") == "benchmarks/outside/layers.py:stn"


def _report(tvm, pytorch, roam, cut, valid=True):
    return {"ops": 100, "planners": {"tvm-default": {"peak_bytes": tvm, "valid": True},
                                     "pytorch": {"peak_bytes": pytorch, "valid": True},
                                     "roam": {"peak_bytes": roam, "valid": valid, "plan_seconds": 1.5}},
            "lower_bounds": {"cut": cut, "pair": cut, "order": tvm}}


def test_summary_row_good_report(probes):
    row = probes.summary_row("dlrm", _report(tvm=1000, pytorch=900, roam=510, cut=500))
    assert row["file"] == "benchmarks/outside/embeddings.py"
    assert row["roam_over_cut"] == pytest.approx(1.02)
    assert row["below_tvm_default"] is True and row["below_pytorch"] is True
    assert row["valid"] is True and row["error"] is None and row["meets_bar"] is True
    assert (row["ops"], row["plan_seconds"], row["pair"]) == (100, 1.5, 500)
    at = probes.summary_row("dlrm", _report(tvm=510, pytorch=510, roam=510, cut=500))  # "at or below"
    assert at["below_tvm_default"] is True and at["below_pytorch"] is True and at["meets_bar"] is True


def test_summary_row_best_bound(probes):
    """The tightest of cut, pair and set: roam at it is a proved optimum (the bar stays on cut)."""
    report = _report(tvm=1000, pytorch=900, roam=530, cut=500)
    report["lower_bounds"]["set"] = 530
    row = probes.summary_row("dlrm", report)
    assert row["best_bound"] == 530 and row["roam_over_best"] == 1.0
    assert row["roam_over_cut"] == pytest.approx(1.06) and row["meets_bar"] is False
    old = probes.summary_row("dlrm", _report(tvm=1000, pytorch=900, roam=530, cut=500))  # no "set" key
    assert old["set"] is None and old["best_bound"] == 500


def test_summary_row_bad_reports(probes):
    over = probes.summary_row("stn", _report(tvm=1000, pytorch=900, roam=1100, cut=1000))
    assert over["roam_over_cut"] == pytest.approx(1.1)
    assert over["below_tvm_default"] is False and over["below_pytorch"] is False and over["meets_bar"] is False
    loose = probes.summary_row("stn", _report(tvm=2000, pytorch=2000, roam=1021, cut=1000))  # 2.1% over the cut
    assert loose["below_tvm_default"] is True and loose["meets_bar"] is False
    invalid = probes.summary_row("stn", _report(tvm=1000, pytorch=900, roam=500, cut=500, valid=False))
    assert invalid["valid"] is False and invalid["meets_bar"] is False
    broken = _report(tvm=1000, pytorch=900, roam=500, cut=500)
    del broken["planners"]["roam"]
    broken["lower_bounds"]["cut"] = 0
    row = probes.summary_row("stn", broken)
    assert row["roam"] is None and row["cut"] is None and row["roam_over_cut"] is None
    assert row["below_tvm_default"] is None and row["meets_bar"] is False
    assert "roam peak_bytes" in row["error"] and "lower_bounds.cut" in row["error"]
    failed = probes.summary_row("stn", None, "still running after 601 s (> --timeout)")
    assert failed["error"].startswith("still running") and failed["meets_bar"] is False


def test_summary_files_from_row_files(probes, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    good = _report(tvm=1000, pytorch=900, roam=510, cut=500)
    good.update(versions={"torch": "x"}, machine={"cpus": 2}, row=probes.summary_row("ncf", good))
    (runs / "ncf.json").write_text(json.dumps(good))
    bad = {"error": "boom", "row": probes.summary_row("stn", None, "boom")}
    (runs / "stn.json").write_text(json.dumps(bad))
    rows = probes.write_summary("cmd", str(runs), str(tmp_path / "s.json"), str(tmp_path / "t.md"))
    assert [r["model"] for r in rows] == ["ncf", "stn"]  # the table's order, not the files'
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["versions"] == {"torch": "x"} and summary["rows"][0]["meets_bar"] is True
    table = (tmp_path / "t.md").read_text()
    assert "| ncf | embeddings.py | 100 | 1,000 | 900 | 510 | 500 | 1.0200 | 1.0200 | 0.510 | 0.567 |" in table
    assert "no: boom" in table


def test_summary_of_one_probe_file_runs_nothing(probes, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("ncf", "stn"):  # embeddings.py's and layers.py's
        report = _report(tvm=1000, pytorch=900, roam=510, cut=500)
        report.update(row=probes.summary_row(name, report))
        (runs / f"{name}.json").write_text(json.dumps(report))
    args = ["--file", "embeddings.py", "--summary-only", "--out", str(runs), "--summary", str(tmp_path / "s.json"),
            "--table", str(tmp_path / "t.md")]
    assert probes.main(args) == 0
    assert [r["model"] for r in json.loads((tmp_path / "s.json").read_text())["rows"]] == ["ncf"]
    with pytest.raises(SystemExit):
        probes.main(["--file", "no_such_file.py", "--summary-only"])


def test_variant_rows_add_their_flags(probes):
    """A variant row runs its factory's compare with its extra flags (AMP rows: ``--precision``)."""
    assert set(probes.VARIANTS).isdisjoint(probes.ROWS)
    for name, (factory, flags) in probes.VARIANTS.items():
        assert factory in probes.ROWS
        cmd = probes.compare_command(name, "out.json")
        assert cmd[cmd.index("--model") + 1] == f"benchmarks/outside/{probes.ROWS[factory]}:{factory}"
        assert " ".join(flags) in " ".join(cmd)
    row = probes.summary_row("t5_small_bf16amp", _report(tvm=1000, pytorch=900, roam=510, cut=500))
    assert row["file"] == "benchmarks/outside/kinds_more.py" and row["model"] == "t5_small_bf16amp"
