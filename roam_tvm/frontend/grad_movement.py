"""Gradients of data-movement ops TVM 0.27 lacks, found by running models outside the zoo.

Each is checked against torch autograd in float64 by ``tests/test_breadth_probe.py``.

* ``relax.flip`` (a bidirectional RNN's backward direction reads the sequence reversed):
  the output gradient flipped back along the same axis.
"""

from __future__ import annotations

from tvm.relax import op as R


def _flip_grad(orig_var, orig_call, output_grad, ctx):
    return [R.flip(output_grad, axis=int(orig_call.attrs.axis))]


GRADS = {
    "relax.flip": _flip_grad,
}
