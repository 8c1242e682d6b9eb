"""drop_noop_reshapes: a reshape of a kernel's output onto its own shape is that output (no view)."""
from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm")
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from roam_tvm.frontend.simplify import drop_noop_reshapes  # noqa: E402


@I.ir_module
class Before:
    @T.prim_func
    def logits(A: T.Buffer((4, 3), "float32"), B: T.Buffer((4, 3), "float32")):
        for i, j in T.grid(4, 3):
            B[i, j] = A[i, j] * T.float32(2)

    @R.function
    def main(x: R.Tensor((4, 3), "float32")):
        cls = Before
        with R.dataflow():
            y = R.call_tir(cls.logits, (x,), out_ty=R.Tensor((4, 3), "float32"))
            v = R.reshape(y, R.shape([4, 3]))   # (B*T, V) -> (B, T, V) -> (B*T, V), combined
            e = R.exp(v)
            p = R.reshape(x, R.shape([4, 3]))   # a parameter: not a kernel's output, kept
            r = R.reshape(y, R.shape([3, 4]))   # a real reshape, kept
            R.output(e, p, r)
        return (e, p, r)


@I.ir_module
class Expected:
    @T.prim_func
    def logits(A: T.Buffer((4, 3), "float32"), B: T.Buffer((4, 3), "float32")):
        for i, j in T.grid(4, 3):
            B[i, j] = A[i, j] * T.float32(2)

    @R.function
    def main(x: R.Tensor((4, 3), "float32")):
        cls = Expected
        with R.dataflow():
            y = R.call_tir(cls.logits, (x,), out_ty=R.Tensor((4, 3), "float32"))
            e = R.exp(y)
            p = R.reshape(x, R.shape([4, 3]))
            r = R.reshape(y, R.shape([3, 4]))
            R.output(e, p, r)
        return (e, p, r)


def test_noop_reshape_of_a_kernel_output_is_dropped():
    after = Before.clone()
    after["main"] = drop_noop_reshapes(Before["main"])
    tvm.ir.assert_structural_equal(after, Expected)


@I.ir_module
class Returned:
    @T.prim_func
    def twice(A: T.Buffer((2,), "float32"), B: T.Buffer((2,), "float32")):
        for i in range(2):
            B[i] = A[i] * T.float32(2)

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        cls = Returned
        with R.dataflow():
            y = R.call_tir(cls.twice, (x,), out_ty=R.Tensor((2,), "float32"))
            z = R.reshape(y, R.shape([2]))  # the block's output var: y is local to the block
            R.output(z)
        return z


def test_a_block_output_keeps_its_reshape():
    after = drop_noop_reshapes(Returned["main"])
    tvm.ir.assert_structural_equal(after, Returned["main"])
