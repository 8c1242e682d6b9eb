"""Gradients of the ``max`` / ``min`` reductions, which TVM 0.27 lacks.

``relax.max`` / ``relax.min`` come from ``torch.amax`` / ``amin`` (converters.py) and from
``x.max()`` over a whole tensor. As PyTorch's ``amax`` / ``amin`` backward, the output gradient
goes to the elements equal to the result, split evenly among ties. Checked against torch
autograd in float64 by ``tests/test_breadth_probe.py``.
"""

from __future__ import annotations

from tvm.relax import op as R

from .relax_shapes import static_shape as _shape


def _extreme_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    attrs = orig_call.attrs
    ndim = len(_shape(x))
    axes = list(range(ndim)) if attrs.axis is None else [int(a) % ndim for a in attrs.axis]
    kept = _shape(x)
    for a in axes:
        kept[a] = 1
    y = orig_var if bool(attrs.keepdims) else R.reshape(orig_var, kept)
    dy = output_grad if bool(attrs.keepdims) else R.reshape(output_grad, kept)
    hit = ctx.normalize(R.astype(R.equal(x, y), str(x.ty.dtype)))
    ties = R.sum(hit, axis=axes, keepdims=True)
    return [R.multiply(hit, R.divide(dy, ties))]


GRADS = {
    "relax.max": _extreme_grad,
    "relax.min": _extreme_grad,
}
