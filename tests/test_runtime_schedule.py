"""robust_schedule + CUDA build without a GPU: stock dlight fails, ours builds, nvcc compiles."""

from __future__ import annotations

import importlib
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("torch")

from roam_tvm.runtime import build, compile_cuda_kernels, cuda_source, cuda_target, export, nvcc_path  # noqa: E402
rp = importlib.import_module("roam_tvm.runtime.pipeline")  # the module (roam_tvm.runtime.pipeline is the factory)
from roam_tvm.runtime._testing import cnn_training_module  # noqa: E402
from roam_tvm.runtime.build import kernel_names  # noqa: E402
from roam_tvm.runtime.schedule import (  # noqa: E402
    RULE_ATTR,
    check_lowers,
    default_rules,
    robust_schedule,
    stock_dlight_schedule,
)


@pytest.fixture(scope="module")
def cnn():
    return cnn_training_module()


@pytest.fixture(scope="module")
def target():
    return cuda_target()


@pytest.fixture(scope="module")
def legalized(cnn, target):
    mod, _ = cnn
    with target:
        return tvm.transform.Sequential(rp.legalize_passes(target, schedule=None))(mod)


def _prim_funcs(mod):
    return {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}


def _rule(name):
    return dict(default_rules())[name]


def test_cuda_target_is_h100(target):
    assert target.kind.name == "cuda"
    assert str(target.attrs["arch"]) == "sm_90a"
    assert target.host is not None and target.host.kind.name == "llvm"


def test_stock_dlight_fails_on_training_cnn(legalized, target):
    """Reproduce both failure modes of TVM's stock schedule (tvm-notes, Building)."""
    funcs = _prim_funcs(legalized)
    # 1. a rule raises: dl.gpu.Reduction on the loss' `mean` (stock takes it first)
    with pytest.raises(Exception):
        _rule("Reduction").apply(funcs["mean"], target, False)
    with pytest.raises(Exception):
        with target:
            stock_dlight_schedule()(legalized)
    # 2. a rule schedules but the result does not lower: GeneralReduction on
    #    max_pool2d_backward (the first rule that accepts it)
    mpb = next(f for n, f in funcs.items() if "max_pool2d_backward" in n)
    for name in ("Matmul", "GEMV", "Reduction"):
        assert _rule(name).apply(mpb, target, False) is None
    sch = _rule("GeneralReduction").apply(mpb, target, False)
    assert sch is not None
    sch = sch[0] if isinstance(sch, list) else sch
    err = check_lowers(sch.mod["main"], target)
    assert err is not None, "GeneralReduction on max_pool2d_backward lowered: TVM fixed it?"


def test_robust_schedule_picks_working_rules(legalized, target):
    with target:
        out = robust_schedule(target)(legalized)
    report = robust_schedule.last_report
    funcs = _prim_funcs(out)
    assert set(report.rule_of) == set(funcs)
    assert "none" not in report.rule_of.values()
    assert report.rule_of["mean"] != "Reduction"
    mpb = next(n for n in funcs if "max_pool2d_backward" in n)
    assert report.rule_of[mpb] not in ("GeneralReduction", "none")
    assert any("does not lower" in msg for msg in report.failures[mpb])
    for name, func in funcs.items():
        assert str(func.attrs[RULE_ATTR]) == report.rule_of[name]
        assert bool(func.attrs["tirx.is_scheduled"])
        assert check_lowers(func, target) is None, name
    # the input module is not mutated
    assert all(RULE_ATTR not in (f.attrs or {}) for f in _prim_funcs(legalized).values())


def test_simple_fallback_schedules_everything(legalized, target):
    """With no dlight rule at all, the plain thread-binding fallback lowers every kernel."""
    with target:
        out = robust_schedule(target, rules=[])(legalized)
    rules = set(robust_schedule.last_report.rule_of.values())
    assert rules <= {"simple", "simple-noinline"}, robust_schedule.last_report.failures
    for name, func in _prim_funcs(out).items():
        assert check_lowers(func, target) is None, name


def test_unscheduled_gpu_func_is_rejected(legalized, target):
    """TVM silently builds an unbound PrimFunc as host code; check_lowers must catch it."""
    err = check_lowers(_prim_funcs(legalized)["relu"], target)
    assert err is not None and "host code would access GPU buffers" in err


def test_cuda_build_export_and_nvcc(cnn, target, tmp_path):
    mod, _ = cnn
    exe = build(mod, target, order=False, layout=False)
    src = cuda_source(exe)
    names = kernel_names(src)
    assert len(names) >= len(robust_schedule.last_report.rule_of)
    path = export(exe, tmp_path / "cnn_cuda.so")
    assert (tmp_path / "cnn_cuda.so").stat().st_size > 0 and path.endswith(".so")
    if nvcc_path() is None:
        pytest.skip("nvcc not found: CUDA source generated but not compiled")
    res = compile_cuda_kernels(exe, arch="sm_90a")
    assert res.cubin[:4] == b"\x7fELF"
    assert res.kernels == len(names)


def test_inplace_update_gets_thread_binding(target):
    """R.call_tir_inplace optimizer kernels: every dlight rule and the checked fallback
    fail (the block reads its own output); the in-place fallback must schedule them."""
    frontend = pytest.importorskip("roam_tvm.frontend")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Linear(8, 4)
    ts = frontend.from_torch(net, (torch.randn(2, 8),), (torch.randn(2, 4),), loss="mse",
                             optimizer=frontend.SGD(lr=0.1))
    with target:
        legal = tvm.transform.Sequential(rp.legalize_passes(target, schedule=None))(ts.mod)
        robust_schedule(target)(legal)
    report = robust_schedule.last_report
    assert "none" not in report.rule_of.values(), report.failures
    updates = [n for n in report.rule_of if "update" in n]
    assert updates and all(report.rule_of[n] == "simple-inplace" for n in updates), report.rule_of


@pytest.mark.slow
def test_frontend_train_step_roam_cuda_nvcc(target):
    """Full roam pipeline (RoamOrder + RoamLayout) for CUDA on a frontend train_step, nvcc."""
    frontend = pytest.importorskip("roam_tvm.frontend")
    torch = pytest.importorskip("torch")
    if nvcc_path() is None:
        pytest.skip("nvcc not found")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.l = torch.nn.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            return self.l(torch.nn.functional.max_pool2d(torch.relu(self.c(x)), 2).flatten(1))

    torch.manual_seed(0)
    ts = frontend.from_torch(Net(), (torch.randn(4, 3, 8, 8),), (torch.randint(0, 10, (4,)),),
                             loss="cross_entropy", optimizer=frontend.SGD(lr=0.1))
    exe = build(ts.mod, target, order=True, layout=True)
    assert "none" not in robust_schedule.last_report.rule_of.values()
    res = compile_cuda_kernels(exe)
    assert res.kernels >= len(robust_schedule.last_report.rule_of)
