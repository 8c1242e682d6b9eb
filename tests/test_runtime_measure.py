"""StepRunner on CPU; CUDA paths skip (or raise clearly) without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("torch")

from tvm import relax  # noqa: E402

from roam_tvm.runtime import build, cuda_target, export  # noqa: E402
from roam_tvm.runtime._testing import mlp_training_module  # noqa: E402
from roam_tvm.runtime.measure import (  # noqa: E402
    CudaUnavailable,
    StepRunner,
    cuda_available,
    cuda_mem_info,
    inputs_from_signature,
)

CUDA = cuda_available()


@pytest.fixture(scope="module")
def mlp():
    return mlp_training_module()


@pytest.fixture(scope="module")
def mlp_llvm(mlp):
    mod, _ = mlp
    return build(mod, "llvm", order=False, layout=False)


def test_step_runner_cpu(mlp, mlp_llvm, tmp_path):
    mod, inputs = mlp
    runner = StepRunner(mlp_llvm, "cpu", func="main_adjoint", inputs=inputs)
    loss, grads = runner.run()
    ref = relax.VirtualMachine(mlp_llvm, tvm.cpu())["main_adjoint"](
        *[tvm.runtime.tensor(a) for a in inputs]
    )
    assert np.array_equal(loss.numpy(), ref[0].numpy())
    m = runner.measure(repeat=3)
    assert len(m.times_s) == 3 and m.median_s > 0 and m.peak_step_bytes is None
    # an exported library loads by path
    path = export(mlp_llvm, tmp_path / "mlp.so")
    again = StepRunner(path, "cpu", func="main_adjoint", inputs=inputs)
    assert np.array_equal(again.run()[0].numpy(), loss.numpy())
    assert [a.shape for a in inputs_from_signature(mod["main_adjoint"])] == [a.shape for a in inputs]


def test_cuda_unavailable_is_explained():
    if CUDA:
        pytest.skip("a GPU is present")
    assert not CUDA and CUDA.reason
    with pytest.raises(CudaUnavailable, match="CUDA"):
        cuda_mem_info()
    with pytest.raises(CudaUnavailable):
        StepRunner(None, "cuda")


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason=f"needs a CUDA GPU: {CUDA.reason}")
def test_step_runner_cuda_peak(mlp):
    mod, inputs = mlp
    exe = build(mod, cuda_target(), order=False, layout=False)
    runner = StepRunner(exe, "cuda", func="main_adjoint", inputs=inputs)
    loss, _ = runner.run()
    cpu = StepRunner(build(mod, "llvm", order=False, layout=False), "cpu", "main_adjoint", inputs)
    np.testing.assert_allclose(loss.numpy(), cpu.run()[0].numpy(), rtol=1e-4)
    m = runner.measure(repeat=5)
    assert m.median_s > 0 and m.peak_step_bytes is not None and m.peak_step_bytes >= 0
