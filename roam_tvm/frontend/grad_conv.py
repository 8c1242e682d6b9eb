"""Gradients of the convolutions TVM 0.27 lacks: ``conv1d``, ``conv2d_transpose`` and
``conv1d_transpose``.

Both are written with TVM's own ``conv2d`` weight gradient (read from the op registry, not
copied) and an input gradient that also holds for dilated convolutions, which TVM's does not
(``relax.nn.conv2d``'s own gradient is replaced by the same pair while ``Gradient`` runs):

* ``relax.nn.conv1d`` (NCW / OIW): the same convolution as a ``conv2d`` over a height-1 image
  (``x[:, :, None, :]``, ``w[:, :, None, :]``, stride / padding / dilation 1 and 0 on the
  height); the ``conv2d`` gradient's partials lose that axis again.
* ``relax.nn.conv2d_transpose`` (NCHW / IOHW; a U-Net's learned upsampling): it is the adjoint
  of ``conv2d`` with the same weight read as OIHW and the same stride / padding / dilation /
  groups, since ``<conv_transpose(x, w), dy> = <x, conv2d(dy, w)>``. So the input's gradient
  is ``conv2d(dy, w)`` and the weight's is ``conv2d``'s weight gradient for input ``dy`` and
  output gradient ``x`` (the rows ``output_padding`` adds are read by no weight tap).
* ``relax.nn.conv1d_transpose`` (NCW / IOW; a 1-D U-Net or audio decoder's upsampling): the
  same op as a ``conv2d_transpose`` over a height-1 image, as for ``conv1d``.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R

from .errors import UnsupportedError
from .relax_shapes import static_shape as _shape


# TVM's own conv2d gradient, taken when this module is first imported (before
# output_based_gradients swaps _conv2d_grad_fixed in): its weight partial is right for every
# dilation, its input partial is not (see _conv2d_grad_fixed)
_TVM_CONV2D_GRAD = tvm.ir.Op.get("relax.nn.conv2d").get_attr("FPrimalGradient")


def _conv2d_partials(out_like, call, output_grad, ctx):
    """``[d_data, d_weight]`` of a ``relax.nn.conv2d`` ``call`` (NCHW / OIHW) whose output is
    shaped like ``out_like``, given ``output_grad``."""
    a = call.attrs
    x, w = call.args
    if (str(a.data_layout), str(a.kernel_layout), str(a.out_layout)) != ("NCHW", "OIHW", "NCHW"):
        raise UnsupportedError(f"the gradient of relax.nn.conv2d is known for NCHW/OIHW layouts, "
                               f"not {a.data_layout}/{a.kernel_layout}")
    out_var = relax.Var("conv_out", relax.TensorType(out_like, x.ty.dtype))
    d_weight = list(_TVM_CONV2D_GRAD(out_var, call, output_grad, ctx))[1]
    # the input partial: conv2d_transpose, whose output_padding makes up the rows the
    # forward's stride skipped; the kernel's extent is dilation * (k - 1) + 1
    pad, strides, dil = ([int(v) for v in a.padding], [int(v) for v in a.strides],
                         [int(v) for v in a.dilation])
    in_hw, k_hw = _shape(x)[2:], _shape(w)[2:]
    extent = [(in_hw[i] + pad[i] + pad[i + 2] - dil[i] * (k_hw[i] - 1) - 1) // strides[i] * strides[i]
              + dil[i] * (k_hw[i] - 1) + 1 - pad[i] - pad[i + 2] for i in range(2)]
    d_data = R.nn.conv2d_transpose(output_grad, w, strides=strides, padding=pad,
                                   output_padding=[in_hw[i] - extent[i] for i in range(2)],
                                   dilation=dil, groups=int(a.groups), kernel_layout="IOHW",
                                   out_dtype=str(a.out_dtype) or "")
    return [d_data, d_weight]


def _conv2d_grad_fixed(orig_var, orig_call, output_grad, ctx):
    """TVM 0.27's conv2d gradient sizes the input partial as if ``dilation`` were 1 (its
    ``output_padding`` comes out >= the stride and the pass fails on a dilated convolution)."""
    return _conv2d_partials(_shape(orig_var), orig_call, output_grad, ctx)


def _conv1d_grad(orig_var, orig_call, output_grad, ctx):
    a = orig_call.attrs
    if (str(a.data_layout), str(a.kernel_layout), str(a.out_layout)) != ("NCW", "OIW", "NCW"):
        raise UnsupportedError(f"the gradient of relax.nn.conv1d is known for NCW/OIW layouts, not "
                               f"{a.data_layout}/{a.kernel_layout}")
    x, w = orig_call.args
    x4 = ctx.normalize(R.expand_dims(x, 2))
    w4 = ctx.normalize(R.expand_dims(w, 2))
    dy4 = ctx.normalize(R.expand_dims(output_grad, 2))
    pad = [int(p) for p in a.padding]
    call = ctx.normalize(R.nn.conv2d(x4, w4, strides=[1, int(a.strides[0])],
                                     padding=[0, pad[0], 0, pad[1]],
                                     dilation=[1, int(a.dilation[0])], groups=int(a.groups),
                                     out_dtype=str(a.out_dtype) or ""))
    dx4, dw4 = _conv2d_partials(_shape(dy4), call, dy4, ctx)
    return [R.squeeze(dx4, [2]), R.squeeze(dw4, [2])]


def _conv2d_transpose_grad(orig_var, orig_call, output_grad, ctx):
    a = orig_call.attrs
    if (str(a.data_layout), str(a.kernel_layout), str(a.out_layout)) != ("NCHW", "IOHW", "NCHW"):
        raise UnsupportedError(f"the gradient of relax.nn.conv2d_transpose is known for NCHW/IOHW "
                               f"layouts, not {a.data_layout}/{a.kernel_layout}")
    x, w = orig_call.args
    adjoint = ctx.normalize(R.nn.conv2d(output_grad, w, strides=a.strides, padding=a.padding,
                                        dilation=a.dilation, groups=int(a.groups),
                                        out_dtype=str(a.out_dtype) or ""))
    if _shape(adjoint) != _shape(x):  # output_padding >= stride would break the adjoint
        raise UnsupportedError(f"the gradient of relax.nn.conv2d_transpose with output_padding "
                               f"{list(a.output_padding)} >= strides {list(a.strides)}")
    _, dw = _conv2d_partials(_shape(x), adjoint, x, ctx)
    return [adjoint, dw]


def _conv1d_transpose_grad(orig_var, orig_call, output_grad, ctx):
    a = orig_call.attrs
    if (str(a.data_layout), str(a.kernel_layout), str(a.out_layout)) != ("NCW", "IOW", "NCW"):
        raise UnsupportedError(f"the gradient of relax.nn.conv1d_transpose is known for NCW/IOW "
                               f"layouts, not {a.data_layout}/{a.kernel_layout}")
    x, w = orig_call.args
    pad = [int(p) for p in a.padding]
    call = ctx.normalize(R.nn.conv2d_transpose(
        ctx.normalize(R.expand_dims(x, 2)), ctx.normalize(R.expand_dims(w, 2)),
        strides=[1, int(a.strides[0])], padding=[0, pad[0], 0, pad[1]],
        output_padding=[0, int(a.output_padding[0])], dilation=[1, int(a.dilation[0])],
        groups=int(a.groups), kernel_layout="IOHW", out_dtype=str(a.out_dtype) or ""))
    dx4, dw4 = _conv2d_transpose_grad(None, call, ctx.normalize(R.expand_dims(output_grad, 2)), ctx)
    return [R.squeeze(dx4, [2]), R.squeeze(dw4, [2])]


# swapped in for TVM's own during our Gradient call (gradients.output_based_gradients)
FIXED_GRADS = {"relax.nn.conv2d": _conv2d_grad_fixed}

GRADS = {
    "relax.nn.conv1d": _conv1d_grad,
    "relax.nn.conv2d_transpose": _conv2d_transpose_grad,
    "relax.nn.conv1d_transpose": _conv1d_transpose_grad,
}
