"""Gradients of layer ops TVM 0.27 lacks: ``nn.pad``, ``nn.group_norm``, nearest ``resize2d``.

Each is checked against torch autograd in float64 by ``tests/test_grad_ops.py``.

* ``relax.nn.pad`` (constant mode): the output gradient sliced back to the input's extent; where a
  width is negative (a crop) the slice is padded with zeros back to the input's extent.
* ``relax.nn.group_norm``: closed form over the groups, reading ``x`` and ``gamma`` only
  (the statistics are recomputed, as :mod:`.norm_grad` does for layer_norm).
* ``relax.image.resize2d``, nearest neighbour by an integer factor (``F.interpolate(...,
  scale_factor=k, mode="nearest")``): each input pixel's gradient is the sum over its
  ``k x k`` block of output pixels.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R
from tvm.relax.op.grad import no_grad

from .errors import UnsupportedError
from .relax_shapes import static_shape as _shape



def _pad_grad(orig_var, orig_call, output_grad, ctx):
    attrs = orig_call.attrs
    mode = str(attrs.pad_mode)
    if mode != "constant":
        raise UnsupportedError(
            f"the gradient of relax.nn.pad is only known for pad_mode='constant', not "
            f"'{mode}' (F.pad(..., mode='{mode}')); use constant padding in the model")
    x = orig_call.args[0]
    widths = [int(w) for w in attrs.pad_width]
    shape = _shape(x)
    rest = [no_grad(a) for a in orig_call.args[1:]]
    axes = [a for a in range(len(shape)) if widths[2 * a] or widths[2 * a + 1]]
    if not axes:
        return [output_grad] + rest
    # A negative width crops (RWKV's token shift is ZeroPad2d((0, 0, 1, -1))): the output's
    # elements that came from the input are sliced out, and the cropped input elements, which
    # reached no output, get zeros back by padding the slice.
    begin = [max(widths[2 * a], 0) for a in axes]
    kept = [shape[a] + min(widths[2 * a], 0) + min(widths[2 * a + 1], 0) for a in axes]
    if any(k <= 0 for k in kept):  # every input element cropped away: no output reads it
        return [R.zeros(x.struct_info.shape, x.ty.dtype)] + rest
    grad = R.strided_slice(output_grad, axes, begin, [b + k for b, k in zip(begin, kept)])
    refill = [0] * (2 * len(shape))
    for a in axes:
        refill[2 * a], refill[2 * a + 1] = max(-widths[2 * a], 0), max(-widths[2 * a + 1], 0)
    if any(refill):
        grad = R.nn.pad(ctx.normalize(grad), refill, pad_mode="constant", pad_value=0.0)
    return [grad] + rest


def _group_norm_grad(orig_var, orig_call, output_grad, ctx):
    x, gamma, beta = orig_call.args
    attrs = orig_call.attrs
    shape = _shape(x)
    nd = len(shape)
    c_ax = int(attrs.channel_axis) % nd
    axes = sorted(int(a) % nd for a in attrs.axes)
    if c_ax != 1 or axes != list(range(2, nd)):
        raise UnsupportedError(
            "the gradient of relax.nn.group_norm is implemented for channels on axis 1 and "
            f"every later axis normalised (torch's GroupNorm); got channel_axis={c_ax}, "
            f"axes={axes}")
    dt = x.ty.dtype
    n, c, groups = shape[0], shape[1], int(attrs.num_groups)
    eps = relax.const(float(attrs.epsilon), dt)
    grouped = [n, groups, c // groups] + shape[2:]
    red = list(range(2, nd + 1))  # every axis of a group
    bcast = [1, c] + [1] * (nd - 2)  # gamma / beta against x

    def em(e):
        return ctx.normalize(e)

    xg = em(R.reshape(x, grouped))
    mean = em(R.mean(xg, axis=red, keepdims=True))
    xc = em(R.subtract(xg, mean))
    rstd = em(R.rsqrt(R.add(R.mean(R.multiply(xc, xc), axis=red, keepdims=True), eps)))
    xhat = em(R.multiply(xc, rstd))  # grouped layout
    xhat_flat = em(R.reshape(xhat, shape))
    outer = [0] + list(range(2, nd))  # the axes gamma / beta are broadcast over
    dy = output_grad
    if bool(attrs.scale):
        dgamma = R.sum(R.multiply(dy, xhat_flat), axis=outer)
        dy = em(R.multiply(dy, R.reshape(gamma, bcast)))
    else:
        dgamma = no_grad(gamma)
    dbeta = R.sum(output_grad, axis=outer) if bool(attrs.center) else no_grad(beta)
    dyg = em(R.reshape(dy, grouped))
    m1 = em(R.mean(dyg, axis=red, keepdims=True))
    m2 = em(R.mean(R.multiply(dyg, xhat), axis=red, keepdims=True))
    dx = R.multiply(rstd, R.subtract(R.subtract(dyg, m1), R.multiply(xhat, m2)))
    return [R.reshape(dx, shape), dgamma, dbeta]


def _resize2d_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    attrs = orig_call.attrs
    n, c, h, w = _shape(x)
    oh, ow = _shape(orig_var)[2:]
    method, layout = str(attrs.method), str(attrs.layout)
    if method != "nearest_neighbor" or layout != "NCHW" or oh % h or ow % w:
        raise UnsupportedError(
            f"the gradient of relax.image.resize2d is implemented for nearest-neighbour "
            f"upsampling by an integer factor (NCHW) only; got method={method}, "
            f"layout={layout}, {h}x{w} -> {oh}x{ow}. Use F.interpolate(x, scale_factor=k, "
            "mode='nearest') with an integer k")
    sh, sw = oh // h, ow // w
    g = R.reshape(output_grad, [n, c, h, sh, w, sw])
    return [R.sum(g, axis=[3, 5])] + [no_grad(a) for a in orig_call.args[1:]]


GRADS = {
    "relax.nn.pad": _pad_grad,
    "relax.nn.group_norm": _group_norm_grad,
    "relax.image.resize2d": _resize2d_grad,
}
