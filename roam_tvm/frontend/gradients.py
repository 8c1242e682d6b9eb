"""Gradients that TVM 0.27 lacks, registered from Python with ``register_gradient``.

Importing this module registers them once (``ensure_registered``). Each one is
checked against torch autograd by ``tests/test_frontend_gradients.py``.

* ``relax.squeeze``: reshape the output gradient back to the input shape.
* ``relax.strided_slice``: positive strides; interleave zeros for strides > 1,
  then pad (or trim) to the input extent on each sliced axis.
* ``relax.nn.gelu`` (erf form) and ``relax.nn.gelu_tanh``: closed-form derivatives.
* ``relax.erf``, ``relax.rsqrt``, ``relax.square``, ``relax.clip``, ``relax.nn.leakyrelu``:
  closed-form derivatives (hit by decomposed norms / activations); ``clip``'s
  reads its output, for the reason given below for relu.
* ``relax.nn.layer_norm``, ``relax.nn.batch_norm`` and ``relax.nn.rms_norm``: closed form in
  :mod:`.norm_grad`, reading only the input and gamma (the norms stay whole
  through ``Gradient`` and are decomposed after it).

:func:`output_based_gradients` swaps one of TVM's own, for the duration of our
``Gradient`` call only: ``relax.nn.relu``'s gradient reads relu's *output*
(``dy * (y > 0)``, as PyTorch's ``threshold_backward`` does) instead of its
input. The output is kept for the next layer's weight gradient anyway, so the
input (a normalisation or residual-add result) can die right after the forward
pass instead of living until the backward reaches it. The two agree except at
an input of exactly 0, where TVM's passes the gradient and PyTorch's (and ours)
does not.
"""

from __future__ import annotations

import contextlib
import math

import tvm
from tvm import relax
from tvm.relax import op as R
from tvm.relax.op import register_gradient
from tvm.relax.op.grad import no_grad

from .grad_fixes import GRADS as _FIXED_GRADS
from .grad_index import GRADS as _INDEX_GRADS
from .grad_movement import GRADS as _MOVEMENT_GRADS
from .grad_conv import FIXED_GRADS as _CONV_FIXED, GRADS as _CONV_GRADS
from .grad_conv3d import GRADS as _CONV3D_GRADS
from .grad_reduce import GRADS as _REDUCE_GRADS
from .grad_resize import GRADS as _RESIZE_GRADS
from .grad_nn import GRADS as _NN_GRADS
from .norm_grad import GRADS as _NORM_GRADS
from .stop_gradient import GRADS as _STOP_GRADS
from .relax_shapes import static_shape as _shape

_DONE = False



def _dtype(expr):
    return expr.ty.dtype


def _const(v, dtype):
    return relax.const(v, dtype)


def _squeeze_grad(orig_var, orig_call, output_grad, ctx):
    return [R.reshape(output_grad, orig_call.args[0].ty.shape)]


def _strided_slice_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    in_shape = _shape(x)
    out_shape = _shape(orig_var)
    args = orig_call.args

    def tup(e):
        if e is None:
            return None
        if isinstance(e, relax.Tuple):
            return [int(f.value) for f in e.fields]
        if isinstance(e, relax.ShapeExpr):
            return [int(v) for v in e.values]
        if hasattr(e, "data"):
            return [int(v) for v in e.data.numpy().tolist()]
        raise ValueError(f"strided_slice gradient: non-constant argument {e}")

    axes = tup(args[1])
    begin = tup(args[2])
    strides = tup(args[4]) if len(args) > 4 and args[4] is not None else [1] * len(axes)
    g = output_grad
    for ax, b, s in zip(axes, begin, strides):
        ax = ax % len(in_shape)
        n = in_shape[ax]
        k = out_shape[ax]
        if s <= 0:
            raise ValueError("strided_slice gradient: only positive strides are supported")
        b = b + n if b < 0 else b
        b = min(max(b, 0), n)
        if k == 0:
            continue
        cur = list(_shape_of(ctx, g))
        if s > 1:
            # (.., k, ..) -> (.., k, 1, ..) -> pad to (.., k, s, ..) -> (.., k*s, ..)
            g = ctx.normalize(R.expand_dims(g, ax + 1))
            pw = [0] * (2 * (len(cur) + 1))
            pw[2 * (ax + 1) + 1] = s - 1
            g = ctx.normalize(R.nn.pad(g, pw))
            cur2 = cur[:ax] + [k * s] + cur[ax + 1:]
            g = ctx.normalize(R.reshape(g, cur2))
            cur = cur2
        length = cur[ax]
        after = n - b - length
        if after < 0:
            g = ctx.normalize(R.strided_slice(g, [ax], [0], [length + after]))
            after = 0
        pw = [0] * (2 * len(cur))
        pw[2 * ax] = b
        pw[2 * ax + 1] = after
        if b or after:
            g = ctx.normalize(R.nn.pad(g, pw))
    return [g] + [no_grad(a) for a in orig_call.args[1:]]


