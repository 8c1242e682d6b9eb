"""GPU kernels for loop programs (embedding gradient, scalar counter) and the build guard.

No GPU here, so the kernels' numerics are checked on llvm: the scheduled TIR with its
thread loops turned back into serial loops (a few lines below, not roam_tvm code) must
give what the unscheduled TIR gives and what numpy's ``np.add.at`` gives, with repeated
indices. Serial emulation cannot show a data race; race freedom rests on the ownership
argument in ``roam_tvm/runtime/loop_schedule.py`` (each thread writes only the output
elements whose owner index is its own, and the owner map is proven one-to-one). What is
checked here is that the rule refuses what it cannot prove: a scatter over its
indices is never bound to threads.
"""
import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, tirx
from tvm.script import tirx as T

from roam_tvm.runtime import build, cuda_target
from roam_tvm.runtime.loop_schedule import LoopBindError, bind_loops
from roam_tvm.runtime.schedule import UnschedulableError, robust_schedule
from roam_tvm.runtime.kernel_audit import DeviceAccessError


@pytest.fixture(scope="module")
def target():
    return cuda_target()


def _take_backward(grad_shape, x_shape, n_idx, axis):
    bb = relax.BlockBuilder()
    g = relax.Var("g", relax.TensorType(grad_shape, "float32"))
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    i = relax.Var("i", relax.TensorType((n_idx,), "int32"))
    with bb.function("main", [g, x, i]):
        out = bb.emit(relax.op.grad.take_backward(g, x, i, axis=axis))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    return mod, next(f for gv, f in mod.functions_items() if gv.name_hint == "take_backward")


def _serial(func):
    """The test's own emulation: thread loops become plain loops (runs on llvm)."""
    def to_serial(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body)
        return loop
    return tvm_ffi.structural_map(func, (tirx.For, to_serial))


def _run_llvm(func, arrays):
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), "llvm")
    args = [tvm.runtime.tensor(a) for a in arrays]
    lib["main"](*args)
    return args[-1].numpy()


def _thread_loops(func):
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda lp: found.append(lp)
                                         if lp.kind == tirx.ForKind.THREAD_BINDING else None)],
                            order="pre")
    return found  # outer before inner


@pytest.mark.parametrize("shapes", [((40, 24), (50, 24), 40, 0), ((3, 7, 5), (3, 11, 5), 7, 1)],
                         ids=["embedding-axis0", "axis1"])
def test_take_backward_kernel_matches_numpy(shapes, target):
    grad_shape, x_shape, n_idx, axis = shapes
    _, func = _take_backward(grad_shape, x_shape, n_idx, axis)
    sched = bind_loops(func, target)
    assert len(_thread_loops(sched)) >= 4  # zero-fill and scatter: two kernels
    rng = np.random.default_rng(0)
    grad = rng.standard_normal(grad_shape).astype("float32")
    idx = rng.integers(0, x_shape[axis], n_idx).astype("int32")
    idx[:3] = idx[0]  # repeated indices must add up
    x = np.zeros(x_shape, "float32")
    expect = np.zeros(x_shape, "float32")
    np.add.at(expect, (slice(None),) * axis + (idx,), grad)
    out = np.full(x_shape, np.nan, "float32")
    plain = _run_llvm(func, [grad, x, idx, out.copy()])
    threaded = _run_llvm(_serial(sched), [grad, x, idx, out.copy()])
    np.testing.assert_allclose(plain, expect, rtol=1e-6, atol=1e-6)
    assert np.array_equal(threaded, plain)  # same per-element order: bit-identical


def test_embedding_scatter_threads_own_columns(target):
    """One thread per feature column; the loop over indices stays serial in the thread."""
    _, func = _take_backward((40, 24), (50, 24), 40, 0)
    sched = bind_loops(func, target)
    scatter = _thread_loops(sched)[2:]
    threads = 1
    for lp in scatter:
        threads *= int(lp.extent)
    assert threads == 24
    inner = []
    tvm_ffi.structural_walk(scatter[-1].body, [(tirx.For, inner.append)])
    assert [int(lp.extent) for lp in inner] == [40] and inner[0].kind == tirx.ForKind.SERIAL


