"""The gradient of bilinear ``relax.image.resize2d`` (``F.interpolate(..., mode="bilinear")``,
a segmentation or FPN decoder's upsampling), which TVM 0.27 lacks.

Linear resizing is separable: ``y = A_h @ x @ A_w.T`` with constant interpolation matrices
``A`` (output x input) whose rows hold the two weights ``1 - t`` and ``t`` of each output
position's neighbours, for the op's ``coordinate_transformation_mode``. So the gradient is
``A_h.T @ dy @ A_w``. Nearest-neighbour resizing keeps the gradient of :mod:`.grad_nn`.
Checked against torch autograd in float64 by ``tests/test_breadth_probe.py``.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import relax
from tvm.relax import op as R
from tvm.relax.op.grad import no_grad

from .errors import UnsupportedError
from .grad_nn import GRADS as _NN_GRADS
from .relax_shapes import static_shape as _shape

_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _source(dst: int, n_in: int, n_out: int, mode: str) -> float:
    """The input coordinate output position ``dst`` reads (TVM's resize conventions)."""
    if mode == "align_corners":
        return dst * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if mode == "asymmetric":
        return dst * n_in / n_out
    if mode == "pytorch_half_pixel" and n_out == 1:
        return 0.0
    return (dst + 0.5) * n_in / n_out - 0.5


def _interpolation(n_in: int, n_out: int, mode: str, dtype: str) -> np.ndarray:
    """``(n_out, n_in)``: row ``j`` holds output ``j``'s weights of its two neighbours."""
    a = np.zeros((n_out, n_in))
    for j in range(n_out):
        src = _source(j, n_in, n_out, mode)
        lo = math.floor(src)
        t = src - lo
        a[j, min(max(lo, 0), n_in - 1)] += 1.0 - t
        a[j, min(max(lo + 1, 0), n_in - 1)] += t
    return a.astype(dtype)


def _resize2d_grad(orig_var, orig_call, output_grad, ctx):
    attrs = orig_call.attrs
    method, mode = str(attrs.method), str(attrs.coordinate_transformation_mode)
    if method != "linear":
        return _NN_GRADS["relax.image.resize2d"](orig_var, orig_call, output_grad, ctx)
    if str(attrs.layout) != "NCHW" or mode not in _MODES:
        raise UnsupportedError(
            f"the gradient of bilinear relax.image.resize2d is known for NCHW and the modes "
            f"{', '.join(_MODES)}; got layout={attrs.layout}, mode={mode}")
    x = orig_call.args[0]
    dtype = str(x.ty.dtype)
    (h, w), (oh, ow) = _shape(x)[2:], _shape(orig_var)[2:]
    a_h_t = relax.const(_interpolation(h, oh, mode, dtype).T.copy(), dtype)  # (h, oh)
    a_w = relax.const(_interpolation(w, ow, mode, dtype), dtype)  # (ow, w)
    dx = R.matmul(R.matmul(a_h_t, output_grad), a_w)
    return [dx] + [no_grad(a) for a in orig_call.args[1:]]


GRADS = {"relax.image.resize2d": _resize2d_grad}
