"""LiftKernelScratch: kernel intermediates are removed where they are waste and
planned where they are not; results stay bit for bit the same.

The checks build and run the kernels (llvm) and count workspace requests in the
lowered host code (``report.scratch``), independently of how the pass decides.
"""
import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from roam_tvm.passes import LiftKernelScratch  # noqa: E402
from roam_tvm.passes.scratch_tir import shrink_intermediates  # noqa: E402
from roam_tvm.report.scratch import kernel_scratch  # noqa: E402


@T.prim_func(private=True, s_tir=True)
def matmul_add(a: T.Buffer((T.int64(64), T.int64(32)), "float32"), b: T.Buffer((T.int64(32), T.int64(96)), "float32"),
               c: T.Buffer((T.int64(64), T.int64(96)), "float32"), out: T.Buffer((T.int64(64), T.int64(96)), "float32")):
    T.func_attr({"tirx.noalias": True})
    mm = T.sblock_alloc_buffer((T.int64(64), T.int64(96)))
    for i, j, k in T.grid(T.int64(64), T.int64(96), T.int64(32)):
        with T.sblock("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                mm[vi, vj] = T.float32(0.0)
            mm[vi, vj] = mm[vi, vj] + a[vi, vk] * b[vk, vj]
    for i, j in T.grid(T.int64(64), T.int64(96)):
        with T.sblock("add"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = mm[vi, vj] + c[vi, vj]


@I.ir_module
class Broadcast:
    """A row computed once and added to every row: inlining would recompute it, so it is lifted."""

    @T.prim_func(private=True, s_tir=True)
    def exp_row_add(x: T.Buffer((T.int64(8), T.int64(1024)), "float32"), r: T.Buffer((T.int64(1024),), "float32"),
                    out: T.Buffer((T.int64(8), T.int64(1024)), "float32")):
        T.func_attr({"tirx.noalias": True})
        e = T.sblock_alloc_buffer((T.int64(1024),))
        for j in range(T.int64(1024)):
            with T.sblock("exp"):
                vj = T.axis.remap("S", [j])
                e[vj] = T.exp(r[vj])
        for i, j in T.grid(T.int64(8), T.int64(1024)):
            with T.sblock("add"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = x[vi, vj] + e[vj]

    @R.function
    def main(x: R.Tensor((8, 1024), "float32"), r: R.Tensor((1024,), "float32")) -> R.Tensor((8, 1024), "float32"):
        cls = Broadcast
        with R.dataflow():
            y = R.call_tir(cls.exp_row_add, (x, r), out_ty=R.Tensor((8, 1024), "float32"))
            z = R.call_tir(cls.exp_row_add, (y, r), out_ty=R.Tensor((8, 1024), "float32"))
            R.output(z)
        return z


def _requests(func) -> list:
    return kernel_scratch(tvm.IRModule({"k": func}), "llvm")["k"].requests


def _run_prim(func, arrays):
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), "llvm")
    args = [tvm.runtime.tensor(a) for a in arrays]
    lib["main"](*args)
    return args[-1].numpy()


def test_matmul_epilogue_needs_no_full_intermediate_and_is_bit_identical():
    assert _requests(matmul_add) == [(64 * 96 * 4, False)]
    shrunk = shrink_intermediates(matmul_add)
    assert _requests(shrunk) == []
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype("float32") for s in ((64, 32), (32, 96), (64, 96))]
    arrays.append(np.zeros((64, 96), "float32"))
    np.testing.assert_array_equal(_run_prim(matmul_add, [a.copy() for a in arrays]),
                                  _run_prim(shrunk, [a.copy() for a in arrays]))


def _run_relax(mod, args):
    exe = tvm.compile(mod, "llvm", relax_pipeline=relax.get_default_pipeline(tvm.target.Target("llvm")))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()


def test_broadcast_intermediate_becomes_a_planned_output():
    assert _requests(Broadcast["exp_row_add"]) == [(4096, False)]
    lifted = LiftKernelScratch("llvm")(Broadcast)
    kernel = lifted["exp_row_add"]
    assert len(kernel.params) == 4  # x, r, out, then the lifted row
    assert _requests(kernel) == []
    text = lifted["main"].script()
    assert text.count("R.Tensor((1024,), dtype=\"float32\")") >= 2  # each call returns its row
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((8, 1024)).astype("float32"), rng.standard_normal(1024).astype("float32")]
    np.testing.assert_array_equal(_run_relax(Broadcast, args), _run_relax(lifted, args))
    # the module given is not changed
    assert len(Broadcast["exp_row_add"].params) == 3


def test_gpu_targets_are_left_unchanged():
    assert LiftKernelScratch("cuda")(Broadcast).same_as(Broadcast)


def test_needs_a_target():
    with pytest.raises(ValueError, match="needs a target"):
        LiftKernelScratch()(Broadcast)


def test_lifted_outputs_are_not_held_by_a_tuple_after_lowering():
    from roam_tvm.passes import ForwardTupleItems
    from roam_tvm.runtime.pipeline import dataflow_lower_passes

    target = tvm.target.Target("llvm")
    with target:
        lowered = tvm.transform.Sequential([LiftKernelScratch(target)] + dataflow_lower_passes(target))(Broadcast)
        forwarded = ForwardTupleItems()(lowered)

    def tuple_vars(func):
        return [b.var.name for blk in func.body.blocks for b in blk.bindings if isinstance(b.value, relax.Tuple)]

    assert tuple_vars(lowered["main"])  # CallTIRRewrite builds one tuple per call ...
    assert tuple_vars(forwarded["main"]) == []  # ... which the VM would keep alive to the end
    args = [np.ones((8, 1024), "float32"), np.full(1024, 0.5, "float32")]
    np.testing.assert_array_equal(_run_relax(Broadcast, args), _run_relax(forwarded, args))


@T.prim_func(private=True, s_tir=True)
def matmul_pad(a: T.Buffer((T.int64(12), T.int64(16)), "float32"), b: T.Buffer((T.int64(16), T.int64(8)), "float32"),
               out: T.Buffer((T.int64(15), T.int64(8)), "float32")):
    """A product padded with zero rows (LongT5's blocks: 12 -> 15 tokens): the pad writes 3 rows
    that no point of the product covers."""
    T.func_attr({"tirx.noalias": True})
    mm = T.sblock_alloc_buffer((T.int64(12), T.int64(8)))
    for i, j, k in T.grid(T.int64(12), T.int64(8), T.int64(16)):
        with T.sblock("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                mm[vi, vj] = T.float32(0.0)
            mm[vi, vj] = mm[vi, vj] + a[vi, vk] * b[vk, vj]
    for i, j in T.grid(T.int64(15), T.int64(8)):
        with T.sblock("pad"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = T.if_then_else(vi < T.int64(12), mm[vi, vj], T.float32(0.0))


def test_padded_epilogue_keeps_its_zero_rows():
    """Moving the pad under the product's loops would leave rows 12..14 unwritten (whatever the
    output buffer held): the pad is left where it is, and every row is the unshrunk kernel's."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((12, 16)).astype("float32"), rng.standard_normal((16, 8)).astype("float32"),
              np.full((15, 8), np.nan, "float32")]  # garbage where a row is not written
    want = _run_prim(matmul_pad, [a.copy() for a in arrays])
    assert np.all(want[12:] == 0)
    np.testing.assert_array_equal(_run_prim(shrink_intermediates(matmul_pad), [a.copy() for a in arrays]), want)
