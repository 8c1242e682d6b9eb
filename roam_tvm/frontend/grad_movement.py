"""Gradients of data-movement ops TVM 0.27 lacks, found by running models outside the zoo.

Each is checked against torch autograd in float64 by ``tests/test_breadth_probe.py``.

* ``relax.flip`` (a bidirectional RNN's backward direction reads the sequence reversed):
  the output gradient flipped back along the same axis.
* ``relax.tile`` (DeBERTa-v2 repeats its relative-position embeddings per batch): the
  output gradient, viewed as ``(r_0, s_0, r_1, s_1, ...)`` for repeats ``r`` over the input
  shape ``s`` (left-padded with ones to the repeats' length), summed over the ``r`` axes.
* ``relax.slice_scatter`` (``x[..., a:b] = y`` after functionalization; DeepSeek's rotary
  half of each query head): ``src`` gets the output gradient's slice, ``input`` the output
  gradient with that slice zeroed (those elements were overwritten).
"""

from __future__ import annotations

from tvm.relax import op as R
from tvm.relax.op.grad import no_grad

from .relax_shapes import static_shape


def _flip_grad(orig_var, orig_call, output_grad, ctx):
    return [R.flip(output_grad, axis=int(orig_call.attrs.axis))]


def _tile_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    shape = static_shape(x)
    repeats = [int(r) for r in orig_call.attrs.repeats]
    n = max(len(shape), len(repeats))
    padded = [1] * (n - len(shape)) + shape
    reps = [1] * (n - len(repeats)) + repeats
    interleaved = [d for pair in zip(reps, padded) for d in pair]
    summed = R.sum(R.reshape(output_grad, interleaved), axis=list(range(0, 2 * n, 2)))
    return [R.reshape(summed, shape)]


def _slice_scatter_grad(orig_var, orig_call, output_grad, ctx):
    _, src = orig_call.args[:2]
    start, end, step = (int(a.value) for a in orig_call.args[2:5])
    axis = int(orig_call.attrs.axis)
    d_src = R.strided_slice(output_grad, [axis], [start], [end], [step])
    zeros = R.zeros(src.ty.shape, src.ty.dtype)
    d_input = R.slice_scatter(output_grad, zeros, start, end, step, axis=axis)
    # start / end / step are PrimValue arguments: Gradient wants a (non-)partial for each
    return [d_input, d_src] + [no_grad(a) for a in orig_call.args[2:]]


GRADS = {
    "relax.flip": _flip_grad,
    "relax.slice_scatter": _slice_scatter_grad,
    "relax.tile": _tile_grad,
}
