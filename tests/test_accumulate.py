"""AccumulateInPlace: chains of same-shape adds after the first link become in-place adds."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend.accumulate import AccumulateInPlace, find_accumulations


@tvm.script.ir_module
class Chain:
    @R.function
    def main(a: R.Tensor((4, 3), "float32"), b: R.Tensor((4, 3), "float32"),
             c: R.Tensor((4, 3), "float32"), d: R.Tensor((4, 3), "float32")):
        with R.dataflow():
            s1 = R.add(a, b)
            s2 = R.add(c, s1)  # the accumulator may be either operand
            s3 = R.add(s2, d)
            R.output(s3)
        return s3


@tvm.script.ir_module
class Unsafe:
    @R.function
    def main(a: R.Tensor((4, 3), "float32"), b: R.Tensor((4, 3), "float32"), c: R.Tensor((3,), "float32")):
        with R.dataflow():
            s1 = R.add(a, b)
            s2 = R.add(s1, b)   # s1 is read again below: not safe to overwrite
            s3 = R.add(s1, s2)
            s4 = R.add(s3, c)   # broadcasting: not an accumulation
            t = R.add(a, b)     # the first link of a chain reads a parameter: never in place
            R.output(s4, t)
        return (s4, t)


def test_every_link_after_the_first_is_chosen():
    chosen = find_accumulations(Chain["main"])
    assert len(chosen) == 2
    assert sorted(chosen.values()) == [(0, None, None), (1, None, None)]  # s2's accumulator is its second operand


def test_shared_or_broadcast_accumulators_are_left_alone():
    chosen = find_accumulations(Unsafe["main"])
    # only s3 = s1 + s2 qualifies through s2 (read once, same shape); s2 (s1 read twice) and s4 do not
    assert list(chosen.values()) == [(1, None, None)]  # s3 = s1 + s2, written into s2


def _run(mod, args):
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x) for x in args])
    return out.numpy()


def test_values_unchanged_and_fuse_ops_keeps_the_links_apart():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 3)).astype("float32") for _ in range(4)]
    after = AccumulateInPlace()(Chain)
    text = after.script()
    assert text.count("R.call_tir_inplace") == 2 and '"op_pattern": 8' in text
    np.testing.assert_array_equal(_run(after, args), _run(Chain, args))
    fused = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                      relax.transform.FuseOps(), relax.transform.FuseTIR()])(after)
    assert fused["main"].script().count("R.call_tir_inplace") == 2


@tvm.script.ir_module
class FromConstants:
    @R.function
    def main(x: R.Tensor((2, 2), "int64")):
        with R.dataflow():
            c = R.ones(R.shape([2, 2]), "int64")
            s1 = R.add(c, c)        # constants only: FoldConstant makes every link a constant
            s2 = R.add(s1, c)
            s3 = R.add(s2, c)
            y = R.add(s3, x)
            R.output(y)
        return y


def test_sums_of_constants_are_never_written_in_place():
    assert find_accumulations(FromConstants["main"]) == {}
    args = [np.ones((2, 2), dtype="int64")]
    after = AccumulateInPlace()(FromConstants)
    np.testing.assert_array_equal(_run(after, args), _run(FromConstants, args))


@tvm.script.ir_module
class SliceGrads:
    """The gradient of per-step slices of one (steps, batch, features) tensor, as Gradient writes it."""

    @R.function
    def main(g0: R.Tensor((2, 3), "float32"), g1: R.Tensor((2, 3), "float32"),
             g2: R.Tensor((2, 3), "float32"), g3: R.Tensor((1, 2, 3), "float32")):
        with R.dataflow():
            a0 = R.expand_dims(g0, 0)
            a1 = R.expand_dims(g1, 0)
            a2 = R.expand_dims(g2, 0)
            p0 = R.nn.pad(a0, [0, 3, 0, 0, 0, 0])
            p1 = R.nn.pad(a1, [1, 2, 0, 0, 0, 0])
            s1 = R.add(p0, p1)
            p2 = R.nn.pad(a2, [2, 1, 0, 0, 0, 0])
            s2 = R.add(s1, p2)
            p3 = R.nn.pad(g3, [3, 0, 0, 0, 1, 0])  # two padded axes: (1, 2, 3) -> (4, 2, 4)
            q = R.nn.pad(s2, [0, 0, 0, 0, 0, 1])
            s3 = R.add(q, q)
            s4 = R.add(s3, p3)
            R.output(s4)
        return s4


@tvm.script.ir_module
class PadNotZero:
    @R.function
    def main(a: R.Tensor((4, 3), "float32"), b: R.Tensor((4, 3), "float32"), c: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            s1 = R.add(a, b)
            p = R.nn.pad(c, [1, 0, 0, 0], pad_value=1.0)  # ones outside the slice: a plain add
            s2 = R.add(s1, p)
            r = R.nn.pad(c, [0, 1, 0, 0])
            s3 = R.add(s2, r)
            t = R.add(r, a)  # r read twice: its pad must stay, so the add stays a full one
            R.output(s3, t)
        return (s3, t)


def test_padded_contributions_add_into_their_slice_only():
    chosen = find_accumulations(SliceGrads["main"])
    offsets = sorted(piece[1] for _, piece, _ in chosen.values() if piece is not None)
    assert offsets == [(2, 0, 0), (3, 0, 1)]
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in [(2, 3), (2, 3), (2, 3), (1, 2, 3)]]
    after = relax.transform.DeadCodeElimination()(AccumulateInPlace()(SliceGrads))
    text = after.script()
    assert "slice_accumulate" in text and text.count("R.nn.pad") == 3  # p2 and p3 are gone
    np.testing.assert_array_equal(_run(after, args), _run(SliceGrads, args))


def test_pads_that_are_not_zero_or_are_shared_stay_full_adds():
    chosen = find_accumulations(PadNotZero["main"])
    assert sorted(chosen.values(), key=str) == [(0, None, None), (0, None, None)]
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype("float32") for s in [(4, 3), (4, 3), (3, 3)]]
    after = AccumulateInPlace()(PadNotZero)
    for got, want in zip(_run_all(after, args), _run_all(PadNotZero, args)):
        np.testing.assert_array_equal(got, want)


def _run_all(mod, args):
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return [o.numpy() for o in vm["main"](*[tvm.runtime.tensor(x) for x in args])]


@tvm.script.ir_module
class WeightGradSum:
    """A weight used at three steps: its gradient is a sum of three products."""

    @R.function
    def main(g0: R.Tensor((5, 4), "float32"), g1: R.Tensor((5, 4), "float32"),
             g2: R.Tensor((5, 4), "float32"), h: R.Tensor((5, 3), "float32"),
             w: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            t0 = R.permute_dims(g0)
            m0 = R.matmul(t0, h)
            t1 = R.permute_dims(g1)
            m1 = R.matmul(t1, h)
            s1 = R.add(m0, m1)          # first link: written into m0's fresh result
            t2 = R.permute_dims(g2)
            m2 = R.matmul(t2, h)
            s2 = R.add(s1, m2)
            d = R.matmul(g2, w)         # an NN product, added into a sum of its own
            e = R.add(g0, g1)
            s3 = R.add(e, d)
            R.output(s2, s3)
        return (s2, s3)


def _with_tn_kernels(mod):
    from roam_tvm.frontend.nt_matmul import FuseNTMatmul

    return relax.transform.DeadCodeElimination()(FuseNTMatmul()(mod))


def test_products_are_added_into_the_accumulator_by_their_own_kernel():
    mod = _with_tn_kernels(WeightGradSum)
    chosen = find_accumulations(mod["main"], mod)
    layouts = sorted(p[0] for _, _, p in chosen.values() if p is not None)
    assert layouts == ["NN", "TN", "TN"]
    after = relax.transform.DeadCodeElimination()(AccumulateInPlace()(mod))
    text = after["main"].script()
    # m0 stays (the chain's accumulator), m1 and m2 and d are computed into their sums
    assert text.count("matmul_accumulate") == 3 and text.count("R.call_tir(TN_matmul,") == 1
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype("float32") for s in [(5, 4)] * 3 + [(5, 3), (4, 4)]]
    for got, want in zip(_run_all(after, args), _run_all(WeightGradSum, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_product_that_reads_its_accumulator_is_not_fused():
    @tvm.script.ir_module
    class ReadsAcc:
        @R.function
        def main(a: R.Tensor((3, 3), "float32"), b: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                s0 = R.add(a, b)
                p = R.matmul(s0, s0)   # s0 is read twice: never an accumulator
                s1 = R.add(s0, p)
                R.output(s1)
            return s1

    assert find_accumulations(ReadsAcc["main"], ReadsAcc) == {}


def test_matmul_accumulate_compiles_for_cuda():
    import shutil

    import pytest

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    mod = AccumulateInPlace()(_with_tn_kernels(WeightGradSum))
    from roam_tvm.runtime import build

    build(mod, "cuda")
