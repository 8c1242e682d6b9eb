"""ReductionIntoEpilogue: max_pool2d's backward fused with ReLU's, scheduled for a GPU without the
global buffer of the pooled gradient (measured on an H200: 886 MB of kernel scratch in ResNet-50 at
batch 184). Checked here without a GPU: the rule is chosen over the fallback, the kernel lowers and
nvcc compiles it, its scratch is the argmax alone (the fallback's also holds the gradient and the window
maxima), and the reduction sits in the last stage's thread, in registers."""
from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.report.scratch import kernel_scratch  # noqa: E402
from roam_tvm.runtime import compile_cuda_kernels, cuda_target, nvcc_path  # noqa: E402
from roam_tvm.runtime.epilogue_schedule import RULE_NAME, ReductionIntoEpilogue  # noqa: E402
from roam_tvm.runtime.schedule import RULE_ATTR, default_rules, robust_schedule, schedule_func  # noqa: E402


@R.function
def _pool_relu_backward(g: R.Tensor((2, 4, 8, 8), "float32"), x: R.Tensor((2, 4, 16, 16), "float32")):
    with R.dataflow():
        d = R.grad.max_pool2d_backward(g, x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])
        y = R.where(R.greater(x, R.const(0.0)), d, R.const(0.0))
        R.output(y)
    return y


def _kernel():
    mod = tvm.IRModule({"main": _pool_relu_backward})
    mod = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                    relax.transform.FuseOps(), relax.transform.FuseTIR()])(mod)
    (gv, func), = [(gv, f) for gv, f in mod.functions_items()
                   if isinstance(f, tvm.tirx.PrimFunc) and "max_pool2d_backward" in gv.name_hint]
    assert "where" in gv.name_hint, gv.name_hint  # fused with ReLU's backward, as in ResNet
    return gv, func


def _scratch(gv, func, target) -> int:
    return kernel_scratch(tvm.IRModule({gv: func}), target)[gv.name_hint].bytes()


def test_pooled_gradient_stays_in_registers():
    target = cuda_target()
    gv, func = _kernel()
    ours, rule = schedule_func(func, target, name=gv.name_hint)
    assert rule == RULE_NAME
    fallback, rule = schedule_func(func, target, rules=[("Fallback", dict(default_rules())["Fallback"])])
    assert rule == "Fallback"
    # the fallback holds the pooled gradient (one float per input element, 8 KiB) in global scratch,
    # sharing it with the window maxima, beside the argmax (4 KiB); the rule keeps only the argmax
    assert _scratch(gv, fallback, target) == 12288 and _scratch(gv, ours, target) == 4096
    text = ours.script()
    assert 'scope="local"' in text and "blockIdx.x" in text


def test_rule_leaves_kernels_it_does_not_fit():
    target = cuda_target()

    @R.function
    def plain(x: R.Tensor((8, 8), "float32")):
        return R.exp(x)

    mod = relax.transform.LegalizeOps()(tvm.IRModule({"main": plain}))
    (func,) = [f for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    assert ReductionIntoEpilogue().apply(func, target) is None  # one stage: nothing to move
    assert ReductionIntoEpilogue().apply(func, tvm.target.Target("llvm")) is None


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc not found")
def test_kernel_builds_and_nvcc_compiles_it():
    target = cuda_target()
    gv, func = _kernel()
    with target:
        mod = robust_schedule(target)(tvm.IRModule({gv: func.with_attr("global_symbol", gv.name_hint)}))
    assert str(mod[gv.name_hint].attrs[RULE_ATTR]) == RULE_NAME
    lib = tvm.tirx.build(mod, target=target)
    assert compile_cuda_kernels(lib).kernels >= 2  # the argmax kernel, then the gradient with its epilogue

