"""Dilated 2-D max pooling (``MaxPool2d(dilation=2)``) as a maximum over shifted slices.

TVM 0.27 imports it as ``relax.nn.max_pool2d`` with ``dilation``, whose gradient
``relax.grad.max_pool2d_backward`` TOPI cannot lower with a dilation: the step planned, then
failed to build ("CodeGenVM cannot emit this Relax operator"). Here the pool is written as
what it is: the input padded with ``-inf`` (PyTorch's padding never wins a max), then, for
each of the ``kh * kw`` kernel taps, the strided slice that tap reads for every output, folded
with ``maximum``. Each op has a gradient; the output size follows PyTorch (``ceil_mode``
included: a last window must start inside the input or its left padding).
"""

from __future__ import annotations

from tvm.relax import op as R

from .relax_shapes import static_shape


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def max_pool2d(bb, x, kernel, stride, padding, dilation, ceil_mode):
    """``max_pool2d`` of an NCHW ``x`` (attributes as 2-tuples); TVM's op when undilated."""
    kernel, stride, padding, dilation = (tuple(int(v) for v in a) for a in (kernel, stride, padding, dilation))
    if dilation == (1, 1):
        return bb.emit(R.nn.max_pool2d(x, kernel, stride, [padding[0], padding[1]] * 2,
                                       dilation, ceil_mode, layout="NCHW"))
    size = static_shape(x)[2:]
    out = [_out_size(size[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode) for i in range(2)]
    need = [(out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 for i in range(2)]
    after = [max(0, need[i] - size[i] - padding[i]) for i in range(2)]
    if any(padding) or any(after):
        x = bb.emit(R.nn.pad(x, [0, 0, 0, 0, padding[0], after[0], padding[1], after[1]],
                             pad_value=float("-inf")))
    acc = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            begin = [i * dilation[0], j * dilation[1]]
            tap = bb.emit(R.strided_slice(x, axes=[2, 3], begin=begin,
                                          end=[begin[a] + (out[a] - 1) * stride[a] + 1 for a in range(2)],
                                          strides=list(stride)))
            acc = tap if acc is None else bb.emit(R.maximum(acc, tap))
    return acc
