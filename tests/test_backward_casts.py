"""recompute_upcasts_in_backward: the backward reads a fresh cast of the bfloat16 tensor, so the
forward's float32 copy dies in the forward; values unchanged; downcasts and forwards left alone."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend.backward_casts import recompute_upcasts_in_backward


@tvm.script.ir_module
class Step:
    @R.function
    def main(x: R.Tensor((4, 6), "float32"), dy: R.Tensor((4, 6), "float32")):
        with R.dataflow():
            xb = R.astype(x, "bfloat16")            # an activation kept in bfloat16
            xf = R.astype(xb, "float32")            # the upcast autocast inserts
            y = R.sigmoid(xf)                       # forward reader
            yb = R.astype(y, "bfloat16")            # a downcast: never recomputed
            y_adjoint = R.multiply(dy, xf)          # backward reads xf
            yf = R.astype(yb, "float32")
            x_adjoint = R.multiply(y_adjoint, yf)
            R.output(x_adjoint)
        return x_adjoint


def _run(mod, args):
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()


def test_backward_reads_a_fresh_cast_and_values_are_unchanged():
    after = recompute_upcasts_in_backward(Step["main"])
    text = after.script()
    assert "R.multiply(dy, xf_bwd)" in text and "R.sigmoid(xf)" in text
    assert text.count("R.astype(xb, ") == 2       # the forward's cast and the backward's
    assert "yf_bwd" not in text                    # yf is a backward binding itself
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 6)).astype("float32") for _ in range(2)]
    np.testing.assert_array_equal(_run(tvm.IRModule({"main": after}), args), _run(Step, args))


def test_without_a_backward_nothing_changes():
    @tvm.script.ir_module
    class Forward:
        @R.function
        def main(x: R.Tensor((4, 6), "float32")):
            with R.dataflow():
                xb = R.astype(x, "bfloat16")
                xf = R.astype(xb, "float32")
                z = R.multiply(R.sigmoid(xf), xf)
                R.output(z)
            return z

    assert recompute_upcasts_in_backward(Forward["main"]).same_as(Forward["main"])
