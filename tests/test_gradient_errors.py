"""When Relax ``Gradient`` fails, the error names the op whose gradient broke it and gives
TVM's reason in full (roam_tvm/frontend/gradient_errors.py)."""

from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from tvm import relax  # noqa: E402

from roam_tvm.frontend import MissingGradientError, from_torch  # noqa: E402
from roam_tvm.frontend.gradient_errors import explain_gradient_failure, tvm_reason  # noqa: E402


def _where_module():
    """A (1,) parameter broadcast by ``where`` against a (3, 4) and a (5,) mask (T5's shared
    scalar): TVM 0.27's own where gradient has each output's shape, so the two partials of
    the parameter, (3, 4) and (5,), cannot be added."""
    x = relax.Var("x", relax.TensorType((3, 4), "float32"))
    z = relax.Var("z", relax.TensorType((5,), "float32"))
    b = relax.Var("b", relax.TensorType((1,), "float32"))
    zero = relax.const(0.0, "float32")
    bb = relax.BlockBuilder()
    with bb.function("fwd", [x, z, b]):
        with bb.dataflow():
            w1 = bb.emit(relax.op.where(bb.emit(relax.op.greater(x, zero)), x, b))
            w2 = bb.emit(relax.op.where(bb.emit(relax.op.greater(z, zero)), z, b))
            s = bb.emit(relax.op.add(relax.op.sum(w1), relax.op.sum(w2)))
            s = bb.emit_output(s)
        bb.emit_func_output(s)
    return bb.get()


def test_broken_gradient_is_named_with_the_full_reason():
    mod = _where_module()
    b = mod["fwd"].params[2]
    with pytest.raises(Exception) as raw:  # TVM's own where gradient: shapes do not add up
        relax.transform.Gradient("fwd", require_grads=[b])(mod)
    err = explain_gradient_failure(mod, "fwd", [b], raw.value)
    msg = str(err)
    assert "'relax.where'" in msg, msg
    assert tvm_reason(raw.value) in msg and len(tvm_reason(raw.value)) > 40
    assert "register_gradient('relax.where'" in msg
    # TVM's own message names relax.add, which is not the culprit
    assert "relax.add" in str(raw.value)


def test_fixed_where_gradient_passes():
    from roam_tvm.frontend import gradients

    gradients.ensure_registered()
    mod = _where_module()
    with gradients.output_based_gradients():
        relax.transform.Gradient("fwd", require_grads=[mod["fwd"].params[2]])(mod)


def test_missing_gradient_names_the_op():
    class Atan(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.atan(self.l(x))  # relax.atan: no gradient (flip has one now)

    with pytest.raises(MissingGradientError) as err:
        from_torch(Atan(), (torch.randn(2, 4),), (torch.randint(0, 4, (2,)),), quiet=True)
    assert "relax.atan" in str(err.value) and "register_gradient('relax.atan'" in str(err.value)
