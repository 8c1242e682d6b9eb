"""Stop-gradient analysis (roam_tvm/frontend/stop_gradient.py): Before/Expected IR, and
``linear(x) * torch.arange(8.)`` through a whole training step against torch."""

from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from tvm import relax  # noqa: E402
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402
from roam_tvm.frontend.stop_gradient import (ActiveVars, insert_stop_gradients,  # noqa: E402
                                             remove_stop_gradients)
from test_numerics import compare_step  # noqa: E402


@I.ir_module
class Before:
    @R.function
    def main(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 8), "float32")):
        with R.dataflow():
            h = R.matmul(x, w)
            r = R.arange(0, 8, 1, dtype="float32")
            y = R.multiply(h, r)
            m = R.greater(h, R.const(0.0, "float32"))  # bool, reads a parameter
            z = R.where(m, y, R.const(0.0, "float32"))
            s = R.sum(z)
            R.output(s)
        return s


@I.ir_module
class Expected:
    @R.function
    def main(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 8), "float32")):
        with R.dataflow():
            h = R.matmul(x, w)
            r = R.arange(0, 8, 1, dtype="float32")
            r_sg = R.grad.no_grad(r)
            y = R.multiply(h, r_sg)
            m = R.greater(h, R.const(0.0, "float32"))
            m_sg = R.grad.no_grad(m)
            z = R.where(m_sg, y, R.const(0.0, "float32"))
            s = R.sum(z)
            R.output(s)
        return s


def test_active_vars():
    f = Before["main"]
    info = ActiveVars(f, [f.params[1]])
    names = {v.name for v in info.active}
    assert names == {"w", "h", "y", "z", "s"}, names


def test_insert_stop_gradients():
    f = Before["main"]
    got = insert_stop_gradients(f, [f.params[1]])
    tvm.ir.assert_structural_equal(got, Expected["main"])


def test_remove_stop_gradients_restores_the_forward():
    f = Expected["main"]
    tvm.ir.assert_structural_equal(remove_stop_gradients(f), Before["main"])


def test_no_parameter_no_stop():
    """Without trainable parameters nothing is active, so nothing is wrapped."""
    f = Before["main"]
    tvm.ir.assert_structural_equal(insert_stop_gradients(f, []), f)


def test_gradient_runs_on_the_wrapped_function():
    from roam_tvm.frontend import gradients

    gradients.ensure_registered()
    f = insert_stop_gradients(Before["main"], [Before["main"].params[1]])
    mod = tvm.IRModule({"main": f})
    mod = relax.transform.Gradient("main", require_grads=[f.params[1]])(mod)
    text = remove_stop_gradients(mod["main_adjoint"]).script()
    assert "no_grad" not in text and "arange" in text


class _ArangeNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.lin(x) * torch.arange(8.0, dtype=x.dtype)
        # int arithmetic and an argmax index on the parameter path carry no gradient
        k = torch.argmax(h, dim=-1, keepdim=True)
        return self.out(h) + torch.gather(h, 1, k)


def test_linear_times_arange_float64():
    torch.manual_seed(0)
    m = _ArangeNet().double()
    x = torch.randn(4, 8, dtype=torch.float64)
    y = torch.randint(0, 3, (4,))
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=1.0), dtype="float64")
