"""``F.unfold`` / ``F.fold`` (``nn.Unfold`` / ``nn.Fold``, im2col and col2im) as grouped
convolutions with a one-hot kernel, which import and differentiate.

``torch.export`` decomposes ``im2col`` into 6-D advanced indexing and a permutation that TVM
0.27's importer rejects ("PermuteDims expects the number of input axes to equal the ndim").
Unfold is a convolution: with ``groups = C`` and the constant kernel
``w[c*kh*kw + i*kw + j, 0] = e_(i, j)`` (a one at kernel position ``(i, j)``), output
channel ``c*kh*kw + i*kw + j`` at window ``l`` is input channel ``c`` at that window's
``(i, j)`` tap, which is ``unfold``'s row order; stride, padding and dilation carry over.
Each output is one product by 1 plus products by 0, so the values are exact. Fold (the
adjoint of unfold) is the transposed convolution with the same kernel, its
``output_padding`` making up the rows a strided window does not reach. Both gradients are
convolutions the frontend already differentiates.
"""
from __future__ import annotations


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _one_hot_kernel(channels: int, kh: int, kw: int, like):
    """``[channels*kh*kw, 1, kh, kw]``: output channel ``c*kh*kw + k`` picks tap ``k``."""
    import torch

    eye = torch.eye(kh * kw, dtype=like.dtype, device=like.device).reshape(kh * kw, 1, kh, kw)
    return eye.repeat(channels, 1, 1, 1)


def _no_autocast(x):
    """Autocast off around the convolutions: PyTorch's im2col / col2im keep the input's dtype
    (autocast lists neither), where an autocast conv2d would round to bf16/fp16."""
    import torch

    return torch.autocast(device_type=x.device.type, enabled=False)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """``F.unfold`` as a grouped ``conv2d`` (see the module docstring)."""
    import torch.nn.functional as F

    kh, kw = _pair(kernel_size)
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    w = _one_hot_kernel(x.shape[1], kh, kw, x)
    with _no_autocast(x):
        y = F.conv2d(x, w, stride=_pair(stride), padding=_pair(padding),
                     dilation=_pair(dilation), groups=x.shape[1])
    y = y.flatten(2)
    return y if batched else y.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """``F.fold`` as a grouped ``conv_transpose2d`` (see the module docstring)."""
    import torch.nn.functional as F

    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = map(_pair, (kernel_size, dilation, padding, stride))
    oh, ow = _pair(output_size)
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    channels = x.shape[1] // (kh * kw)
    bh = (oh + 2 * ph - dh * (kh - 1) - 1) // sh + 1  # windows down and across
    bw = (ow + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    x = x.reshape(x.shape[0], x.shape[1], bh, bw)
    # the rows and columns past the last window's reach (output_padding < stride)
    extra = (oh - ((bh - 1) * sh - 2 * ph + dh * (kh - 1) + 1),
             ow - ((bw - 1) * sw - 2 * pw + dw * (kw - 1) + 1))
    with _no_autocast(x):
        y = F.conv_transpose2d(x, _one_hot_kernel(channels, kh, kw, x), stride=(sh, sw),
                               padding=(ph, pw), output_padding=extra, groups=channels,
                               dilation=(dh, dw))
    return y if batched else y.squeeze(0)
