"""AccumulateInPlace, first links: a product computed before the other contribution is the
accumulator (a tied embedding: the lm_head's weight gradient must not wait for the lookup's)."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend.accumulate import AccumulateInPlace, find_accumulations

from test_accumulate import _run


@tvm.script.ir_module
class Tied:
    """``w`` is the lm_head and the embedding: its gradient is ``g^T @ h`` (early) + ``u`` (late)."""

    @R.function
    def main(g: R.Tensor((6, 5), "float32"), h: R.Tensor((6, 4), "float32"),
             w: R.Tensor((5, 4), "float32"), e: R.Tensor((5, 4), "float32")):
        with R.dataflow():
            t = R.permute_dims(g)
            p = R.matmul(t, h)          # the lm_head's weight gradient, from the logits gradient g
            dx = R.matmul(g, w)         # the backward goes on through the model
            u = R.multiply(e, R.sum(dx))  # the embedding lookup's gradient, at the very end
            s = R.add(u, p)
            R.output(s)
        return s


@tvm.script.ir_module
class LateFirst:
    """The other contribution comes first: the product is the later one and is left alone."""

    @R.function
    def main(g: R.Tensor((6, 5), "float32"), h: R.Tensor((6, 4), "float32"), e: R.Tensor((5, 4), "float32")):
        with R.dataflow():
            u = R.multiply(e, e)
            t = R.permute_dims(g)
            p = R.matmul(t, h)
            s = R.add(p, u)
            R.output(s)
        return s


@tvm.script.ir_module
class TwoProducts:
    """``q`` (fresh, later) + ``p`` (product, earlier): ``q`` is added into ``p``, not ``p`` into ``q``."""

    @R.function
    def main(g: R.Tensor((6, 5), "float32"), h: R.Tensor((6, 4), "float32"),
             a: R.Tensor((5, 3), "float32"), b: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            t = R.permute_dims(g)
            p = R.matmul(t, h)
            q = R.matmul(a, b)
            s = R.add(q, p)
            R.output(s)
        return s


def test_the_earlier_product_is_the_accumulator():
    chosen = find_accumulations(Tied["main"])
    assert list(chosen.values()) == [(1, None, None)]  # s = u + p: written into p (argument 1)
    assert find_accumulations(LateFirst["main"]) == {}
    (index, piece, product), = find_accumulations(TwoProducts["main"]).values()
    assert index == 1 and piece is None and product[0] == "NN"  # q's product computed into p


def test_the_product_runs_unfused_and_values_are_bit_identical():
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype("float32") for s in [(6, 5), (6, 4), (5, 4), (5, 4)]]
    after = relax.transform.DeadCodeElimination()(AccumulateInPlace()(Tied))
    np.testing.assert_array_equal(_run(after, args), _run(Tied, args))  # u + p == p + u exactly
    fused = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                      relax.transform.FuseOps(), relax.transform.FuseTIR()])(after)
    text = fused["main"].script()
    # the product is its own kernel (not an epilogue waiting for u), u is added into it in place
    assert "R.call_tir_inplace(accumulate_float32_2d, (p, u)" in text
    assert not any("matmul" in gv.name_hint and "add" in gv.name_hint for gv in fused.functions)
