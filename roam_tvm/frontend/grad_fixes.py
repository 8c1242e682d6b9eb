"""Replacements for TVM 0.27 gradients that are wrong on some inputs.

They are swapped in only for the duration of the frontend's ``Gradient`` call
(:func:`.gradients.output_based_gradients`), like the output-based relu gradient; each is
checked against torch autograd in float64 by ``tests/test_grad_ops.py``.

* ``relax.where``: TVM returns ``where(cond, g, 0)`` for both operands at the *output*
  shape. An operand that was broadcast (a scalar fill, a ``(1, T)`` mask bias) then gets a
  gradient of the wrong shape, which fails to add up with its other uses (T5's relative
  position bias). Each partial is summed back to its operand's shape, as the other
  broadcasting ops' gradients are (add, subtract, multiply, divide, power, maximum,
  minimum and matmul use ``_fit_shape``; ``where`` is the one that did not).
* ``relax.concat``: a one-element tuple (``torch.cat([x])``, DenseNet's first layer of a
  block) made TVM split the gradient into a bare tensor instead of a 1-tuple.
* ``relax.split`` into one piece (``torch.split(x, x.shape[d], d)``): its output is a
  bare tensor, so its gradient is the output gradient itself, not a ``concat`` of it.
* ``relax.cumsum``: TVM ignores ``exclusive``; the gradient of an exclusive cumsum is the
  reversed cumsum *minus* the element itself.
* ``relax.take``: TVM's ``take_backward`` kernel only accepts 1-D indices; a scalar index
  (``out[:, -1]``, ``gates[:, e]``) or a 2-D one fails to legalize. The indices are
  flattened and the output gradient reshaped to match, which is the same sum. The kernel
  reads ``x`` for its shape and dtype only, so it is handed zeros of that shape instead:
  reading ``x`` would keep every ``take`` input alive from the forward to the backward
  (Swin's ``torch.roll``, exported as ``index_select``, kept both the padded input and
  the first roll's output), where PyTorch's ``index_select_backward`` keeps only indices.
  A parameter (an embedding table) is passed as it is: it is live throughout anyway.
  One constant index (``x[:, i]``) gets a zero pad instead (:mod:`.grad_select`).
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R
from tvm.relax.op.grad import no_grad
from .grad_select import select_grad_as_pad
from .relax_shapes import static_shape as _shape, fit_to as _fit




def _where_grad(orig_var, orig_call, output_grad, ctx):
    cond, a, b = orig_call.args
    zero_a = relax.const(0, a.ty.dtype)
    zero_b = relax.const(0, b.ty.dtype)
    return [no_grad(cond),
            _fit(ctx, R.where(cond, output_grad, zero_a), a),
            _fit(ctx, R.where(cond, zero_b, output_grad), b)]


def _concat_grad(orig_var, orig_call, output_grad, ctx):
    fields = orig_call.args[0].ty.fields
    if len(fields) == 1:
        return [relax.Tuple([output_grad])]
    axis = int(orig_call.attrs.axis)
    cuts, at = [], 0
    for f in fields[:-1]:
        at += int(f.shape.values[axis])
        cuts.append(at)
    return [R.split(output_grad, cuts, axis=axis)]


def _split_grad(orig_var, orig_call, output_grad, ctx):
    if isinstance(orig_var.ty, relax.TensorType):
        return [output_grad]
    return [R.concat(output_grad, axis=int(orig_call.attrs.axis))]


def _cumsum_grad(orig_var, orig_call, output_grad, ctx):
    x = orig_call.args[0]
    attrs = orig_call.attrs
    g = output_grad
    if attrs.axis is None:
        g = R.reshape(g, [-1])
        axis = 0
    else:
        axis = int(attrs.axis)
    # sum_{i >= j} g_i = total - (inclusive cumsum of g) + g_j; exclusive: sum_{i > j} g_i
    total = R.sum(g, axis=[axis], keepdims=True)
    rev = R.subtract(total, R.cumsum(g, axis=axis))
    if not bool(attrs.exclusive):
        rev = R.add(rev, g)
    if attrs.axis is None:
        rev = R.reshape(rev, x.ty.shape)
    if str(orig_var.ty.dtype) != str(x.ty.dtype):
        rev = R.astype(rev, x.ty.dtype)
    return [rev]


def _take_grad(orig_var, orig_call, output_grad, ctx):
    x, idx = orig_call.args
    axis = orig_call.attrs.axis
    padded = select_grad_as_pad(x, idx, axis, output_grad, ctx)  # x[:, i]: a slice's gradient
    if padded is not None:
        return [padded, no_grad(idx)]
    g = output_grad
    if idx.ty.ndim != 1:
        n = 1
        for d in _shape(idx):
            n *= d
        if axis is None:
            g = R.reshape(g, [n])
        else:
            ax = int(axis) % x.ty.ndim
            xs = _shape(x)
            g = R.reshape(g, xs[:ax] + [n] + xs[ax + 1:])
        idx = ctx.normalize(R.reshape(idx, [n]))
    # x's shape and dtype only: zeros, so the backward does not keep x (module docstring);
    # a parameter (an embedding table) is live anyway and needs no zeros of its size
    is_param = isinstance(x, relax.Var) and ctx.lookup_binding(x) is None
    like_x = x if is_param else R.zeros(_shape(x), x.ty.dtype)
    return [R.grad.take_backward(g, like_x, idx, axis), no_grad(orig_call.args[1])]


GRADS = {
    "relax.where": _where_grad,
    "relax.concat": _concat_grad,
    "relax.split": _split_grad,
    "relax.cumsum": _cumsum_grad,
    "relax.take": _take_grad,
}
