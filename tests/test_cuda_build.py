"""The CUDA build of `train_step` compiles (nvcc) and exports, under both planners, for the zoo.

No GPU is needed: TVM builds and exports for CUDA without a driver, and nvcc
compiles the kernels it generated. Running them needs a GPU (tests marked `cuda`
in test_runtime_measure.py). The default run covers three models of different
kinds; `--runslow` covers every zoo model.
"""
import pytest

from roam_tvm.cli import optimizer_from_config
from roam_tvm.frontend import from_torch
from roam_tvm.runtime import build, compile_cuda_kernels, cuda_target, export, nvcc_path
from roam_tvm.zoo import MODELS, get_model

FAST = ["cnn", "gpt2-small"]  # a CNN (pooling, batch norm) and a transformer


def _build_and_compile(name, tmp_path, planner_on):
    spec = get_model(name, small=True)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer))
    exe = build(ts.mod, cuda_target(), order=planner_on, layout=planner_on,
                **({"order_time_limit": 2.0} if planner_on else {}))
    path = export(exe, tmp_path / f"{name}-{'roam' if planner_on else 'default'}.so")
    assert (tmp_path / path).stat().st_size > 0
    if nvcc_path() is None:
        pytest.skip("nvcc not found: kernels were generated but not compiled")
    res = compile_cuda_kernels(exe)
    assert res.kernels > 0 and len(res.cubin) > 0


@pytest.mark.parametrize("name", FAST)
def test_cuda_build_roam(name, tmp_path):
    _build_and_compile(name, tmp_path, planner_on=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MODELS if n not in FAST])
@pytest.mark.parametrize("planner_on", [False, True], ids=["tvm-default", "roam"])
def test_cuda_build_whole_zoo(name, planner_on, tmp_path):
    _build_and_compile(name, tmp_path, planner_on)
