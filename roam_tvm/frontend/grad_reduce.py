"""Gradients of reductions TVM 0.27 lacks: ``max`` / ``min`` and ``adaptive_avg_pool2d``.

``relax.max`` / ``relax.min`` come from ``torch.amax`` / ``amin`` (converters.py) and from
``x.max()`` over a whole tensor. As PyTorch's ``amax`` / ``amin`` backward, the output gradient
goes to the elements equal to the result, split evenly among ties. Checked against torch
autograd in float64 by ``tests/test_breadth_probe.py``.

``relax.nn.adaptive_avg_pool2d`` (NCHW; ``AdaptiveAvgPool2d((7, 7))``, ``F.adaptive_avg_pool2d``
to any size but 1, which torch turns into a mean): output cell ``i`` averages input rows
``floor(i * H / h)`` to ``ceil((i + 1) * H / h)``, windows that may overlap. The gradient is
``P_h @ dy @ P_w`` with constant matrices holding ``1 / window length`` where a row (column)
lies in a cell's window: the spreading-back of every window at once, for any sizes.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax import op as R

from .errors import UnsupportedError

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


def _spread(n_in: int, n_out: int, dtype: str, transpose: bool) -> relax.Constant:
    """``(n_in, n_out)`` (or transposed): ``1 / len(window j)`` where input ``i`` is in window ``j``."""
    m = np.zeros((n_in, n_out))
    for j in range(n_out):
        lo, hi = (j * n_in) // n_out, -((-(j + 1) * n_in) // n_out)
        m[lo:hi, j] = 1.0 / (hi - lo)
    return relax.const((m.T if transpose else m).astype(dtype), dtype)


def _adaptive_avg_pool2d_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    a = orig_call.attrs
    if str(a.layout) != "NCHW" or str(a.out_layout) != "NCHW":
        raise UnsupportedError(f"the gradient of relax.nn.adaptive_avg_pool2d is known for NCHW, "
                               f"not {a.layout}")
    dtype = str(x.ty.dtype)
    (h_in, w_in), (h_out, w_out) = _shape(x)[2:], _shape(orig_var)[2:]
    rows = R.matmul(_spread(h_in, h_out, dtype, False), output_grad)  # (N, C, H, w)
    return [R.matmul(rows, _spread(w_in, w_out, dtype, True))]  # (N, C, H, W)


GRADS = {
    "relax.max": _extreme_grad,
    "relax.min": _extreme_grad,
    "relax.nn.adaptive_avg_pool2d": _adaptive_avg_pool2d_grad,
}
