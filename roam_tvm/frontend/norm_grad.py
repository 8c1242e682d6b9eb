"""Closed-form gradients of ``relax.nn.layer_norm``, ``relax.nn.batch_norm``,
``relax.nn.instance_norm`` and ``relax.nn.rms_norm`` (the last folded from its spelled-out form by :mod:`.fuse_rms_norm`;
see :func:`rms_norm_grad`).

TVM 0.27 registers no gradient for either op; its training flow decomposes them
(``DecomposeOpsForTraining``) into mean, subtract, variance, sqrt, divide,
multiply and add, and autodiff of that chain keeps, besides ``x``, the
normalised ``x_hat`` (the divide's output, read by the gamma multiply's
gradient): one more full-size tensor per norm from the forward to the
backward. PyTorch keeps the input and two small vectors.

Here the norm stays one op through ``Gradient`` (``step.py`` decomposes it
*after* autodiff, so the forward is the same decomposed maths as before), and
its gradient reads only ``x``, ``gamma`` and the per-row (layer norm) or
per-channel (batch norm) mean and variance. The gradient spells those
statistics as the decomposition does, and :func:`share_statistics` then binds
them to the forward's: the backward keeps ``x`` and two small vectors, as
PyTorch does. With ``x_hat = (x - mean) * rstd``, ``g = gamma * dy`` and
``mean_n`` the mean over the normalised elements::

    dx     = rstd * (g - mean_n(g) - x_hat * mean_n(g * x_hat))
    dgamma = sum_other(dy * x_hat)
    dbeta  = sum_other(dy)

Batch norm in training mode is the same with the statistics taken over every
axis but the channel axis; gamma is then constant over each sum, so
``mean_n(g) = gamma * dbeta / n`` and ``mean_n(g * x_hat) = gamma * dgamma / n``
(two reductions, not four). In inference mode
``dx = dy * gamma * rsqrt(running_var + eps)``.

Each use of ``x - mean`` is built as its own expression (not one shared
binding), so that ``FuseOps`` can fuse it into its single consumer instead of
materialising another full-size tensor in the backward.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R
from tvm.relax.op.grad import no_grad
from .relax_shapes import static_shape as _shape



def _const(v: float, dtype: str) -> relax.Expr:
    return relax.const(v, dtype)


def _stats(x: relax.Expr, axes: list[int], eps: float, dtype: str, ctx, keepdims: bool):
    """``(mean, rstd)`` of ``x`` over ``axes``, broadcastable against ``x``.

    Spelled as ``DecomposeOpsForTraining`` spells the forward's (``keepdims`` as there:
    True for layer_norm, False for batch_norm), so that :func:`share_statistics` can
    make the backward read the forward's vectors instead of recomputing them.
    """
    mean = R.mean(x, axis=axes, keepdims=keepdims)
    var = R.variance(x, axis=axes, keepdims=keepdims)
    if not keepdims:
        bshape = [1 if i in axes else d for i, d in enumerate(_shape(x))]
        mean, var = R.reshape(mean, bshape), R.reshape(var, bshape)
    rstd = ctx.normalize(R.rsqrt(R.add(var, _const(eps, dtype))))
    return ctx.normalize(mean), rstd


def _normalised_grad(x, dy, gamma_b, axes, count, mean, rstd, dtype, ctx):
    """``dx`` of ``(x - mean) * rstd * gamma_b`` with statistics over ``axes`` (``count`` terms)."""
    def g():
        # a fresh expression per use, like x - mean (module docstring): fused into each consumer
        return dy if gamma_b is None else R.multiply(dy, gamma_b)
    inv_n = _const(1.0 / count, dtype)
    s1 = ctx.normalize(R.sum(g(), axis=axes, keepdims=True))
    # sum(g * x_hat) = rstd * sum(g * (x - mean)): rstd is constant over the sum
    s2 = ctx.normalize(R.multiply(R.sum(R.multiply(g(), R.subtract(x, mean)), axis=axes,
                                        keepdims=True), rstd))
    x_hat = R.multiply(R.subtract(x, mean), rstd)
    inner = R.subtract(R.subtract(g(), R.multiply(s1, inv_n)),
                       R.multiply(x_hat, R.multiply(s2, inv_n)))
    return R.multiply(rstd, inner)


def _sum_other(e, axes_other, target_shape):
    s = R.sum(e, axis=axes_other, keepdims=False) if axes_other else e
    return R.reshape(s, target_shape)


def layer_norm_grad(orig_var, orig_call, output_grad, ctx):
    """Gradient of ``R.nn.layer_norm(x, gamma, beta, axes, epsilon, center, scale)``."""
    x, gamma, beta = orig_call.args
    attrs = orig_call.attrs
    dtype = str(x.ty.dtype)
    shape = _shape(x)
    nd = len(shape)
    axes = sorted(int(a) % nd for a in attrs.axes)
    other = [i for i in range(nd) if i not in axes]
    count = 1
    for a in axes:
        count *= shape[a]
    eps = float(attrs.epsilon)
    dy = output_grad
    # gamma's dims are x's normalised dims, in order: put 1s at the other axes to broadcast
    bshape = [shape[i] if i in axes else 1 for i in range(nd)]
    gamma_b = ctx.normalize(R.reshape(gamma, bshape)) if attrs.scale else None
    mean, rstd = _stats(x, axes, eps, dtype, ctx, keepdims=True)
    dx = _normalised_grad(x, dy, gamma_b, axes, count, mean, rstd, dtype, ctx)
    g_shape = _shape(gamma)
    if attrs.scale:
        x_hat = R.multiply(R.subtract(x, mean), rstd)
        dgamma = _sum_other(R.multiply(dy, x_hat), other, g_shape)
    else:
        dgamma = R.zeros(g_shape, dtype)
    dbeta = _sum_other(dy, other, _shape(beta)) if attrs.center else R.zeros(_shape(beta), dtype)
    return [dx, dgamma, dbeta]


def rms_norm_grad(orig_var, orig_call, output_grad, ctx):
    """Gradient of ``R.nn.rms_norm(x, w, axes, epsilon)``, reading only ``x`` and ``w``.

    With ``r = rsqrt(mean_n(x^2) + eps)`` recomputed (a per-row vector) and ``h = dy * w``::

        dx = r * h - x * r^3 * mean_n(h * x)
        dw = sum_other(dy * x * r)

    PyTorch's autograd of the same formula keeps ``x * r`` besides ``x`` (module
    :mod:`.fuse_rms_norm`); here nothing activation-sized but ``x`` is read.
    """
    x, w = orig_call.args
    dtype = str(x.ty.dtype)
    shape = _shape(x)
    nd = len(shape)
    axes = sorted(int(a) % nd for a in orig_call.attrs.axes)
    other = [i for i in range(nd) if i not in axes]
    count = 1
    for a in axes:
        count *= shape[a]
    eps = float(orig_call.attrs.epsilon)
    dy = output_grad
    w_b = ctx.normalize(R.reshape(w, [shape[i] if i in axes else 1 for i in range(nd)]))
    r = ctx.normalize(R.rsqrt(R.add(R.mean(R.multiply(x, x), axis=axes, keepdims=True),
                                    _const(eps, dtype))))
    # mean_n(h * x) * r^3: one per-row vector; h is rebuilt per use so it fuses (module docstring)
    s = ctx.normalize(R.multiply(
        R.multiply(R.sum(R.multiply(R.multiply(dy, w_b), x), axis=axes, keepdims=True),
                   _const(1.0 / count, dtype)),
        R.multiply(r, R.multiply(r, r))))
    dx = R.subtract(R.multiply(R.multiply(dy, w_b), r), R.multiply(x, s))
    dw = _sum_other(R.multiply(dy, R.multiply(x, r)), other, _shape(w))
    return [dx, dw]


def _bound(expr, ctx):
    """What ``expr`` is bound to in ``ctx``, through var-to-var bindings and items of
    bound tuples."""
    while True:
        if isinstance(expr, relax.Var):
            value = ctx.lookup_binding(expr)
        elif isinstance(expr, relax.TupleGetItem):
            tup = _bound(expr.tuple_value, ctx)
            value = tup.fields[expr.index] if isinstance(tup, relax.Tuple) else None
        else:
            value = None
        if value is None:
            return expr
        expr = value


def _is_zeros(expr, ctx) -> bool:
    value = _bound(expr, ctx)
    return (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
            and value.op.name == "relax.zeros")


def _first_field_grad(output_grad, ctx):
    """The adjoint of field 0 of a tuple-valued op's output, without TVM's zero start.

    ``Gradient`` builds a tuple adjoint as ``(zeros + g, zeros, zeros)`` for a batch_norm
    whose only use is ``bn[0]``: the ``zeros`` becomes a constant of the activation's size
    (always live, after constant folding) and the ``add`` one more activation-sized tensor
    in the backward. ``zeros + g`` is ``g`` (same shape and dtype, checked), so the
    gradient reads ``g``, as PyTorch's ``native_batch_norm_backward`` reads ``grad_out``.
    """
    field = _bound(output_grad, ctx)
    field = field.fields[0] if isinstance(field, relax.Tuple) else relax.TupleGetItem(output_grad, 0)
    value = _bound(field, ctx)
    if (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
            and value.op.name == "relax.add"):
        a, b = value.args
        for zero, g in ((a, b), (b, a)):
            same = (_shape(g) == _shape(value) and str(g.ty.dtype) == str(value.ty.dtype))
            if same and _is_zeros(zero, ctx):
                return g
    return ctx.normalize(field)


def batch_norm_grad(orig_var, orig_call, output_grad, ctx):
    """Gradient of ``R.nn.batch_norm`` (training mode: batch statistics; else running ones).

    ``output_grad`` is the adjoint of the op's tuple ``(y, mean, var)``; only ``y`` is
    differentiated (the step updates running statistics outside autodiff).
    """
    x, gamma, beta, moving_mean, moving_var = orig_call.args
    attrs = orig_call.attrs
    dtype = str(x.ty.dtype)
    shape = _shape(x)
    nd = len(shape)
    axis = int(attrs.axis) % nd
    red = [i for i in range(nd) if i != axis]
    count = 1
    for a in red:
        count *= shape[a]
    eps = float(attrs.epsilon)
    dy = _first_field_grad(output_grad, ctx)
    bshape = [shape[i] if i == axis else 1 for i in range(nd)]
    gamma_b = ctx.normalize(R.reshape(gamma, bshape)) if attrs.scale else None
    c_shape = [shape[axis]]
    if bool(attrs.training):
        mean, rstd = _stats(x, red, eps, dtype, ctx, keepdims=False)
    else:
        mean = ctx.normalize(R.reshape(moving_mean, bshape))
        rstd = ctx.normalize(R.rsqrt(R.add(R.reshape(moving_var, bshape), _const(eps, dtype))))
    # per channel: sum(dy) and sum(dy * x_hat) (keepdims); gamma is constant over each sum,
    # so they also give the two reductions of dx (two full-size reads, not four)
    sum_dy = ctx.normalize(R.sum(dy, axis=red, keepdims=True))
    sum_dy_xhat = ctx.normalize(R.multiply(
        R.sum(R.multiply(dy, R.subtract(x, mean)), axis=red, keepdims=True), rstd))
    scale = rstd if gamma_b is None else ctx.normalize(R.multiply(rstd, gamma_b))
    if bool(attrs.training):
        inv_n = _const(1.0 / count, dtype)
        x_hat = R.multiply(R.subtract(x, mean), rstd)
        inner = R.subtract(R.subtract(dy, R.multiply(sum_dy, inv_n)),
                           R.multiply(x_hat, R.multiply(sum_dy_xhat, inv_n)))
        dx = R.multiply(scale, inner)
    else:
        dx = R.multiply(dy, scale)
    dgamma = R.reshape(sum_dy_xhat, c_shape) if attrs.scale else R.zeros(c_shape, dtype)
    dbeta = R.reshape(sum_dy, c_shape) if attrs.center else R.zeros(c_shape, dtype)
    return [dx, dgamma, dbeta, no_grad(moving_mean), no_grad(moving_var)]


def instance_norm_grad(orig_var, orig_call, output_grad, ctx):
    """Gradient of ``R.nn.instance_norm(x, gamma, beta, channel_axis, axes, epsilon)``:
    statistics over ``axes`` (per channel and sample for ``nn.InstanceNorm``; TVM's importer
    also maps training-mode BatchNorm without running statistics here), gamma and beta per
    ``channel_axis``. Reads ``x`` and ``gamma`` only, like :func:`layer_norm_grad`."""
    x, gamma, beta = orig_call.args
    attrs = orig_call.attrs
    dtype = str(x.ty.dtype)
    shape = _shape(x)
    nd = len(shape)
    axes = sorted(int(a) % nd for a in attrs.axes)
    channel = int(attrs.channel_axis) % nd
    count = 1
    for a in axes:
        count *= shape[a]
    bshape = [shape[i] if i == channel else 1 for i in range(nd)]
    gamma_b = ctx.normalize(R.reshape(gamma, bshape)) if attrs.scale else None
    mean, rstd = _stats(x, axes, float(attrs.epsilon), dtype, ctx, keepdims=True)
    dx = _normalised_grad(x, output_grad, gamma_b, axes, count, mean, rstd, dtype, ctx)
    not_channel = [i for i in range(nd) if i != channel]
    if attrs.scale:
        x_hat = R.multiply(R.subtract(x, mean), rstd)
        dgamma = _sum_other(R.multiply(output_grad, x_hat), not_channel, _shape(gamma))
    else:
        dgamma = R.zeros(_shape(gamma), dtype)
    dbeta = _sum_other(output_grad, not_channel, _shape(beta)) if attrs.center else \
        R.zeros(_shape(beta), dtype)
    return [dx, dgamma, dbeta]


def share_statistics(func: relax.Function) -> relax.Function:
    """``func`` with each repeated ``mean``/``variance`` of the same tensor over the same axes
    bound to the first one's result.

    After autodiff and ``DecomposeOpsForTraining`` a training norm's statistics appear
    in the forward (the decomposition; for batch_norm also the running-stat outputs of
    ``step.add_bn_stat_outputs``) and again in its gradient. Sharing them keeps the small
    per-row / per-channel vectors from the forward to the backward, as PyTorch does,
    instead of two more reductions over ``x``. Same values: the calls are identical.
    """
    seen: dict = {}
    blocks = []
    for block in func.body.blocks:
        binds = []
        for b in block.bindings:
            v = b.value
            if (isinstance(b, relax.VarBinding) and isinstance(v, relax.Call)
                    and isinstance(v.op, tvm.ir.Op)
                    and v.op.name in ("relax.mean", "relax.variance")
                    and isinstance(v.args[0], relax.Var) and v.attrs.axis is not None):
                nd = v.args[0].ty.ndim
                key = (v.op.name, v.args[0], tuple(sorted(int(a) % nd for a in v.attrs.axis)),
                       bool(v.attrs.keepdims))
                if key in seen:
                    b = relax.VarBinding(b.var, seen[key])
                else:
                    seen[key] = b.var
            binds.append(b)
        blocks.append(type(block)(binds))
    body = relax.SeqExpr(blocks, func.body.body)
    return relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)


GRADS = {
    "relax.nn.layer_norm": layer_norm_grad,
    "relax.nn.rms_norm": rms_norm_grad,
    "relax.nn.batch_norm": batch_norm_grad,
    "relax.nn.instance_norm": instance_norm_grad,
}
