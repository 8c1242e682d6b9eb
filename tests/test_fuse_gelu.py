"""fuse_tanh_gelu: the explicit tanh-GELU formula becomes one R.nn.gelu_tanh before autodiff."""
from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.frontend.fuse_gelu import fuse_tanh_gelu  # noqa: E402


def _dce(func):
    func = func.with_attr("global_symbol", "main")  # compare bodies, not the functions' names
    return relax.transform.DeadCodeElimination()(tvm.IRModule({"main": func}))["main"]


@R.function
def before(x: R.Tensor((4, 8), "float32")):
    # the ops torch.export emits for HuggingFace's gelu_new, in its order
    with R.dataflow():
        a = R.multiply(x, R.const(0.5, "float32"))
        b = R.power(x, R.const(3.0, "float32"))
        c = R.multiply(b, R.const(0.044714998453855515, "float32"))
        d = R.add(x, c)
        e = R.multiply(d, R.const(0.79788458347320557, "float32"))
        t = R.tanh(e)
        u = R.add(t, R.const(1.0, "float32"))
        o = R.multiply(a, u)
        R.output(o)
    return o


@R.function
def expected(x: R.Tensor((4, 8), "float32")):
    with R.dataflow():
        o = R.nn.gelu_tanh(x)
        R.output(o)
    return o


@R.function
def commuted(x: R.Tensor((4, 8), "float32")):
    # the same formula with every commutative operand swapped
    with R.dataflow():
        a = R.multiply(R.const(0.5, "float32"), x)
        b = R.power(x, R.const(3.0, "float32"))
        c = R.multiply(R.const(0.044715, "float32"), b)
        d = R.add(c, x)
        e = R.multiply(R.const(0.7978845608, "float32"), d)
        t = R.tanh(e)
        u = R.add(R.const(1.0, "float32"), t)
        o = R.multiply(u, a)
        R.output(o)
    return o


@R.function
def not_gelu(x: R.Tensor((4, 8), "float32")):
    # a different coefficient: not GELU, must stay as written
    with R.dataflow():
        a = R.multiply(x, R.const(0.5, "float32"))
        b = R.power(x, R.const(3.0, "float32"))
        c = R.multiply(b, R.const(0.1, "float32"))
        d = R.add(x, c)
        e = R.multiply(d, R.const(0.79788458347320557, "float32"))
        t = R.tanh(e)
        u = R.add(t, R.const(1.0, "float32"))
        o = R.multiply(a, u)
        R.output(o)
    return o


def test_gelu_new_becomes_gelu_tanh():
    tvm.ir.assert_structural_equal(_dce(fuse_tanh_gelu(before)), _dce(expected))


def test_commuted_operands_are_fused_too():
    tvm.ir.assert_structural_equal(_dce(fuse_tanh_gelu(commuted)), _dce(expected))


def test_other_coefficients_are_left_alone():
    tvm.ir.assert_structural_equal(_dce(fuse_tanh_gelu(not_gelu)), _dce(not_gelu))


def test_values_match_the_formula():
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype("float32") * 3
    outs = []
    for f in (_dce(before), _dce(fuse_tanh_gelu(before))):
        ex = tvm.compile(tvm.IRModule({"main": f}), "llvm")
        vm = relax.VirtualMachine(ex, tvm.cpu())
        outs.append(vm["main"](tvm.runtime.tensor(x)).numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
