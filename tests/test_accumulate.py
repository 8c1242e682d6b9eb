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
    assert sorted(chosen.values()) == [0, 1]  # s2's accumulator is its second operand


def test_shared_or_broadcast_accumulators_are_left_alone():
    chosen = find_accumulations(Unsafe["main"])
    # only s3 = s1 + s2 qualifies through s2 (read once, same shape); s2 (s1 read twice) and s4 do not
    assert list(chosen.values()) == [1]  # s3 = s1 + s2, written into s2


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
