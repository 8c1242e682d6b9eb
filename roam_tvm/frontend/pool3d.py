"""3-D max and average pooling as two 2-D poolings (``MaxPool3d``, ``AvgPool3d``, and
``nn.LocalResponseNorm``, which PyTorch computes with an ``avg_pool3d`` over channels).

TVM 0.27 has no gradient for ``relax.nn.max_pool3d`` / ``avg_pool3d``, so a video net or an
AlexNet-style LRN stopped at the gradient check. Both poolings are separable over a box
window: the max (or mean) over ``kd x kh x kw`` is the max (mean) over ``kd`` of the
max (mean) over ``kh x kw``. Padding, dilation and ``ceil_mode`` act per axis, and the mean's
divisor (with or without the padding, ``count_include_pad``) is the product of the per-axis
counts, so each 2-D pooling applied with its axes' settings gives PyTorch's result:

* ``[N, C, D, H, W]`` viewed as ``[N, C*D, H, W]``: pool ``(kh, kw)``;
* the result viewed as ``[N, C, D, H'*W']``: pool ``(kd, 1)``.

Both are ``relax.nn.*_pool2d``, whose gradients TVM has. A ``divisor_override`` or a
4-D (unbatched) input goes to TVM's converter as before.
"""

from __future__ import annotations

from tvm.relax import op as R

from .dilated_pool import max_pool2d
from .relax_shapes import known_shape


def _triple(v, default):
    """A 3-D pooling attribute (an int, a 1- or 3-element list, or None / [] for ``default``)."""
    if v is None or (isinstance(v, (list, tuple)) and not v):
        return default
    if isinstance(v, (list, tuple)):
        return tuple(int(a) for a in v) if len(v) == 3 else (int(v[0]),) * 3
    return (int(v),) * 3


def _separable(bb, x, pool2d, kernel, stride, padding, dilation=(1, 1, 1)):
    """``pool2d(bb, x, kernel, stride, padding, dilation)`` (2-tuples) over (H, W), then over D."""
    n, c, d, h, w = known_shape(x)
    y = bb.emit(R.reshape(x, [n, c * d, h, w]))
    y = pool2d(bb, y, kernel[1:], stride[1:], padding[1:], dilation[1:])
    h2, w2 = known_shape(y)[2:]
    y = bb.emit(R.reshape(y, [n, c, d, h2 * w2]))
    y = pool2d(bb, y, (kernel[0], 1), (stride[0], 1), (padding[0], 0), (dilation[0], 1))
    return bb.emit(R.reshape(y, [n, c, known_shape(y)[2], h2, w2]))


def _max2d(ceil_mode):
    def pool(bb, y, k, s, p, d):  # dilated ones as slices (dilated_pool.py)
        return max_pool2d(bb, y, k, s, p, d, ceil_mode)
    return pool


def _avg2d(ceil_mode, count_include_pad):
    def pool(bb, y, k, s, p, d):
        return bb.emit(R.nn.avg_pool2d(y, k, s, [p[0], p[1], p[0], p[1]], ceil_mode=ceil_mode,
                                       count_include_pad=count_include_pad, layout="NCHW"))
    return pool


def max_pool3d(importer, x, kernel, stride, padding, dilation, ceil_mode):
    """``max_pool3d`` values, separable where the input is a static 5-D tensor (else TVM's)."""
    shape = known_shape(x)
    if shape is None or len(shape) != 5:
        return importer._max_pool3d_impl(x, kernel, stride, padding, dilation, ceil_mode)
    k = _triple(kernel, None)
    return _separable(importer.block_builder, x, _max2d(bool(ceil_mode)), k, _triple(stride, k),
                      _triple(padding, (0, 0, 0)), _triple(dilation, (1, 1, 1)))


def _arg(args, node, i, name, default):
    return args[i] if len(args) > i else node.kwargs.get(name, default)


def _max_pool3d(node, importer):
    args = importer.retrieve_args(node)
    return max_pool3d(importer, args[0], args[1], _arg(args, node, 2, "stride", None),
                      _arg(args, node, 3, "padding", 0), _arg(args, node, 4, "dilation", 1),
                      _arg(args, node, 5, "ceil_mode", False))


def _avg_pool3d(node, importer):
    args = importer.retrieve_args(node)
    x = args[0]
    shape = known_shape(x)
    divisor = _arg(args, node, 6, "divisor_override", None)
    if shape is None or len(shape) != 5 or divisor is not None:
        return importer._avg_pool3d(node)
    k = _triple(args[1], None)
    pool = _avg2d(bool(_arg(args, node, 4, "ceil_mode", False)),
                  bool(_arg(args, node, 5, "count_include_pad", True)))
    return _separable(importer.block_builder, x, pool, k, _triple(_arg(args, node, 2, "stride", None), k),
                      _triple(_arg(args, node, 3, "padding", 0), (0, 0, 0)))


CONVERTERS = {"max_pool3d.default": _max_pool3d, "avg_pool3d.default": _avg_pool3d}
