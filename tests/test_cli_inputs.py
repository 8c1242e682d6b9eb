"""Bad input to ``roam-tvm``: one clear message, exit 2, before any slow work, nothing written.
And the factory contract: loss callables and ``dynamic_shapes`` through the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from roam_tvm import cli
from roam_tvm.layout import read_csv, validate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FACTORIES = textwrap.dedent('''
    import torch
    import torch.nn.functional as F


    class LM(torch.nn.Module):
        def __init__(self, vocab=7, width=8):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, width)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, ids):
            return self.head(self.emb(ids))


    def lm_loss(out, t):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))


    def _ids(*shape, vocab=7):
        return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(0))


    def ambiguous():  # [2, 7, 7] logits, [2, 7] targets: by name, cross_entropy is refused
        return LM(), _ids(2, 7), _ids(2, 7)


    def with_callable():  # the same model, its loss said by a callable (4th element)
        return LM(), _ids(2, 7), _ids(2, 7), lm_loss


    def dict_callable():
        return {"model": LM(), "example_inputs": _ids(2, 7), "targets": _ids(2, 7), "loss": lm_loss}


    def dynamic():
        b = torch.export.Dim("b", max=6)
        return {"model": LM(vocab=11), "example_inputs": _ids(2, 5, vocab=11), "targets": _ids(2, 5, vocab=11),
                "dynamic_shapes": ({0: b}, {0: b})}


    def unbounded():
        b = torch.export.Dim("b")
        return {"model": LM(), "example_inputs": _ids(2, 5), "targets": _ids(2, 5), "dynamic_shapes": ({0: b}, {0: b})}


    def typo():
        return {"model": LM(), "example_inputs": _ids(2, 5), "targets": _ids(2, 5), "dynamic_shape": None}


    def raises():
        raise RuntimeError("weights file missing")


    def strings():
        return LM(), ("the cat sat",), _ids(2, 5)
''')


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("factories") / "my_models.py"
    path.write_text(FACTORIES)
    return str(path)


def _run(argv, capsys):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------- argument parsing: before any import
@pytest.mark.parametrize("argv, words", [
    (["compare", "--model", "mlp", "--planners", "roam", "bogus"], ["--planners", "bogus", "tvm-default"]),
    (["compare", "--model", "mlp", "--time-limit", "-1"], ["--time-limit", "positive"]),
    (["plan", "--model", "mlp", "--time-limit", "0"], ["--time-limit", "positive"]),
    (["compare", "--model", "mlp", "--batch", "0"], ["--batch", "positive integer"]),
    (["compare", "--model", "mlp", "--batch", "two"], ["--batch", "'two'"]),
    (["plan", "--model", "mlp", "--seq", "-3"], ["--seq", "positive integer"]),
    (["compare", "--model", "/nonexistent/m.py:f"], ["m.py", "does not exist"]),
    (["compare", "--model", "roam_tvm/cli.py:main", "--batch", "4"], ["--batch does not apply", "factory"]),
    (["compare", "--model", "mlp", "--precision", "fp8"], ["--precision", "fp8"]),
    (["compare", "--model", "mlp", "--precision", "bf16-amp", "--loss-scale", "64"], ["--loss-scale", "fp16-amp"]),
])
def test_bad_arguments_fail_fast_without_importing(argv, words):
    code = ("import sys, time; t = time.perf_counter(); from roam_tvm.cli import main; rc = main(sys.argv[1:]); "
            "print(rc, round(time.perf_counter() - t, 3), *(m in sys.modules for m in ('torch', 'tvm')))")
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, cwd=ROOT)
    rc, seconds, torch_loaded, tvm_loaded = p.stdout.split()
    assert rc == "2" and torch_loaded == tvm_loaded == "False", p.stdout + p.stderr
    assert float(seconds) < 1.0, seconds
    last = p.stderr.strip().splitlines()[-1]
    assert "Traceback" not in p.stderr and all(w in last for w in words), p.stderr


def test_out_inside_a_file_is_refused_before_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_step", lambda args: pytest.fail("the import ran"))
    blocker = tmp_path / "notes.txt"
    blocker.write_text("keep me")
    for out in (blocker / "plan", blocker):
        rc, _, err = _run(["plan", "--model", "mlp", "--small", "--out", str(out)], capsys)
        assert rc == 2 and "notes.txt" in err and "file" in err and "Traceback" not in err, err
    assert blocker.read_text() == "keep me" and sorted(os.listdir(tmp_path)) == ["notes.txt"]
    rc, _, err = _run(["compare", "--model", "mlp", "--json", str(tmp_path / "missing" / "r.json")], capsys)
    assert rc == 2 and "does not exist" in err
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


# ---------------------------------------------------------------- the factory
def test_factory_that_raises(models, capsys):
    rc, _, err = _run(["compare", "--model", f"{models}:raises", "--quiet"], capsys)
    assert rc == 2 and "raises()" in err and "RuntimeError: weights file missing" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    rc, _, err = _run(["compare", "--model", f"{models}:raises", "--quiet", "--debug"], capsys)
    assert rc == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("roam-tvm: error:")


def test_factory_returning_strings(models, capsys):
    rc, _, err = _run(["compare", "--model", f"{models}:strings", "--quiet"], capsys)
    assert rc == 2 and "example_inputs[0] is a str" in err and "torch.Tensor" in err and "Traceback" not in err


def test_factory_dict_with_unknown_key(models, capsys):
    rc, _, err = _run(["compare", "--model", f"{models}:typo", "--quiet"], capsys)
    assert rc == 2 and "dynamic_shape" in err and "dynamic_shapes" in err


def test_ambiguous_loss_asks_for_a_callable(models, capsys):
    rc, _, err = _run(["compare", "--model", f"{models}:ambiguous", "--quiet", "--planners", "roam"], capsys)
    assert rc == 2 and "ambiguous" in err and "callable" in err and "Traceback" not in err, err


@pytest.mark.parametrize("factory", ["with_callable", "dict_callable"])
def test_loss_callable_through_the_cli(models, factory, tmp_path, capsys):
    report = tmp_path / "r.json"
    rc, out, err = _run(["compare", "--model", f"{models}:{factory}", "--quiet", "--planners", "roam", "pytorch",
                         "--no-cut", "--time-limit", "1", "--target", "llvm", "--json", str(report)], capsys)
    assert rc == 0, err
    data = json.loads(report.read_text())
    assert data["config"]["loss"] == "lm_loss" and set(data["planners"]) == {"roam", "pytorch"}
    assert data["planners"]["roam"]["valid"]


def test_dynamic_shapes_planned_at_the_upper_bound(models, capsys):
    rc, out, err = _run(["compare", "--model", f"{models}:dynamic", "--quiet", "--planners", "roam", "--no-cut",
                         "--time-limit", "1", "--target", "llvm"], capsys)
    assert rc == 0, err
    assert "upper bounds: b=6" in err and "'input_shapes': [[6, 5]]" in out and "'dynamic_bounds': {'b': 6}" in out


def test_dynamic_dim_without_bound_is_refused(models, capsys):
    rc, _, err = _run(["compare", "--model", f"{models}:unbounded", "--quiet"], capsys)
    assert rc == 2 and "'b'" in err and "max=" in err and "Traceback" not in err, err


def test_dynamic_tiles_the_examples():
    import torch

    from roam_tvm.zoo.dynamic import expand_to_upper_bounds

    b, t = torch.export.Dim("b", max=5), torch.export.Dim("t", max=4)
    x, y = torch.arange(6).reshape(2, 3), torch.tensor([7, 8])
    (x2,), (y2,), bounds = expand_to_upper_bounds((x,), (y,), ({0: b, 1: t}, [b]), "f")
    assert bounds == {"b": 5, "t": 4} and x2.shape == (5, 4) and y2.tolist() == [7, 8, 7, 8, 7]
    assert x2[:2, :3].tolist() == x.tolist() and x2[4, 3].item() == x[0, 0].item()


# ---------------------------------------------------------------- roam-tvm layout
def test_layout_conflicting_fixed_offsets_name_the_rows(tmp_path, capsys):
    f = tmp_path / "in.csv"
    f.write_text("id,lower,upper,size,offset\nx,0,5,10,\na,0,10,50,0\nb,5,15,50,40\n")
    out = tmp_path / "out.csv"
    rc, _, err = _run(["layout", str(f), "--output", str(out)], capsys)
    assert rc == 2 and "'a' (line 3)" in err and "'b' (line 4)" in err and "overlap" in err, err
    assert not out.exists()


def test_layout_keeps_fixed_offsets(tmp_path, capsys):
    f = tmp_path / "in.csv"
    # b is fixed at 70, leaving a 20-byte gap over a that c (30 bytes) cannot use; free buffers go around
    text = "id,lower,upper,size,offset\na,0,10,50,0\nb,5,15,50,70\nc,0,20,30,\nd,12,20,40,\ne,16,30,8,\n"
    f.write_text(text)
    from roam_tvm.layout import read_csv_string, solve

    assert solve(read_csv_string(text), time_limit=1).offsets["b"] != 70  # the solver alone moves b
    out = tmp_path / "out.csv"
    rc, stdout, err = _run(["layout", str(f), "--time-limit", "1", "--output", str(out)], capsys)
    assert rc == 0, err
    solved = read_csv(str(out))
    offs = {b.id: b.offset for b in solved.buffers}
    assert offs["a"] == 0 and offs["b"] == 70 and "2 offsets kept" in stdout
    from roam_tvm.layout import Solution

    assert validate(solved, Solution.from_offsets(solved, offs)) == []


@pytest.mark.parametrize("text, words", [
    ("id,lower,size\na,0,4\n", [":1", "missing ['upper']"]),
    ("id,lower,upper,size\na,0,3,4\nb,0,3\n", [":3", "expected 4 fields"]),
    ("id,lower,upper,size\na,0,3,4.5\n", [":2", "'size'", "not an integer"]),
    ("id,lower,upper,size\na,zero,3,4\n", [":2", "'lower'", "not an integer"]),
    ("id,lower,upper,size\na,0,3,4\nb,0,3,-4\n", [":3", "negative size"]),
    ("id,lower,upper,size\na,0,3,4\nb,3,3,4\n", [":3", "upper 3 <= lower 3"]),
    ("id,lower,upper,size\na,5,3,4\n", [":2", "upper 3 <= lower 5"]),
    ("id,lower,upper,size\na,0,3,4\na,1,3,4\n", [":3", "duplicate"]),
])
def test_layout_malformed_csv(tmp_path, capsys, text, words):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    start = time.perf_counter()
    rc, _, err = _run(["layout", str(f)], capsys)
    assert rc == 2 and all(w in err for w in words) and "Traceback" not in err, err
    assert time.perf_counter() - start < 2.0


def test_an_amp_compare_says_the_pytorch_simulation_is_fp32(tmp_path):
    out = tmp_path / "r.json"
    assert cli.main(["compare", "--model", "mlp", "--precision", "bf16-amp", "--planners", "pytorch",
                 "--no-cut", "--json", str(out), "--quiet"]) == 0
    note = json.loads(out.read_text())["planners"]["pytorch"]["note"]
    assert "autocast is not simulated" in note and "bf16-amp" in note


def test_tvm_failure_while_lowering_is_one_clear_line(models, capsys, monkeypatch):
    """A valid model that TVM cannot lower (a failed C++ check in a pass): one line naming
    TVM's check and what to do, exit 1; the traceback only with --debug."""
    import tvm

    from roam_tvm.report import compare

    def fails(*args, **kwargs):
        raise tvm.error.InternalError("Traceback (most recent call last):\n  File \"x.cc\", line 1\n"
                                      "Check failed: (false) is false: Incompatible broadcast dims")

    monkeypatch.setattr(compare, "schedule_for", fails)
    argv = ["compare", "--model", f"{models}:with_callable", "--quiet", "--planners", "roam"]
    rc, _, err = _run(argv, capsys)
    assert rc == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "TVM failed while lowering" in err and "Incompatible broadcast dims" in err and "--debug" in err
    rc, _, err = _run(argv + ["--debug"], capsys)
    assert rc == 1 and "Traceback" in err and err.strip().splitlines()[-1].startswith("roam-tvm: error:")