def _shape_of(ctx, e):
    e = ctx.normalize(e)
    return [int(v) for v in e.ty.shape.values]


_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    dt = _dtype(x)
    cdf = R.multiply(_const(0.5, dt), R.add(_const(1.0, dt), R.erf(R.multiply(x, _const(1 / _SQRT_2, dt)))))
    pdf = R.multiply(_const(_INV_SQRT_2PI, dt),
                     R.exp(R.multiply(_const(-0.5, dt), R.multiply(x, x))))
    return [R.multiply(output_grad, R.add(cdf, R.multiply(x, pdf)))]


def _gelu_tanh_grad(orig_var, orig_call, output_grad, ctx):
    # y = 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2/pi)
    x = orig_call.args[0]
    dt = _dtype(x)
    c = math.sqrt(2.0 / math.pi)
    x2 = R.multiply(x, x)
    u = R.multiply(_const(c, dt), R.add(x, R.multiply(_const(0.044715, dt), R.multiply(x2, x))))
    t = ctx.normalize(R.tanh(u))
    du = R.multiply(_const(c, dt), R.add(_const(1.0, dt), R.multiply(_const(3 * 0.044715, dt), x2)))
    sech2 = R.subtract(_const(1.0, dt), R.multiply(t, t))
    d = R.add(R.multiply(_const(0.5, dt), R.add(_const(1.0, dt), t)),
              R.multiply(R.multiply(_const(0.5, dt), x), R.multiply(sech2, du)))
    return [R.multiply(output_grad, d)]


def _erf_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    dt = _dtype(x)
    return [R.multiply(output_grad, R.multiply(_const(2.0 / math.sqrt(math.pi), dt),
                                               R.exp(R.negative(R.multiply(x, x)))))]


def _rsqrt_grad(orig_var, orig_call, output_grad, ctx):
    # d/dx x^-1/2 = -1/2 x^-3/2 = -0.5 * y^3
    dt = _dtype(orig_var)
    y = orig_var
    return [R.multiply(output_grad, R.multiply(_const(-0.5, dt), R.multiply(y, R.multiply(y, y))))]


def _square_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    return [R.multiply(output_grad, R.multiply(_const(2.0, _dtype(x)), x))]


def _clip_grad(orig_var, orig_call, output_grad, ctx):
    # From the output, like relu's (see the module docstring): lo < clip(x) < hi exactly when
    # lo < x < hi, which is also where torch's hardtanh_backward passes the gradient.
    y = orig_var
    lo, hi = orig_call.args[1], orig_call.args[2]
    dt = _dtype(y)
    lo_v = relax.const(float(lo.value), dt) if hasattr(lo, "value") else lo
    hi_v = relax.const(float(hi.value), dt) if hasattr(hi, "value") else hi
    mask = R.logical_and(R.greater(y, lo_v), R.less(y, hi_v))
    # min/max are PrimValues: no gradient flows to them
    return [R.where(mask, output_grad, R.zeros_like(output_grad))] + [
        no_grad(a) for a in orig_call.args[1:]]


def _leakyrelu_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    dt = _dtype(x)
    alpha = float(orig_call.attrs.alpha)
    return [R.where(R.greater(x, _const(0.0, dt)), output_grad,
                    R.multiply(output_grad, _const(alpha, dt)))]


def _relu_grad_from_output(orig_var, orig_call, output_grad, ctx):
    zero = _const(0.0, _dtype(orig_var))
    return [R.where(R.greater(orig_var, zero), output_grad, zero)]


