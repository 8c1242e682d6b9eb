"""roam-tvm plan: files written by write_plan, and the reusable plots."""
import json
import os

import pytest

from roam_tvm.layout import Buffer, read_csv, solution_from_problem, validate


def _png_ok(path):
    from matplotlib.image import imread

    assert os.path.getsize(path) > 1000
    img = imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory):
    pytest.importorskip("torch")
    from roam_tvm.frontend._demo import demo_mlp
    from roam_tvm.report.plan import write_plan

    out = tmp_path_factory.mktemp("plan")
    ts = demo_mlp()[0]
    paths = write_plan(ts, str(out), target="llvm", time_limit=2.0, progress=False)
    return out, paths


def test_write_plan_files(plan_dir):
    out, paths = plan_dir
    names = {os.path.basename(p) for p in paths}
    assert names == {"plan.json", "plan.csv", "timeline.png", "timeline-tvm-default.png"}
    for p in paths:
        assert os.path.exists(p) and os.path.getsize(p) > 0
    _png_ok(str(out / "timeline.png"))
    _png_ok(str(out / "timeline-tvm-default.png"))


def test_plan_json_matches_csv(plan_dir):
    out, _ = plan_dir
    plan = json.loads((out / "plan.json").read_text())
    for key in ("function", "target", "arena_bytes", "lower_bound_bytes", "peak_bytes", "order", "tensors"):
        assert key in plan
    assert plan["target"] == "llvm" and plan["function"] == "train_step"
    assert set(plan["peak_bytes"]) == {"roam", "tvm-default"}
    assert plan["peak_bytes"]["roam"] <= plan["peak_bytes"]["tvm-default"]
    assert plan["lower_bound_bytes"] <= plan["arena_bytes"]
    assert plan["order"] is not None and "summary" in plan["order"]
    problem = read_csv(str(out / "plan.csv"), alignment=plan["alignment"])
    sol = solution_from_problem(problem)
    assert validate(problem, sol) == []
    assert sol.height <= plan["arena_bytes"]
    assert problem.lower_bound() == plan["lower_bound_bytes"]
    by_id = {b.id: b for b in problem.buffers}
    assert len(by_id) == len(plan["tensors"]) > 0
    for t in plan["tensors"]:
        b = by_id[str(t["id"])]
        assert (b.lower, b.upper - 1, b.offset) == (t["first"], t["last"], t["offset"])
        assert t["size"] <= b.size == t["reserved"]
        assert set(t) >= {"id", "name", "size", "first", "last", "offset"}


def test_plan_rejects_invalid_arena():
    from roam_tvm.passes.records import LayoutRecord
    from roam_tvm.report.plan import plan_problem

    rec = LayoutRecord("f", alignment=64, offsets={1: 0, 2: 0}, lifetimes={1: (0, 2), 2: (2, 3)},
                       sizes={1: 100, 2: 10}, names={1: "a", 2: "b"})
    problem, sol = plan_problem(rec)
    assert [b.size for b in problem.buffers] == [128, 64]
    assert validate(problem, sol)  # both live at step 2, same offset


def _report():
    return {"model": "synthetic", "config": {"batch": 4},
            "planners": {"tvm-default": {"peak_bytes": 300 << 20, "method": "planned"},
                         "pytorch": {"peak_bytes": 280 << 20, "method": "simulated"},
                         "roam-order-only": {"peak_bytes": 250 << 20},
                         "roam": {"peak_bytes": 210 << 20, "method": "planned"}},
            "lower_bounds": {"order": 240 << 20, "any": 120 << 20, "cut": 200 << 20},
            "always_live_bytes": 100 << 20}


def test_plot_planner_bars(tmp_path):
    from roam_tvm.report.plots import plot_planner_bars

    p = plot_planner_bars(_report(), str(tmp_path / "sub" / "bars.png"))
    _png_ok(p)


def test_plot_lines(tmp_path):
    from roam_tvm.report.plots import plot_lines

    p = plot_lines([1, 2, 4, 8], {"roam": [1, 2, 3, 4], "tvm-default": [2, None, 5, 9]}, str(tmp_path / "l.png"),
                   "batch", "peak (MiB)", title="t", logx=True)
    _png_ok(p)
    with pytest.raises(ValueError):
        plot_lines([1, 2], {"a": [1]}, str(tmp_path / "bad.png"), "x", "y")


def test_plot_timeline(tmp_path):
    import matplotlib.pyplot as plt

    from roam_tvm.report.plots import human_bytes, plot_timeline, save

    bufs = [Buffer("a", 0, 3, 3 << 20), Buffer("b", 2, 6, 1 << 20), Buffer("c", 4, 8, 2 << 20),
            Buffer("dead", 5, 5, 1 << 20)]
    offs = {"a": 0, "b": 3 << 20, "c": 0, "dead": 0}
    fig, ax = plt.subplots()
    info = plot_timeline(ax, bufs, offs, "synthetic", peak_step=2, lower_bound=4 << 20, label_top=3,
                         extra=[(Buffer("out", 6, 8, 1 << 20), 4 << 20)])
    assert info["unit"] == "MiB" and info["height"] == 5 << 20
    assert ax.get_ylabel() == "offset (MiB)"
    _png_ok(save(fig, str(tmp_path / "t.png")))
    assert human_bytes(512) == "512 B" and human_bytes(10 << 10) == "10.00 KiB"
    fig, ax = plt.subplots()  # empty layouts draw too
    plot_timeline(ax, [], {}, "empty")
    _png_ok(save(fig, str(tmp_path / "e.png")))
