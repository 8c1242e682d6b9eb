"""benchmarks/gpu_truth.py, run as CI can: on llvm with a tiny model (the CUDA path needs a GPU).

The script must run unchanged once a GPU appears; here it runs its CPU fallback end to end
on the zoo's small MLP and its entries are checked against facts that do not come from the
script: the two planners plan different peaks, the counter's bytes sit within 2% of the plan,
and the loss is PyTorch's to fp32 rounding.
"""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    spec = importlib.util.spec_from_file_location("benchmarks_gpu_truth",
                                                  os.path.join(ROOT, "benchmarks", "gpu_truth.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_same_bits_sees_one_flipped_bit_and_a_dtype_change():
    gt = _load()
    a = [np.arange(6, dtype="float32").reshape(2, 3), np.array([1.5], "float32")]
    b = [x.copy() for x in a]
    assert gt._same_bits(a, b)
    b[0].view("uint32")[1, 2] ^= 1
    assert not gt._same_bits(a, b)
    assert not gt._same_bits(a, [a[0], a[1].astype("float64")])
    assert not gt._same_bits(a, a[:1])
    nan = [np.array([np.nan], "float32")]
    assert gt._same_bits(nan, [nan[0].copy()])  # bits, not values: NaN equals its own copy


@pytest.mark.slow  # the script end to end on llvm: ~15 s
def test_llvm_run_of_the_tiny_mlp(tmp_path):
    gt = _load()
    out = tmp_path / "gt.json"
    assert gt.main(["--target", "llvm", "--small", "mlp", "--repeat", "2", "--time-limit", "5",
                    "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    entry = data["entries"]["mlp@small@cpu"]
    assert entry["device"] == "cpu" and entry["target"] == "llvm" and entry["fallback"] is None
    assert entry["command"].startswith("python benchmarks/gpu_truth.py")
    assert entry["versions"]["apache-tvm"] and "platform" in entry["machine"]
    rows = entry["planners"]
    assert set(rows) == {"tvm-default", "roam"}
    assert rows["roam"]["planned_bytes"] < rows["tvm-default"]["planned_bytes"]
    for row in rows.values():
        assert row["bit_identical_to_default"] is True
        assert row["measured"]["device"] == "cpu"
        assert 0 < row["measured_bytes"] <= 1.02 * row["pool_peak_bytes"]
        assert row["step_ms"] > 0
        assert abs(row["loss_vs_pytorch"]) <= 2e-4 * max(1.0, abs(entry["pytorch"]["loss"]))
    assert entry["pytorch"]["max_memory_allocated_bytes"] is None  # no GPU: stated, not faked
    assert entry["pytorch"]["simulated_peak_bytes"] > 0


def test_auto_falls_back_to_llvm_and_says_so():
    gt = _load()
    where = gt.resolve_device("auto")
    from roam_tvm.runtime.measure import cuda_available

    if cuda_available():
        assert where["device"] == "cuda" and where["fallback"] is None
    else:
        assert where["device"] == "cpu" and "no usable CUDA GPU" in where["fallback"]
        with pytest.raises(SystemExit, match="--target cuda"):
            gt.resolve_device("cuda")


def test_unknown_model_is_refused_before_work(capsys):
    gt = _load()
    with pytest.raises(SystemExit) as err:
        gt.main(["no-such-model"])
    assert err.value.code == 2 and "unknown model" in capsys.readouterr().err
