"""The gradient of ``relax.nn.conv3d`` (NCDHW / OIDHW), which TVM 0.27 does not have: a
video net's ``nn.Conv3d`` stopped at the gradient check.

* input partial: ``conv3d_transpose`` of the output gradient with the same weight (read as
  IODHW), strides, padding, dilation and groups; ``output_padding`` makes up the planes,
  rows and columns the forward's stride skipped (as for ``conv2d`` in ``grad_conv.py``);
* weight partial: a ``conv3d`` whose batch is the input's channels and whose kernel is the
  output gradient, batch as channels: ``dW[o, i, k] = sum_n sum_p g[n, o, p] *
  x_pad[n, i, p * stride + k * dilation]``, i.e. the forward's stride becomes the dilation and
  its dilation the stride. With groups, the input is laid out ``[C/G, G*N, ...]`` so that
  group ``j`` of that convolution reads exactly the input channels of the forward's group
  ``j``. The result is cut to the kernel's size (the forward may not use the last rows).
"""

from __future__ import annotations

from tvm.relax import op as R

from .errors import UnsupportedError
from .relax_shapes import static_shape as _shape


def _input_partial(x, w, g, a):
    pad, strides, dil = ([int(v) for v in a.padding], [int(v) for v in a.strides],
                         [int(v) for v in a.dilation])
    size, k = _shape(x)[2:], _shape(w)[2:]
    extent = [(size[i] + pad[i] + pad[i + 3] - dil[i] * (k[i] - 1) - 1) // strides[i] * strides[i]
              + dil[i] * (k[i] - 1) + 1 - pad[i] - pad[i + 3] for i in range(3)]
    return R.nn.conv3d_transpose(g, w, strides=strides, padding=pad,
                                 output_padding=[size[i] - extent[i] for i in range(3)],
                                 dilation=dil, groups=int(a.groups), kernel_layout="IODHW",
                                 out_dtype=str(a.out_dtype) or "")


def _weight_partial(x, w, g, a, ctx):
    n, c = _shape(x)[:2]
    groups = int(a.groups)
    spatial = _shape(x)[2:]
    cg = c // groups
    # [N, C, ...] -> [C/G, G*N, ...]: channel j*N + b of the result is x[b, j*C/G + i]
    xt = R.reshape(x, [n, groups, cg, *spatial])
    xt = R.reshape(R.permute_dims(xt, [2, 1, 0, 3, 4, 5]), [cg, groups * n, *spatial])
    gt = R.permute_dims(g, [1, 0, 2, 3, 4])  # [O, N, ...]: the kernel, batch as its channels
    dw = ctx.normalize(R.nn.conv3d(xt, gt, strides=[int(v) for v in a.dilation],
                                   padding=[int(v) for v in a.padding],
                                   dilation=[int(v) for v in a.strides], groups=groups,
                                   out_dtype=str(a.out_dtype) or ""))  # [C/G, O, >= k ...]
    k = _shape(w)[2:]
    if _shape(dw)[2:] != k:
        dw = R.strided_slice(dw, axes=[2, 3, 4], begin=[0, 0, 0], end=k)
    return R.permute_dims(dw, [1, 0, 2, 3, 4])


def _conv3d_grad(orig_var, orig_call, output_grad, ctx):
    a = orig_call.attrs
    if (str(a.data_layout), str(a.kernel_layout), str(a.out_layout)) != ("NCDHW", "OIDHW", "NCDHW"):
        raise UnsupportedError(f"the gradient of relax.nn.conv3d is known for NCDHW/OIDHW layouts, "
                               f"not {a.data_layout}/{a.kernel_layout}")
    x, w = orig_call.args
    return [_input_partial(x, w, output_grad, a), _weight_partial(x, w, output_grad, a, ctx)]


GRADS = {"relax.nn.conv3d": _conv3d_grad}
