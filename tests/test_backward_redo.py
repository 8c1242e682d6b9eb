"""redo_in_backward: the rewriter behind the casts, elementwise and attention redo passes.

Before/Expected, as TVM's own pass tests: one copy per reading binding, or one shared copy;
recipe values recomputed, other operands read as they are; forward bindings untouched."""
from __future__ import annotations

import pytest
import tvm
from tvm.script import relax as R

from roam_tvm.frontend.backward_redo import backward_vars, redo_in_backward


@tvm.script.ir_module
class Before:
    @R.function
    def main(x: R.Tensor((4,), "float32"), g: R.Tensor((4,), "float32")):
        with R.dataflow():
            e = R.exp(x)
            y = R.add(e, R.const(1.0, "float32"))
            out = R.multiply(y, y)
            a_adjoint = R.multiply(g, y)
            b_adjoint = R.add(a_adjoint, y)
            R.output(out, b_adjoint)
        return (out, b_adjoint)


def _vars(func, *names):
    found = {b.var.name: b.var for block in func.body.blocks for b in block.bindings}
    return {found[n] for n in names}


def test_backward_starts_at_the_first_adjoint():
    func = Before["main"]
    assert {v.name for v in backward_vars(func)} == {"a_adjoint", "b_adjoint"}


def test_a_fresh_copy_per_reading_binding():
    @tvm.script.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((4,), "float32"), g: R.Tensor((4,), "float32")):
            with R.dataflow():
                e = R.exp(x)
                y = R.add(e, R.const(1.0, "float32"))
                out = R.multiply(y, y)
                e_bwd = R.exp(x)
                y_bwd = R.add(e_bwd, R.const(1.0, "float32"))
                a_adjoint = R.multiply(g, y_bwd)
                e_bwd1 = R.exp(x)
                y_bwd1 = R.add(e_bwd1, R.const(1.0, "float32"))
                b_adjoint = R.add(a_adjoint, y_bwd1)
                R.output(out, b_adjoint)
            return (out, b_adjoint)

    func = Before["main"]
    after = redo_in_backward(func, _vars(func, "y"), _vars(func, "y", "e"), shared=False)
    tvm.ir.assert_structural_equal(after, Expected["main"])


def test_one_shared_copy_read_by_every_later_binding():
    @tvm.script.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((4,), "float32"), g: R.Tensor((4,), "float32")):
            with R.dataflow():
                e = R.exp(x)
                y = R.add(e, R.const(1.0, "float32"))
                out = R.multiply(y, y)
                y_bwd = R.add(e, R.const(1.0, "float32"))  # e is not in the recipe: read as kept
                a_adjoint = R.multiply(g, y_bwd)
                b_adjoint = R.add(a_adjoint, y_bwd)
                R.output(out, b_adjoint)
            return (out, b_adjoint)

    func = Before["main"]
    after = redo_in_backward(func, _vars(func, "y"), _vars(func, "y"), shared=True)
    tvm.ir.assert_structural_equal(after, Expected["main"])


def test_a_target_without_a_recipe_is_refused():
    func = Before["main"]
    with pytest.raises(ValueError, match="without a recipe"):
        redo_in_backward(func, _vars(func, "y"), _vars(func, "e"), shared=True)
