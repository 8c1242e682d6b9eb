"""An eval-mode BatchNorm inside a training step (a frozen backbone's BN: the usual
fine-tuning recipe keeps its running statistics) as the affine map it is.

TVM 0.27 imports ``_native_batch_norm_legit_no_training`` as ``relax.nn.batch_norm`` with
``training=False``, but ``DecomposeOpsForTraining``, which the step runs after ``Gradient``,
expands every ``batch_norm`` with the batch's statistics: the step normalised a frozen
backbone with batch statistics, not the running ones (the loss was off by 0.5% on a small
CNN, without a word). Here the op is ``x * s + (beta - mean * s)`` with
``s = gamma / sqrt(running_var + eps)`` per channel, which every pass reads the same way;
its backward keeps ``x`` for ``gamma``'s gradient, as PyTorch's does.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R


def _arg(importer, node, i):
    a = node.args[i] if len(node.args) > i else None
    return importer.env[a] if a is not None else None


def convert_eval_batch_norm(node, importer):
    """``_native_batch_norm_legit_no_training(x, weight, bias, mean, var, momentum, eps)``."""
    bb = importer.block_builder
    x = importer.env[node.args[0]]
    gamma, beta, mean, var = (_arg(importer, node, i) for i in range(1, 5))
    eps = float(node.args[6] if len(node.args) > 6 else node.kwargs.get("eps", 1e-5))
    dtype = str(x.ty.dtype)
    scale = bb.emit(R.rsqrt(bb.emit(R.add(var, relax.const(eps, str(var.ty.dtype))))))
    if gamma is not None:
        scale = bb.emit(R.multiply(scale, gamma))
    shift = bb.emit(R.negative(bb.emit(R.multiply(mean, scale))))
    if beta is not None:
        shift = bb.emit(R.add(shift, beta))
    if str(scale.ty.dtype) != dtype:  # low-precision activations, float32 statistics
        scale, shift = bb.emit(R.astype(scale, dtype)), bb.emit(R.astype(shift, dtype))
    per_channel = [-1] + [1] * (x.ty.ndim - 2)  # [C, 1, ...] broadcasts over N and space
    scale = bb.emit(R.reshape(scale, per_channel))
    shift = bb.emit(R.reshape(shift, per_channel))
    out = bb.emit(R.add(bb.emit(R.multiply(x, scale)), shift))
    return out  # TVM's converter returns the output alone too (its getitem(0) passes it on)


CONVERTERS = {"_native_batch_norm_legit_no_training.default": convert_eval_batch_norm}
