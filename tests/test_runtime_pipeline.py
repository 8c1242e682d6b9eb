"""roam_tvm.runtime.pipeline: stage lists, tvm-default equivalence on llvm, named pipeline."""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("torch")

from tvm import relax  # noqa: E402
import tvm_ffi  # noqa: E402

rp = importlib.import_module("roam_tvm.runtime.pipeline")  # the module (roam_tvm.runtime.pipeline is the factory)
from roam_tvm.runtime._testing import cnn_training_module  # noqa: E402


def _passes_available() -> bool:
    try:
        from roam_tvm.passes import RoamLayout, RoamOrder  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def cnn():
    return cnn_training_module()


def _run(exe, inputs, fn="main_adjoint"):
    vm = relax.VirtualMachine(exe, tvm.cpu())
    loss, grads = vm[fn](*[tvm.runtime.tensor(a) for a in inputs])
    return [loss.numpy()] + [g.numpy() for g in grads]


def _names(passes):
    return [p.info.name for p in passes]


def test_stage_lists_llvm_and_cuda():
    llvm = tvm.target.Target("llvm")
    cuda = tvm.target.Target("nvidia/nvidia-h100")
    # finalize = TVM's list with StaticPlanBlockMemory where TVM has it
    assert _names(rp.finalize_passes(llvm, layout=False)) == _names(
        relax.pipeline.finalize_passes(llvm)
    )
    assert _names(rp.finalize_passes(cuda, layout=False)) == _names(
        relax.pipeline.finalize_passes(cuda)
    )
    assert "StaticPlanBlockMemory" not in _names(rp.finalize_rest_passes(cuda))
    assert "RewriteCUDAGraph" in _names(rp.finalize_rest_passes(cuda))
    # (relax.pipeline.dataflow_lower_passes(llvm) is broken in 0.27: cpu_generic does not
    # export it; both backends' lists are the same four passes)
    assert _names(rp.dataflow_lower_passes(llvm)) == _names(
        relax.backend.cuda.pipeline.dataflow_lower_passes(cuda)
    )
    # legalize: TVM's, with SplatConstants right after FoldConstant; schedule only on GPU
    def with_splat(names):
        at = names.index("FoldConstant") + 1
        return names[:at] + ["SplatConstants"] + names[at:]

    assert _names(rp.legalize_passes(llvm)) == with_splat(_names(relax.pipeline.legalize_passes(llvm)))
    cuda_names = _names(rp.legalize_passes(cuda))
    assert cuda_names[:6] == with_splat(_names(relax.pipeline.legalize_passes(cuda))[:5])
    assert cuda_names[6:] == ["RoamRobustSchedule"]
    assert _names(rp.legalize_passes(cuda, schedule="dlight"))[6:] == ["ApplyDefaultSchedule"]


def test_options_routing():
    order, layout, rest = rp.split_options(
        {"order_time_limit": 3, "layout_options": {"alignment": 256}, "layout_solver": "x", "schedule": None}
    )
    assert order == {"time_limit": 3}
    assert layout == {"alignment": 256, "solver": "x"}
    assert rest == {"schedule": None}
    with pytest.raises(TypeError):
        rp.pipeline("llvm", order=False, layout=False, bogus=1)
    with pytest.raises(TypeError):
        rp.pipeline("llvm", order=False, layout=False, order_time_limit=1)


def test_tvm_default_bit_identical_on_llvm(cnn):
    mod, inputs = cnn
    target = tvm.target.Target("llvm")
    ours = _run(tvm.compile(mod, target, relax_pipeline=rp.pipeline(target, order=False, layout=False)), inputs)
    stock = _run(tvm.compile(mod, target, relax_pipeline=relax.get_default_pipeline(target)), inputs)
    for a, b in zip(ours, stock):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b)
    # and against tvm.compile's own "default" (which does not fuse on llvm)
    plain = _run(tvm.compile(mod, target), inputs)
    for a, b in zip(ours, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the input module is untouched
    assert all(isinstance(f, relax.Function) for f in mod.functions.values())


def test_lower_to_memory_planning(cnn):
    mod, _ = cnn
    before = tvm_ffi.structural_hash(mod)
    low = rp.lower_to_memory_planning(mod, "llvm")
    assert tvm_ffi.structural_hash(mod) == before
    text = low["main_adjoint"].script()
    assert "R.builtin.alloc_tensor" in text  # CallTIRRewrite ran
    assert "R.memory.alloc_storage" not in text  # memory planning did not
    assert "R.dataflow" not in text
    # planning + finalize on the result gives the same module as the full pipeline
    rest = tvm.transform.Sequential(rp.finalize_passes("llvm", layout=False))
    with tvm.target.Target("llvm"):
        planned = rest(low)
    assert "R.memory.alloc_storage" in planned["main_adjoint"].script() or "alloc_storage" in str(
        planned["main_adjoint"]
    )


def test_named_pipeline_registered():
    assert rp.NAMED_PIPELINE_REGISTERED
    p = relax.get_pipeline("roam", target="llvm", order=False, layout=False)
    assert isinstance(p, tvm.transform.Pass)


@pytest.mark.skipif(not _passes_available(), reason="roam_tvm.passes (RoamOrder/RoamLayout) not there yet")
def test_named_pipeline_full_compile(cnn):
    mod, inputs = cnn
    target = tvm.target.Target("llvm")
    ours = _run(tvm.compile(mod, target, relax_pipeline="roam"), inputs)
    stock = _run(tvm.compile(mod, target, relax_pipeline=relax.get_default_pipeline(target)), inputs)
    for a, b in zip(ours, stock):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
