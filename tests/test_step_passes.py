"""FuseNTMatmul (nt_matmul.py) and InlineTupleVars (flatten_tuples.py), run on the finished
step by step.py."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.frontend.flatten_tuples import InlineTupleVars  # noqa: E402
from roam_tvm.frontend.nt_matmul import FuseNTMatmul  # noqa: E402


@I.ir_module
class SharedTranspose:
    """One transposed weight feeds two matmuls (the RNN importer's W_hh^T): TVM 0.27's
    FuseTransposeMatmul swaps the operands here and fails shape inference."""

    @R.function
    def main(x: R.Tensor((2, 16), "float32"), h: R.Tensor((2, 8), "float32"),
             w: R.Tensor((8, 16), "float32"), u: R.Tensor((8, 8), "float32")):
        with R.dataflow():
            wt = R.permute_dims(w)
            ut = R.permute_dims(u)
            a = R.matmul(x, wt)
            h1 = R.tanh(R.add(a, R.matmul(h, ut)))
            h2 = R.tanh(R.add(a, R.matmul(h1, ut)))
            R.output(h2)
        return h2


def test_fuse_nt_matmul_shared_transpose_numerics():
    mod = relax.transform.DeadCodeElimination()(FuseNTMatmul()(SharedTranspose))
    text = mod.script()
    assert "permute_dims" not in text and text.count("NT_matmul") >= 2
    rng = np.random.default_rng(0)
    x, h = rng.standard_normal((2, 16), "float32"), rng.standard_normal((2, 8), "float32")
    w, u = rng.standard_normal((8, 16), "float32"), rng.standard_normal((8, 8), "float32")
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(a) for a in (x, h, w, u)]).numpy()
    a = x @ w.T
    want = np.tanh(a + np.tanh(a + h @ u.T) @ u.T)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@I.ir_module
class WeightGradient:
    """A linear layer's weight gradient dy^T @ x, plain and batched (transpose on the left)."""

    @R.function
    def main(g: R.Tensor((6, 4), "float32"), x: R.Tensor((6, 3), "float32"),
             gb: R.Tensor((2, 5, 4), "float32"), xb: R.Tensor((2, 5, 3), "float32")):
        with R.dataflow():
            gt = R.permute_dims(g)
            gbt = R.permute_dims(gb, axes=[0, 2, 1])
            out = (R.matmul(gt, x), R.matmul(gbt, xb))
            R.output(out)
        return out


def test_fuse_tn_matmul_weight_gradient_numerics():
    mod = relax.transform.DeadCodeElimination()(FuseNTMatmul()(WeightGradient))
    text = mod.script()
    assert "permute_dims" not in text and text.count("TN_matmul") >= 2
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s, "float32") for s in ((6, 4), (6, 3), (2, 5, 4), (2, 5, 3))]
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(a) for a in args])
    g, x, gb, xb = args
    np.testing.assert_allclose(got[0].numpy(), g.T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1].numpy(), gb.transpose(0, 2, 1) @ xb, rtol=1e-5, atol=1e-5)


@I.ir_module
class TupleBefore:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), y: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            t = (x, y)
            n = (t, x)
            c = R.concat(t, axis=1)
            d = n[0][1]
            e = R.add(R.sum(c), R.sum(d))
            R.output(e)
        return e


@I.ir_module
class TupleExpected:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), y: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            c = R.concat((x, y), axis=1)
            e = R.add(R.sum(c), R.sum(y))
            R.output(e)
        return e


def test_inline_tuple_vars():
    got = relax.transform.DeadCodeElimination()(InlineTupleVars()(TupleBefore))
    want = relax.transform.DeadCodeElimination()(TupleExpected)
    tvm.ir.assert_structural_equal(relax.transform.CanonicalizeBindings()(got),
                                   relax.transform.CanonicalizeBindings()(want))