def test_builtin_error_raised_inside_tvm_is_one_clear_line(models, capsys, monkeypatch):
    """TVM also raises plain RuntimeErrors from C++ (legalizing ``clip`` with an infinite
    bound on integers: "Cannot convert infinity to BigInt"); they are TVM's too."""
    import tvm

    from roam_tvm.report import compare

    def fails(*args, **kwargs):  # a real TVM failure: clip of int64 by -inf, legalized
        from tvm import relax
        from tvm.relax import op as R

        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType((3,), "int64"))
        with bb.function("main", [x]):
            bb.emit_func_output(bb.emit(R.clip(x, float("-inf"), 5)))
        return relax.transform.LegalizeOps()(bb.get())

    monkeypatch.setattr(compare, "schedule_for", fails)
    rc, _, err = _run(["compare", "--model", f"{models}:with_callable", "--quiet", "--planners", "roam"],
                      capsys)
    assert rc == 1 and "Traceback" not in err and "TVM failed while lowering" in err, err


def test_kernel_without_gpu_schedule_is_a_clear_error(models, capsys, monkeypatch):
    """A kernel no GPU rule can schedule: the message names it and the way out, no traceback."""
    from roam_tvm.report import compare
    from roam_tvm.runtime.schedule import UnschedulableError

    def fails(*args, **kwargs):
        raise UnschedulableError("no GPU schedule for 1 PrimFunc(s) ['scatter_thing']")

    monkeypatch.setattr(compare, "scratch_for", fails)
    rc, _, err = _run(["compare", "--model", f"{models}:with_callable", "--quiet", "--planners", "roam"],
                      capsys)
    assert rc == 1 and "Traceback" not in err, err
    assert "scatter_thing" in err and "--target llvm" in err