def test_robust_schedule_uses_loops_rule(target):
    mod, _ = _take_backward((40, 24), (50, 24), 40, 0)
    with target:
        robust_schedule(target)(mod)
    assert robust_schedule.last_report.rule_of["take_backward"] == "loops"


@T.prim_func(private=True, s_tir=True)
def _scatter(x: T.Buffer((8192,), "float32"), idx: T.Buffer((8192,), "int32"),
             out: T.Buffer((64,), "float32")):
    T.func_attr({"tirx.noalias": True})
    with T.sblock("scatter"):
        for i in range(8192):
            out[idx[i]] = out[idx[i]] + x[i]


@T.prim_func(private=True, s_tir=True)
def _counter(c: T.Buffer((), "int64")):
    T.func_attr({"tirx.noalias": True})
    with T.sblock("increment"):
        c[()] = c[()] + T.int64(1)


def test_unowned_scatter_is_refused(target):
    """No loop owns out[idx[i]]: binding i to threads would race, so nothing is bound."""
    with pytest.raises(LoopBindError, match="no race-free parallel loop"):
        bind_loops(_scatter, target)
    mod = tvm.IRModule({"scatter": _scatter})
    with target, pytest.raises(UnschedulableError, match=r"\['scatter'\]"):
        robust_schedule(target, rules=[])(mod)
    small = bind_loops(_scatter, target, serial_limit=8192)  # small enough: one thread
    assert [int(lp.extent) for lp in _thread_loops(small)] == [1, 1]


def test_scalar_counter_is_a_one_thread_kernel(target):
    sched = bind_loops(_counter, target)
    assert [int(lp.extent) for lp in _thread_loops(sched)] == [1, 1]
    c = np.array(41, "int64")
    assert int(_run_llvm(_serial(sched), [c])) == 42


def test_build_refuses_host_loops(target):
    """Without scheduling, a GPU build fails with the function's name (not a host loop)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8,), "float32"))
    with bb.function("main", [x]):
        out = bb.emit(relax.op.nn.relu(x))
        bb.emit_func_output(out)
    with pytest.raises(DeviceAccessError, match="relu"):
        build(bb.get(), target, order=False, layout=False, schedule=None)


def _index_put(accumulate: bool):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8192,), "float32"))
    i = relax.Var("i", relax.TensorType((2048,), "int64"))
    v = relax.Var("v", relax.TensorType((2048,), "float32"))
    with bb.function("main", [x, i, v]):
        out = bb.emit(relax.op.index_put(x, relax.Tuple([i]), v, accumulate=accumulate))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(f for gv, f in mod.functions_items() if gv.name_hint == "index_put")


def test_parallel_index_put_runs_one_thread_per_write(target):
    """TVM's index_put (a MaxUnpool's flat scatter): its two loops, marked parallel by the
    legalization and writing without reading what they write, become two thread-bound
    kernels; the threaded program (emulated serially) gives numpy's result."""
    func = _index_put(accumulate=False)
    sched = bind_loops(func, target)
    threads = [int(lp.extent) for lp in _thread_loops(sched)]
    assert threads == [32, 256, 8, 256], threads  # copy 8192, scatter 2048
    rng = np.random.default_rng(0)
    x = rng.standard_normal(8192).astype("float32")
    idx = rng.permutation(8192)[:2048].astype("int64")
    idx[:5] -= 8192  # negative indices wrap
    v = rng.standard_normal(2048).astype("float32")
    expect = x.copy()
    expect[idx] = v
    got = _run_llvm(_serial(sched), [x, idx, v, np.zeros(8192, "float32")])
    assert np.array_equal(got, expect)


def test_accumulating_index_put_is_not_bound_in_parallel(target):
    """``out[idx[i]] += v[i]`` reads what it stores: threads would race at repeated indices, so
    the scatter runs in one thread (2,048 writes, under the serial limit) and is refused past it."""
    func = _index_put(accumulate=True)
    sched = bind_loops(func, target)
    assert [int(lp.extent) for lp in _thread_loops(sched)] == [32, 256, 1, 1]
    with pytest.raises(LoopBindError, match="no race-free parallel loop"):
        bind_loops(func, target, serial_limit=1024)
