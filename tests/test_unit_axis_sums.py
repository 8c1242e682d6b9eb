"""sums_over_unit_axes_as_reshapes: a collapse_sum_to over size-1 axes only and a reshape of a
reshape become one reshape (a view); real sums and symbolic shapes are left alone."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend.unit_axis_sums import sums_over_unit_axes_as_reshapes


@tvm.script.ir_module
class Before:
    @R.function
    def main(g: R.Tensor((1, 2, 8), "float32"), h: R.Tensor((3, 2, 8), "float32")):
        with R.dataflow():
            a = R.collapse_sum_to(g, R.shape([2, 8]))       # sums over a size-1 axis: a reshape
            b = R.reshape(a, R.shape([1, 2, 8]))
            c = R.reshape(b, R.shape([16]))                 # reshape of a reshape
            d = R.collapse_sum_to(h, R.shape([2, 8]))       # a real sum: kept
            R.output(c, d)
        return (c, d)


@tvm.script.ir_module
class Expected:
    @R.function
    def main(g: R.Tensor((1, 2, 8), "float32"), h: R.Tensor((3, 2, 8), "float32")):
        with R.dataflow():
            a = R.reshape(g, R.shape([2, 8]))
            b = R.reshape(g, R.shape([1, 2, 8]))
            c = R.reshape(g, R.shape([16]))
            d = R.collapse_sum_to(h, R.shape([2, 8]))
            R.output(c, d)
        return (c, d)


def test_unit_axis_sum_and_reshape_chain_become_one_reshape():
    after = sums_over_unit_axes_as_reshapes(Before["main"])
    after = relax.transform.DeadCodeElimination()(tvm.IRModule({"main": after}))["main"]
    expected = relax.transform.DeadCodeElimination()(Expected)["main"]
    tvm.ir.assert_structural_equal(after, expected)


def test_values_unchanged():
    after = sums_over_unit_axes_as_reshapes(Before["main"])
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((1, 2, 8)).astype("float32"), rng.standard_normal((3, 2, 8)).astype("float32")]
    outs = []
    for func in (Before["main"], after):
        exe = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
        vm = relax.VirtualMachine(exe, tvm.cpu())
        res = vm["main"](*[tvm.runtime.tensor(a) for a in args])
        outs.append([r.numpy() for r in res])
    for x, y in zip(*outs):
        np.testing.assert_array_equal(x, y)


def test_symbolic_shapes_are_left_alone():
    @R.function
    def f(g: R.Tensor(("n", 2, 8), "float32")):
        with R.dataflow():
            a = R.collapse_sum_to(g, R.shape([2, 8]))
            R.output(a)
        return a

    after = sums_over_unit_axes_as_reshapes(f)
    assert "collapse_sum_to" in after.script()


def test_equal_bindings_are_not_merged():
    # The norms' gradients spell `gamma * dy` once per use so that each copy fuses into its own
    # consumer; TVM's rewrite_call would merge them into one full-size tensor.
    @R.function
    def f(dy: R.Tensor((1, 4, 8), "float32"), gamma: R.Tensor((4, 1), "float32")):
        with R.dataflow():
            a = R.multiply(dy, gamma)
            b = R.multiply(dy, gamma)
            s = R.sum(a, axis=[2], keepdims=True)
            c = R.subtract(b, s)
            d = R.collapse_sum_to(c, R.shape([4, 8]))
            R.output(d)
        return d

    after = sums_over_unit_axes_as_reshapes(f)
    assert "collapse_sum_to" not in after.script()
    assert after.script().count("R.multiply(dy, gamma)") == 2
