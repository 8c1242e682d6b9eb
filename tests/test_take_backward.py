"""``take_backward`` along a later axis (``out[:, -1]``) as a per-dimension loop program.

TVM's kernel decodes every output coordinate from a flattened address that holds the
loaded index, so at real sizes no GPU thread binding could be proven race-free and the
CUDA build of an RNN classifier failed. The replacement must (1) give what numpy's
``np.add.at`` gives, bit-identical to TVM's kernel on llvm, (2) bind its columns to GPU
threads at any size, and (3) be what the frontend emits for ``y[:, [3, 0]]`` (``y[:, -1]``, one
constant index, gets a zero pad instead: grad_select.py).
"""
import numpy as np
import pytest
import torch
import tvm
import tvm_ffi
from tvm import relax, tirx

from roam_tvm.frontend import Adam, from_torch
from roam_tvm.frontend.take_backward import take_backward_kernel
from roam_tvm.runtime import cuda_target
from roam_tvm.runtime.loop_schedule import LoopBindError, bind_loops
from roam_tvm.report.simulate import schedule_for
from roam_tvm.runtime.schedule import robust_schedule


@pytest.fixture(scope="module")
def target():
    return cuda_target()


def _tvm_kernel(g_shape, x_shape, n_idx, axis):
    bb = relax.BlockBuilder()
    g = relax.Var("g", relax.TensorType(g_shape, "float32"))
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    i = relax.Var("i", relax.TensorType((n_idx,), "int64"))
    with bb.function("main", [g, x, i]):
        bb.emit_func_output(bb.emit(relax.op.grad.take_backward(g, x, i, axis=axis)))
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(f for gv, f in mod.functions_items() if gv.name_hint == "take_backward")


def _run(func, arrays):
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), "llvm")
    args = [tvm.runtime.tensor(a) for a in arrays]
    lib["main"](*args)
    return args[-1].numpy()


def _serial(func):
    """The test's own emulation of a GPU kernel on llvm: thread loops become plain loops."""
    def to_serial(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body)
        return loop
    return tvm_ffi.structural_map(func, (tirx.For, to_serial))


def _threads(func) -> int:
    loops = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda lp: loops.append(lp)
                                         if lp.kind == tirx.ForKind.THREAD_BINDING else None)])
    n = 1
    for lp in loops[-2:]:  # the scatter kernel's blockIdx.x and threadIdx.x
        n *= int(lp.extent)
    return n


@pytest.mark.parametrize("x_shape,axis,n_idx", [((3, 11, 5), 1, 7), ((2, 3, 4, 6), 2, 5),
                                                 ((4, 6, 3), 2, 4)], ids=["3d-axis1", "4d-axis2", "last-axis"])
def test_kernel_matches_numpy_and_tvm(x_shape, axis, n_idx, target):
    g_shape = x_shape[:axis] + (n_idx,) + x_shape[axis + 1:]
    _, ours = take_backward_kernel(x_shape, axis, n_idx, "float32", "int64")
    rng = np.random.default_rng(0)
    grad = rng.standard_normal(g_shape).astype("float32")
    idx = rng.integers(0, x_shape[axis], n_idx).astype("int64")
    idx[:3] = idx[0]  # repeated indices add up
    expect = np.zeros(x_shape, "float32")
    np.add.at(expect, (slice(None),) * axis + (idx,), grad)
    out = np.full(x_shape, np.nan, "float32")
    got = _run(ours, [grad, idx, out.copy()])
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)
    theirs = _run(_tvm_kernel(g_shape, x_shape, n_idx, axis),
                  [grad, np.zeros(x_shape, "float32"), idx, out.copy()])
    assert np.array_equal(got, theirs)  # same sums in the same order
    threaded = _run(_serial(bind_loops(ours, target)), [grad, idx, out.copy()])
    assert np.array_equal(threaded, got)
    neg = idx - x_shape[axis]  # negative indices count from the end, like torch
    assert np.array_equal(_run(ours, [grad, neg, out.copy()]), got)


def test_real_size_binds_one_thread_per_column(target):
    """(32, 4, 1024)[:, -1]: TVM's kernel cannot be bound; ours gives 32 * 1024 threads."""
    with pytest.raises(LoopBindError, match="no race-free parallel loop"):
        bind_loops(_tvm_kernel((32, 1, 1024), (32, 4, 1024), 1, 1), target)
    _, ours = take_backward_kernel((32, 4, 1024), 1, 1, "float32", "int64")
    assert _threads(bind_loops(ours, target)) == 32 * 1024


class _Steps(torch.nn.Module):
    """Reads steps ``[3, 0]`` of the sequence (``index_select``: a take of a 1-d index), or only the
    last one (``out[:, -1]``, a select: its gradient is a zero pad since grad_select.py)."""

    def __init__(self, hidden: int, last: bool = False):
        super().__init__()
        self.proj = torch.nn.Linear(8, hidden)
        self.head = torch.nn.Linear(hidden, 3)
        self.last = last

    def forward(self, x):
        h = self.proj(x)
        return self.head(h[:, -1] if self.last else h[:, [3, 0]].sum(1))


def _step(last: bool):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 4, 8, generator=g), torch.randint(0, 3, (8,), generator=g)
    return from_torch(_Steps(1024, last), (x,), (y,), optimizer=Adam(lr=1e-3), quiet=True)


def test_frontend_emits_the_kernel_and_cuda_schedules_it(target):
    ts = _step(last=False)
    names = [gv.name_hint for gv in ts.mod.get_global_vars()]
    assert any(n.startswith("take_backward_float32_") for n in names), names
    assert "relax.grad.take_backward" not in ts.mod.script()
    with target:
        robust_schedule(target)(schedule_for(ts.mod, target))


def test_last_step_gradient_is_a_pad_that_cuda_schedules(target):
    ts = _step(last=True)
    assert "take_backward" not in ts.mod.script()
    with target:
        robust_schedule(target)(schedule_for(ts.mod, target))
