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


@tvm.script.ir_module
class Attention:
    """Float32 softmax kept for its own backward; its bfloat16 copy, reshaped, for the matmul's."""

    @R.function
    def main(s: R.Tensor((2, 4, 4), "float32"), v: R.Tensor((4, 4), "float32"),
             dy: R.Tensor((8, 4), "float32"), w: R.Tensor((2, 4, 4), "float32")):
        with R.dataflow():
            vb = R.astype(v, "bfloat16")
            p = R.nn.softmax(s, axis=-1)
            pb = R.astype(p, "bfloat16")
            pr = R.reshape(pb, R.shape([8, 4]))
            h = R.multiply(w, p)                     # a float32 value with no backward reader
            hb = R.astype(h, "bfloat16")             # its downcast: never redone
            y = R.matmul(pr, vb)
            y_adjoint = R.multiply(dy, R.astype(y, "float32"))
            gb = R.astype(y_adjoint, "bfloat16")
            dv = R.matmul(R.permute_dims(pr), gb)
            dpr = R.matmul(gb, R.permute_dims(vb))
            ds = R.multiply(p, R.reshape(R.astype(dpr, "float32"), R.shape([2, 4, 4])))
            out = R.add(ds, R.astype(hb, "float32"))
            dvf = R.astype(dv, "float32")
            R.output(out, dvf)
        return (out, dvf)


def _run_all(mod, args):
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return [o.numpy() for o in vm["main"](*[tvm.runtime.tensor(a) for a in args])]


def test_a_downcast_is_redone_only_when_its_source_is_kept_anyway():
    after = recompute_upcasts_in_backward(Attention["main"])
    text = after.script()
    assert "pr_bwd" in text and "R.permute_dims(pr_bwd" in text   # cast and reshape redone
    assert "hb_bwd" not in text                                     # h is not kept: hb stays
    assert "vb_bwd" not in text                                     # v is not read by the backward
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(sh).astype("float32") for sh in [(2, 4, 4), (4, 4), (8, 4), (2, 4, 4)]]
    for got, want in zip(_run_all(tvm.IRModule({"main": after}), args), _run_all(Attention, args)):
        np.testing.assert_array_equal(got, want)
