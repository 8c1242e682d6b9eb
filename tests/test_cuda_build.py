"""The CUDA build of `train_step`: every called PrimFunc is a GPU kernel, nvcc compiles them.

No GPU is needed: TVM builds and exports for CUDA without a driver, and nvcc compiles
the kernels it generated. Running them needs a GPU (tests marked `cuda` in
test_runtime_measure.py).

The static checks use TVM's own analyses, not roam_tvm's (`roam_tvm.runtime.kernel_audit`
is what they check):

* TVM's analysis ``tirx.analysis.verify_memory`` (what its ``VerifyMemory`` pass enforces:
  no host access to a device buffer) must accept every PrimFunc. It runs right before
  ``FlattenBuffer``, when thread bindings are ``thread_extent`` attributes: in TVM 0.27
  the analysis loses track of parameters once FlattenBuffer has made ``decl_buffer``
  views of them, which is why the ``VerifyMemory`` pass itself, later, lets host loops
  through (``test_audit_sees_host_loops`` shows both);
* right after ``SplitHostDevice``, every host function has at least one device kernel
  (``<name>_kernel...``), and those kernels are ``__global__`` functions of the CUDA source
  that nvcc compiles.

The default run covers small configs of a CNN (pooling, batch norm, its int64 step
counter) and GPT-2 (two embedding gradients, ``take_backward``); ``--runslow`` covers
every zoo model under both planners.
"""
import re

import pytest
import tvm

from roam_tvm.cli import optimizer_from_config
from roam_tvm.frontend import from_torch
from roam_tvm.runtime import build, compile_cuda_kernels, cuda_source, cuda_target, export, nvcc_path
from roam_tvm.zoo import MODELS, get_model

FAST = ["cnn", "gpt2-small"]  # a CNN (pooling, batch norm) and a transformer
# the breadth models of issue 13, at their tiny sizes (roam_tvm/zoo/families.py)
FAMILIES = ["llama", "qwen2", "mistral", "t5", "densenet", "swin", "moe", "lstm", "gru", "unet"]


def _family_spec(name):
    from pathlib import Path

    from roam_tvm.zoo import load_factory

    import roam_tvm.zoo.families as families

    return load_factory(f"{Path(families.__file__)}:{name}")
_KERNEL_CONV = 2  # tvm::CallingConv::kDeviceKernelLaunch


@tvm.instrument.pass_instrument
class _KernelAudit:
    """Records, from inside the real TIR build, what the static checks need."""

    def __init__(self):
        self.memory_errors = []  # PrimFuncs verify_memory rejects
        self.gpu_funcs = set()  # PrimFuncs built for the GPU target (not host helpers)
        self.host_funcs = set()
        self.kernels = set()
        self._verify = tvm.get_global_func("tirx.analysis.verify_memory")

    def run_before_pass(self, mod, info):
        if info.name.endswith("FlattenBuffer"):
            for gvar, func in mod.functions_items():
                if not isinstance(func, tvm.tirx.PrimFunc):
                    continue
                if "gpu" in func.attrs["target"].keys:
                    self.gpu_funcs.add(gvar.name_hint)
                if not self._verify(func):
                    self.memory_errors.append(gvar.name_hint)

    def run_after_pass(self, mod, info):
        if info.name.endswith("SplitHostDevice"):
            for gvar, func in mod.functions_items():
                if not isinstance(func, tvm.tirx.PrimFunc):
                    continue
                conv = func.attrs.get("calling_conv") if func.attrs is not None else None
                (self.kernels if conv is not None and int(conv) == _KERNEL_CONV
                 else self.host_funcs).add(gvar.name_hint)


def _outside_spec(ref):
    """A model from ``benchmarks/outside/`` (``file.py:factory``), outside the zoo."""
    from pathlib import Path

    from roam_tvm.zoo import load_factory

    return load_factory(f"{Path(__file__).resolve().parents[1] / 'benchmarks' / 'outside'}/{ref}")


def _cuda_build(name, planner_on):
    spec = (_family_spec(name) if name in FAMILIES else _outside_spec(name) if ".py:" in name
            else get_model(name, small=True))
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer))
    audit = _KernelAudit()
    with tvm.transform.PassContext(opt_level=3, instruments=[audit]):
        exe = build(ts.mod, cuda_target(), order=planner_on, layout=planner_on,
                    **({"order_time_limit": 2.0} if planner_on else {}))
    return exe, audit


