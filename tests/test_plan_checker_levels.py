"""The plan checker compares functions at different levels: a reference still in ``R.call_tir`` form
(before CallTIRRewrite) against TVM's lowered and planned versions of it."""
from __future__ import annotations

import tvm
from plan_checker_lib import Lib, add, add1, inc, neg
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from roam_tvm.verify import check_plan


@R.function
def high_level(x: R.Tensor((4,), "float32")):
    a = R.call_tir(neg, (x,), out_ty=R.Tensor((4,), "float32"))
    b = R.call_tir(add1, (a,), out_ty=R.Tensor((4,), "float32"))
    a2 = R.call_tir_inplace(inc, (a,), [0], out_ty=R.Tensor((4,), "float32"))
    c = R.call_tir(add, (a2, b), out_ty=R.Tensor((4,), "float32"))
    return c


@R.function
def high_level_other_order(x: R.Tensor((4,), "float32")):
    a = R.call_tir(neg, (x,), out_ty=R.Tensor((4,), "float32"))
    a2 = R.call_tir_inplace(inc, (a,), [0], out_ty=R.Tensor((4,), "float32"))
    b = R.call_tir(add1, (a2,), out_ty=R.Tensor((4,), "float32"))
    c = R.call_tir(add, (a2, b), out_ty=R.Tensor((4,), "float32"))
    return c


def _lowered(func):
    mod = tvm.IRModule(dict(Lib.functions.items()))
    mod["main"] = func
    low = relax.transform.CallTIRRewrite()(mod)
    return low, relax.transform.StaticPlanBlockMemory()(low)


def test_call_tir_reference_against_lowered_and_planned():
    low, planned = _lowered(high_level)
    assert check_plan(high_level, low["main"], low) == []
    assert check_plan(high_level, planned["main"], planned) == []


def test_call_tir_reference_against_another_program():
    _, planned = _lowered(high_level_other_order)
    found = check_plan(high_level, planned["main"], planned)
    assert found and "add1" in found[0], found


@I.ir_module
class WithSubroutine:
    @R.function
    def ident(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = WithSubroutine
        y = cls.ident(x)
        return y


def test_relax_subroutine_call_cannot_verify():
    # its result may be its argument itself (as here): treating it as fresh memory would be a guess
    found = check_plan(WithSubroutine["main"], WithSubroutine["main"], WithSubroutine)
    assert len(found) == 1 and found[0].startswith("cannot verify:") and "y = ident(x)" in found[0], found
