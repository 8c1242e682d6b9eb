"""Unit tests of backward_elementwise.py's rules on hand-built adjoint-like functions (the
backward starts at the first ``*_adjoint`` binding); its effect on models is in
tests/test_keep_like_pytorch2.py."""
from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402


def _adjoint_like(matmul_reader: bool) -> relax.Function:
    """``y = x * clip(x + 3, 0, 6)`` and a backward (from ``y_adjoint`` on) that reads the
    clip's output in a multiply, and in a matmul too if ``matmul_reader``."""
    from roam_tvm.frontend.backward_elementwise import recompute_elementwise_in_backward

    x = relax.Var("x", relax.TensorType((4, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.clip(relax.op.add(x, relax.const(3.0, "float32")), 0, 6))
            y = bb.emit(relax.op.multiply(x, a))
            g = bb.emit(relax.op.ones((4, 4), "float32"), name_hint="y_adjoint")
            out = bb.emit(relax.op.multiply(g, a))
            if matmul_reader:
                out = bb.emit(relax.op.add(out, relax.op.matmul(a, g)))
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    return recompute_elementwise_in_backward(bb.get()["f"])


def test_redo_only_for_elementwise_readers():
    """The clip is redone from ``x`` (a parameter) for the multiply's read; a matmul reading
    it needs it as a tensor anyway, so then nothing is redone."""
    def clips(f):
        return [b.var.name for blk in f.body.blocks for b in blk.bindings
                if isinstance(b.value, relax.Call) and b.value.op.name == "relax.clip"]

    assert len(clips(_adjoint_like(False))) == 2  # the forward's and the backward's
    assert len(clips(_adjoint_like(True))) == 1


def _two_values_of_a_root(rows) -> relax.Function:
    """``r = softmax(x)`` (a root that is not a parameter), ``exp(r)`` and ``r > 0`` read in
    the backward: redoing both from ``r`` keeps 4 bytes an element instead of 5."""
    from roam_tvm.frontend.backward_elementwise import recompute_elementwise_in_backward

    x = relax.Var("x", relax.TensorType((rows, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", [x]):
        with bb.dataflow():
            r = bb.emit(relax.op.nn.softmax(x))
            e = bb.emit(relax.op.exp(r))
            m = bb.emit(relax.op.greater(r, relax.const(0.5, "float32")))
            g = bb.emit(relax.op.ones_like(x), name_hint="y_adjoint")
            out = bb.emit_output(bb.emit(relax.op.where(m, relax.op.multiply(g, e), g)))
        bb.emit_func_output(out)
    return recompute_elementwise_in_backward(bb.get()["f"])


def test_redo_by_bytes_static_shapes_only():
    """Static shapes: both values redone. A symbolic row count: sizes unknown, nothing is
    redone (and nothing fails)."""
    def n_exp(f):
        return sum(isinstance(b.value, relax.Call) and b.value.op.name == "relax.exp"
                   for blk in f.body.blocks for b in blk.bindings)

    assert n_exp(_two_values_of_a_root(3)) == 2
    assert n_exp(_two_values_of_a_root(tvm.tirx.Var("n", "int64"))) == 1


def _gru_like(keep_n: bool) -> relax.Function:
    """A GRU step's ``d = h - n`` read by the backward's multiply; ``h`` is kept for the
    backward through a reshaped view (as ``W_hh``'s gradient reads it), ``n`` directly when
    ``keep_n``."""
    from roam_tvm.frontend.backward_elementwise import recompute_elementwise_in_backward

    h = relax.Var("h", relax.TensorType((1, 2, 4), "float32"))
    u = relax.Var("u", relax.TensorType((1, 2, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", [h, u]):
        with bb.dataflow():
            hh = bb.emit(relax.op.multiply(h, h))  # the step's own h: not a parameter
            n = bb.emit(relax.op.tanh(relax.op.add(u, hh)))
            d = bb.emit(relax.op.subtract(hh, n))
            view = bb.emit(relax.op.reshape(hh, (2, 4)))
            y = bb.emit(relax.op.add(relax.op.multiply(d, u), n))
            g = bb.emit(relax.op.ones((1, 2, 4), "float32"), name_hint="y_adjoint")
            dz = bb.emit(relax.op.multiply(g, d))
            dw = bb.emit(relax.op.matmul(relax.op.permute_dims(view), relax.op.reshape(dz, (2, 4))))
            out = dw
            if keep_n:
                out = bb.emit(relax.op.add(dw, relax.op.sum(relax.op.multiply(n, g))))
            out = bb.emit_output(out)
        bb.emit_func_output(relax.Tuple([y, out]))
    return recompute_elementwise_in_backward(bb.get()["f"])


def test_redo_one_op_of_kept_tensors():
    """``h - n`` is redone in the backward when both ``h`` (through its view) and ``n`` are
    kept for it anyway; with ``n`` not otherwise read by the backward, keeping ``h - n`` is
    as good as keeping ``n``, so nothing is redone."""
    def n_sub(f):
        return sum(isinstance(b.value, relax.Call) and b.value.op.name == "relax.subtract"
                   for blk in f.body.blocks for b in blk.bindings)

    assert n_sub(_gru_like(True)) == 2
    assert n_sub(_gru_like(False)) == 1