def _check_kernels(exe, audit):
    assert audit.gpu_funcs and audit.host_funcs, "the instrument saw no FlattenBuffer/SplitHostDevice"
    assert not audit.memory_errors, f"host code reads device buffers in {audit.memory_errors}"
    without = sorted(h for h in audit.gpu_funcs
                     if not any(k.startswith(h + "_kernel") for k in audit.kernels))
    assert not without, f"PrimFuncs with no GPU kernel: {without}"
    declared = set(re.findall(r"__global__\s+void\s+(?:__launch_bounds__\(\d+\)\s+)?(\w+)\(",
                              cuda_source(exe)))
    assert audit.kernels <= declared, sorted(audit.kernels - declared)
    return declared


def _build_and_compile(name, tmp_path, planner_on):
    exe, audit = _cuda_build(name, planner_on)
    declared = _check_kernels(exe, audit)
    path = export(exe, tmp_path / f"{name}-{'roam' if planner_on else 'default'}.so")
    assert (tmp_path / path).stat().st_size > 0
    if nvcc_path() is None:
        pytest.skip("nvcc not found: kernels were generated but not compiled")
    res = compile_cuda_kernels(exe)
    assert res.kernels == len(declared) and len(res.cubin) > 0
    return audit


def test_audit_sees_host_loops():
    """Negative control: TVM's own pipeline without scheduling builds relu as a host loop
    over device memory, and the audit reports it (so the checks above can fail)."""
    from tvm import relax  # pylint: disable=import-outside-toplevel

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8,), "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(relax.op.nn.relu(x)))
    audit = _KernelAudit()
    with tvm.transform.PassContext(opt_level=3, instruments=[audit]):
        tvm.compile(bb.get(), cuda_target(), relax_pipeline=relax.pipeline.default_build_pipeline())
    assert "relu" in audit.gpu_funcs and "relu" in audit.memory_errors
    assert not any(k.startswith("relu_kernel") for k in audit.kernels)


@pytest.mark.parametrize("name", FAST)
def test_cuda_build_roam(name, tmp_path):
    audit = _build_and_compile(name, tmp_path, planner_on=True)
    # the functions issue 11 found as host loops are kernels now
    expected = {"cnn": ["increment_int64"], "gpt2-small": ["take_backward", "take_backward1"]}
    for func in expected[name]:
        assert func in audit.gpu_funcs
        assert any(k.startswith(func + "_kernel") for k in audit.kernels), func


@pytest.mark.slow
@pytest.mark.parametrize("name,planner_on",
                         [(n, False) for n in MODELS] + [(n, True) for n in MODELS if n not in FAST],
                         ids=[f"tvm-default-{n}" for n in MODELS]
                         + [f"roam-{n}" for n in MODELS if n not in FAST])
def test_cuda_build_whole_zoo(name, planner_on, tmp_path):
    _build_and_compile(name, tmp_path, planner_on)


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_cuda_build_breadth_models(name, tmp_path):
    _build_and_compile(name, tmp_path, planner_on=True)


# kernels the outside models brought in: EmbeddingBag (max mode: a masked scatter), a gather of
# four neighbours (grid_sample), and CTC's unrolled log-space recursion
OUTSIDE_FAST = ["embeddings.py:maxbag"]


@pytest.mark.parametrize("name", OUTSIDE_FAST)
def test_cuda_build_outside_models(name, tmp_path):
    _build_and_compile(name, tmp_path / "m", planner_on=True)


# kernels of session 16's converters: a stable argsort (dispatched to the GPU sort), bincount and
# histc counts (compare-and-sum reductions), a Llama-4 chunk mask from an int64 floor division
OUTSIDE_SLOW = ["layers.py:stn", "kinds_s16_nn.py:sort_dispatch", "kinds_s16_nn.py:moe_bincount_aux", "kinds_s16.py:llama4_text"]


@pytest.mark.slow
@pytest.mark.parametrize("name", OUTSIDE_SLOW)
def test_cuda_build_new_converters(name, tmp_path):
    _build_and_compile(name, tmp_path / "m", planner_on=True)


@pytest.mark.slow
def test_cuda_build_ctc_model(tmp_path):
    _build_and_compile("layers.py:speech_ctc", tmp_path / "m", planner_on=True)