def _silu_grad_from_input(orig_var, orig_call, output_grad, ctx):
    """``dy * s * (1 + x * (1 - s))``, ``s = sigmoid(x)``: reads ``x`` only, as PyTorch's
    ``silu_backward`` does. TVM's reads the output too; under autocast that is a float32
    tensor nothing else keeps (the gate multiplies a bfloat16 copy of it)."""
    x = orig_call.args[0]
    one = _const(1.0, _dtype(x))
    s = R.sigmoid(x)
    return [R.multiply(output_grad,
                       R.multiply(s, R.add(one, R.multiply(x, R.subtract(one, s)))))]


# op -> gradient that reads the op's output instead of its input (see the module docstring),
# or, for silu, the input only instead of both
_OUTPUT_BASED = {"relax.nn.relu": _relu_grad_from_output, "relax.nn.silu": _silu_grad_from_input}
# swapped in with them: TVM's where / concat / split / cumsum / take gradients, fixed
# (grad_fixes.py)
_SWAPPED = {**_OUTPUT_BASED, **_FIXED_GRADS}
# and conv2d's, right for dilated convolutions too (grad_conv.py)
_SWAPPED.update(_CONV_FIXED)


@contextlib.contextmanager
def output_based_gradients():
    """Within the block, the ops in ``_OUTPUT_BASED`` take their gradient from their output,
    and ``where`` / ``concat`` / ``split`` / ``cumsum`` / ``take`` take the fixed ones of
    :mod:`.grad_fixes`.

    TVM's own registrations are restored on exit, so other users of
    ``relax.transform.Gradient`` in the process are unaffected.
    """
    saved = {}
    try:
        for name, fn in _SWAPPED.items():
            op = tvm.ir.Op.get(name)
            saved[name] = op.get_attr("FPrimalGradient")
            op.reset_attr("FPrimalGradient")
            register_gradient(name, fn)
        yield
    finally:
        for name, fn in saved.items():
            op = tvm.ir.Op.get(name)
            op.reset_attr("FPrimalGradient")
            if fn is not None:
                register_gradient(name, fn)


_GRADS = {
    "relax.squeeze": _squeeze_grad,
    "relax.strided_slice": _strided_slice_grad,
    "relax.nn.gelu": _gelu_grad,
    "relax.nn.gelu_tanh": _gelu_tanh_grad,
    "relax.erf": _erf_grad,
    "relax.rsqrt": _rsqrt_grad,
    "relax.square": _square_grad,
    "relax.clip": _clip_grad,
    "relax.nn.leakyrelu": _leakyrelu_grad,
    # layer_norm / batch_norm / rms_norm (see norm_grad.py): only when step.py keeps them whole
    # through Gradient; each reads x and gamma only
    **_NORM_GRADS,
    # R.grad.no_grad as a stop-gradient (stop_gradient.py)
    **_STOP_GRADS,
    # pad, group_norm, nearest resize2d (grad_nn.py); index_put, scatter, gather, topk
    # (grad_index.py)
    **_NN_GRADS,
    **_INDEX_GRADS,
    # flip (grad_movement.py); conv1d, conv2d_transpose (grad_conv.py); max, min,
    # adaptive_avg_pool2d (grad_reduce.py)
    **_MOVEMENT_GRADS,
    **_CONV_GRADS,
    **_CONV3D_GRADS,  # conv3d (grad_conv3d.py)
    **_REDUCE_GRADS,
    # resize2d: bilinear here, nearest passed on to grad_nn's (grad_resize.py)
    **_RESIZE_GRADS,
}


def has_gradient(op_name: str) -> bool:
    op = tvm.ir.Op.get(op_name)
    try:
        return op.get_attr("FPrimalGradient") is not None
    except Exception:  # pragma: no cover
        return False


def ensure_registered() -> None:
    """Register the missing gradients (idempotent; never overrides TVM's own)."""
    global _DONE
    if _DONE:
        return
    for name, fn in _GRADS.items():
        try:
            if has_gradient(name):
                continue
            register_gradient(name, fn)
        except Exception:  # pragma: no cover - op missing in this TVM build
            pass
    _DONE = True
