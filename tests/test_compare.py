"""`roam-tvm compare`: one simulator for every planner, consistent figures, clear errors."""
import json
import subprocess
import sys
import textwrap

import pytest

from roam_tvm.cli import main


def run_cli(*args, expect=0):
    proc = subprocess.run([sys.executable, "-m", "roam_tvm.cli", *args], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def mlp_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "mlp.json"
    run_cli("compare", "--model", "mlp", "--small", "--target", "llvm", "--quiet", "--time-limit", "2",
            "--json", str(out))
    return json.loads(out.read_text())


def test_report_schema(mlp_report):
    for key in ("model", "config", "ops", "tensors", "lower_bounds", "planners", "versions", "machine"):
        assert key in mlp_report
    assert set(mlp_report["lower_bounds"]) == {"order", "any", "cut", "pair"}
    for name in ("tvm-default", "pytorch", "roam-order-only", "roam-layout-only", "roam"):
        p = mlp_report["planners"][name]
        assert set(p) >= {"peak_bytes", "order_bound_bytes", "intermediate_bytes", "plan_seconds", "valid"}
        assert p["valid"]


def test_figures_hold_together(mlp_report):
    lb = mlp_report["lower_bounds"]
    planners = mlp_report["planners"]
    default = planners["tvm-default"]
    assert lb["any"] <= lb["cut"] <= lb["pair"] <= lb["order"] <= default["peak_bytes"]
    assert default["order_bound_bytes"] == lb["order"]
    for name in ("roam", "roam-order-only", "roam-layout-only"):
        assert lb["pair"] <= planners[name]["order_bound_bytes"] <= planners[name]["peak_bytes"]
        assert planners[name]["peak_bytes"] <= default["peak_bytes"]
    assert planners["pytorch"]["method"] in ("simulated", "measured")


def test_user_factory(tmp_path):
    f = tmp_path / "mymodel.py"
    f.write_text(textwrap.dedent("""
        import torch
        def factory():
            torch.manual_seed(0)
            m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
            return m, (torch.randn(2, 8),), (torch.randint(0, 4, (2,)),)
    """))
    proc = run_cli("compare", "--model", f"{f}:factory", "--target", "llvm", "--quiet",
                   "--planners", "tvm-default", "roam")
    assert "roam" in proc.stdout and "bound:cut" in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["compare", "--model", "no-such-model"], "unknown model"),
    (["compare", "--model", "/nonexistent/file.py:factory"], "file.py"),
])
def test_bad_input_is_one_clear_line(args, message):
    proc = run_cli(*args, expect=2)
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_planner_is_rejected(capsys):
    with pytest.raises(SystemExit) if False else pytest.raises(ValueError, match="unknown planner"):
        from roam_tvm.report.compare import compare_step

        compare_step(None, planners=["nope"])


def test_failed_pytorch_baseline_keeps_the_plans():
    """PyTorch's own step failing (a model its simulation cannot run) leaves a ``pytorch`` row
    with no figure and the reason; the planners' rows and the bounds still report."""
    from roam_tvm.frontend import SGD, from_torch
    from roam_tvm.report.compare import compare_step, format_table

    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    ts = from_torch(model, (torch.randn(2, 4),), (torch.tensor([0, 2]),), optimizer=SGD(lr=0.1), quiet=True)

    def broken():
        raise RuntimeError("Expected all tensors to be on the same device\nmore")

    report = compare_step(ts, ["tvm-default", "roam", "pytorch"], target="llvm", pytorch=broken,
                          progress=False)
    row = report["planners"]["pytorch"]
    assert row["peak_bytes"] is None and row["valid"] is None and row["method"] == "failed"
    assert "RuntimeError: Expected all tensors to be on the same device" in row["note"]
    assert report["planners"]["roam"]["valid"] and report["lower_bounds"]["cut"] > 0
    assert "failed" in format_table(report)


def test_table_says_the_order_bound_is_for_the_program_order_only():
    # `order` is the given order's live bytes: a better order goes below it, so it must not read
    # as a bound on every plan the way `cut` does.
    from roam_tvm.report.compare import format_table

    mib = 2**20
    report = {"planners": {"roam": {"peak_bytes": 2 * mib, "plan_seconds": 1.0, "valid": True}},
              "lower_bounds": {"order": 3 * mib, "cut": 2 * mib}}
    rows = {line.split()[0]: line for line in format_table(report).splitlines()}
    assert rows["bound:order"].endswith("least for the program order")
    assert rows["bound:cut"].endswith("least for any order")
