"""Gradients of data-movement ops TVM 0.27 lacks, found by running models outside the zoo.

Each is checked against torch autograd in float64 by ``tests/test_breadth_probe.py``.

* ``relax.flip`` (a bidirectional RNN's backward direction reads the sequence reversed):
  the output gradient flipped back along the same axis.
* ``relax.tile`` (DeBERTa-v2 repeats its relative-position embeddings per batch): the
  output gradient, viewed as ``(r_0, s_0, r_1, s_1, ...)`` for repeats ``r`` over the input
  shape ``s`` (left-padded with ones to the repeats' length), summed over the ``r`` axes.
"""

from __future__ import annotations

from tvm.relax import op as R

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


GRADS = {
    "relax.flip": _flip_grad,
    "relax.tile": _tile_grad,
}
