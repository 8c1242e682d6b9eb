"""MergeBatchedWeightGrads and TransposeProductSums: weight gradients without batched or
transposed temporaries, same values (within float rounding), and left alone where unsafe."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend.batched_weight_grads import MergeBatchedWeightGrads
from roam_tvm.frontend.nt_matmul import FuseNTMatmul
from roam_tvm.frontend.transpose_sums import TransposeProductSums


def _run_all(mod, args):
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return [o.numpy() for o in vm["main"](*[tvm.runtime.tensor(x) for x in args])]


def _pipeline(mod):
    mod = FuseNTMatmul()(MergeBatchedWeightGrads()(mod))
    return relax.transform.DeadCodeElimination()(TransposeProductSums()(mod))


@tvm.script.ir_module
class RNNWeightGrads:
    """W_ih's gradient over all steps (batched, then summed) and W_hh's over three steps."""

    @R.function
    def main(x: R.Tensor((5, 2, 8), "float32"), g: R.Tensor((5, 2, 6), "float32"),
             h0: R.Tensor((2, 4), "float32"), h1: R.Tensor((2, 4), "float32"),
             d0: R.Tensor((2, 6), "float32"), d1: R.Tensor((2, 6), "float32")):
        with R.dataflow():
            xt = R.permute_dims(x, [0, 2, 1])
            per_step = R.matmul(xt, g)                       # (5, 8, 6): five weight-sized copies
            wt_ih = R.collapse_sum_to(per_step, R.shape([8, 6]))
            w_ih = R.permute_dims(wt_ih)                      # (6, 8)
            a0 = R.permute_dims(h0)
            p0 = R.matmul(a0, d0)                            # (4, 6)
            a1 = R.permute_dims(h1)
            p1 = R.matmul(a1, d1)
            wt_hh = R.add(p0, p1)
            w_hh = R.permute_dims(wt_hh)                      # (6, 4)
            R.output(w_ih, w_hh)
        return (w_ih, w_hh)


def test_no_batched_product_and_no_transposed_copy():
    after = _pipeline(RNNWeightGrads)
    text = after["main"].script()
    assert "collapse_sum_to" not in text and "permute_dims" not in text
    assert "(5, 8, 6)" not in text
    rng = np.random.default_rng(0)
    shapes = [(5, 2, 8), (5, 2, 6), (2, 4), (2, 4), (2, 6), (2, 6)]
    args = [rng.standard_normal(s).astype("float32") for s in shapes]
    for got, want in zip(_run_all(after, args), _run_all(RNNWeightGrads, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@tvm.script.ir_module
class LeftAlone:
    @R.function
    def main(x: R.Tensor((5, 2, 8), "float32"), g: R.Tensor((1, 2, 6), "float32"),
             h0: R.Tensor((2, 4), "float32"), d0: R.Tensor((2, 6), "float32")):
        with R.dataflow():
            xt = R.permute_dims(x, [0, 2, 1])
            per_step = R.matmul(xt, g)                        # g broadcast over the steps
            part = R.collapse_sum_to(per_step, R.shape([8, 6]))
            a0 = R.permute_dims(h0)
            p0 = R.matmul(a0, d0)
            s = R.add(p0, p0)                                 # the product is read twice
            t = R.permute_dims(s)
            R.output(part, t)
        return (part, t)


def test_broadcast_or_shared_operands_are_left_alone():
    after = _pipeline(LeftAlone)
    text = after["main"].script()
    assert "collapse_sum_to" in text and text.count("permute_dims") >= 1
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in [(5, 2, 8), (1, 2, 6), (2, 4), (2, 6)]]
    for got, want in zip(_run_all(after, args), _run_all(LeftAlone, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@tvm.script.ir_module
class AmpWeightGrad:
    """Under AMP the batched product is rounded to bf16 and back before the sum."""

    @R.function
    def main(x: R.Tensor((5, 2, 8), "bfloat16"), g: R.Tensor((5, 2, 6), "bfloat16")):
        with R.dataflow():
            xt = R.permute_dims(x, [0, 2, 1])
            per_step = R.matmul(xt, g, out_dtype="float32")
            low = R.astype(per_step, "bfloat16")
            high = R.astype(low, "float32")
            w = R.collapse_sum_to(high, R.shape([8, 6]))
            R.output(w)
        return w


@tvm.script.ir_module
class AmpWeightGradMerged:
    @R.function
    def main(x: R.Tensor((5, 2, 8), "bfloat16"), g: R.Tensor((5, 2, 6), "bfloat16")):
        with R.dataflow():
            x2 = R.reshape(x, R.shape([10, 8]))
            g2 = R.reshape(g, R.shape([10, 6]))
            xt = R.permute_dims(x2)
            total = R.matmul(xt, g2, out_dtype="float32")
            low = R.astype(total, "bfloat16")
            w = R.astype(low, "float32")
            R.output(w)
        return w


def test_casts_between_product_and_sum_are_applied_to_the_one_product():
    after = relax.transform.DeadCodeElimination()(MergeBatchedWeightGrads()(AmpWeightGrad))
    tvm.ir.assert_structural_equal(after, AmpWeightGradMerged)
