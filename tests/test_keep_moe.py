"""What the MoE / cross-entropy step keeps (issue 13, item 5): index_add without index grids,
no step-long constants, cross-entropy's picked log-probability without log_softmax, and the
one-per-row gather gradient without a scatter. Numerics of these gradients are in
test_grad_ops (float64, vs torch autograd) and test_families (tiny MoE vs PyTorch's step)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.relax.expr_functor import PyExprVisitor, visitor  # noqa: E402

from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from roam_tvm.passes import extract_graph  # noqa: E402
from roam_tvm.runtime.pipeline import legalize_passes, library_dispatch_passes  # noqa: E402
from roam_tvm.runtime.splat_constants import SplatConstants  # noqa: E402
from test_numerics import compare_step  # noqa: E402


def _ops(func) -> list[str]:
    names = []

    @visitor
    class _V(PyExprVisitor):
        def visit_call_(self, call):
            if isinstance(call.op, tvm.ir.Op):
                names.append(call.op.name)
            for a in call.args:
                self.visit_expr(a)

    _V().visit_expr(func)
    return names


def _constants(func) -> list:
    found = []

    @visitor
    class _V(PyExprVisitor):
        def visit_generic_const_(self, c):
            found.append(c.value.numpy())

    _V().visit_expr(func)
    return found


def test_splat_constants_fill_at_run_time():
    """zeros / full constants become fill kernels, other constants (a table, an arange)
    stay; same results."""
    x = relax.Var("x", relax.TensorType((4, 6), "float32"))
    table = np.linspace(-1.0, 2.0, 24, dtype="float32").reshape(4, 6)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.add(x, relax.const(np.full((4, 6), 2.5, "float32"))))
            b = bb.emit(relax.op.multiply(a, relax.const(table)))
            ramp = relax.const(np.arange(3, 3 + 2 * 6, 2, dtype="int64").reshape(1, 6))
            c = bb.emit(relax.op.add(b, relax.op.astype(ramp, "float32")))
            out = bb.emit_output(c)
        bb.emit_func_output(out)
    mod = bb.get()
    target = tvm.target.Target("llvm")
    with target:
        plain = tvm.transform.Sequential([relax.transform.LegalizeOps()])(mod)
        splat = SplatConstants()(plain)
    kept = sorted((k for k in _constants(splat["main"]) if k.size > 1), key=lambda k: k.size)
    assert [k.shape for k in kept] == [(1, 6), (4, 6)]  # the ramp and the table, not the 2.5s
    assert np.array_equal(kept[1], table)
    data = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    results = []
    for m in (plain, splat):
        exe = tvm.compile(m, target)
        vm = relax.VirtualMachine(exe, tvm.cpu())
        results.append(vm["main"](tvm.runtime.tensor(data)).numpy())
    np.testing.assert_array_equal(results[0], results[1])


def _fwd_ops(loss):
    torch.manual_seed(0)
    m = torch.nn.Linear(6, 5)
    x, y = torch.randn(4, 6), torch.randint(0, 5, (4,))
    ts = from_torch(m, (x,), (y,), loss=loss, optimizer=SGD(lr=1.0), quiet=True)
    return _ops(ts.mod[ts.func_name]), (m, x, y)


def test_cross_entropy_keeps_no_log_softmax():
    ops, (m, x, y) = _fwd_ops("cross_entropy")
    assert "relax.nn.log_softmax" not in ops
    assert "relax.scatter_elements" not in ops  # the gather's gradient is a where
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=1.0))


def test_log_softmax_read_twice_is_left_alone():
    """Label smoothing reads the log-probabilities twice: the rewrite does not apply."""
    def smoothed(out, y):
        return torch.nn.functional.cross_entropy(out, y, label_smoothing=0.1)

    ops, (m, x, y) = _fwd_ops(smoothed)
    assert "relax.nn.log_softmax" in ops
    compare_step(m, (x,), (y,), smoothed, SGD(lr=1.0))


def test_tiny_moe_no_index_grid_no_step_long_constant_two_logits_tensors():
    """The tiny MoE step: no int64 index grid (index_add is a scatter_nd over an (N, 1)
    index), under 1 KiB of constants, and never three logits-sized tensors live at once."""
    from roam_tvm.zoo import families

    model, inputs, targets = families.moe()[:3]
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    target = tvm.target.Target("llvm")
    with target:
        mod = tvm.transform.Sequential(library_dispatch_passes(target)
                                       + legalize_passes(target, schedule=None))(ts.mod)
    g = extract_graph(mod[ts.func_name], mod, ts.func_name).graph
    tokens, width, vocab = 16, 16, 32
    assert not [t.name for t in g.tensors if t.dtype == "int64" and t.size >= tokens * width * 8]
    assert sum(t.size for t in g.tensors if t.kind == "const") < 1024
    logits = vocab * tokens * 4
    lifetimes = g.lifetimes()
    big = [lifetimes[t] for t in g.allocated if g.tensors[t].size >= logits]
    most = max(sum(a <= j <= b for a, b in big) for j in range(len(g.ops)))
    assert most <= 2, f"{most} logits-sized tensors live at once"
