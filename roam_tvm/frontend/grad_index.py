"""Gradients of indexing ops TVM 0.27 lacks: ``index_put``, ``scatter_nd``, ``scatter_elements``,
``topk``.

Each is checked against torch autograd in float64 by ``tests/test_grad_ops.py``. The index
arguments never get a gradient (``no_grad``).

* ``relax.index_put(data, indices, values, accumulate)``: ``data`` gets the output gradient
  (with the written positions zeroed unless ``accumulate``); ``values`` gets the output
  gradient read at the indices (``index_tensor``), summed back to its broadcast shape.
* ``relax.scatter_nd(data, indices, updates)`` (``index_add`` / ``x[idx] = v``, see
  ``converters.py``): the same, by ``gather_nd``; what the backward keeps is the
  ``(..., k)`` index, as PyTorch's ``index_add`` backward keeps ``idx``.
* ``relax.gather_nd(data, indices)`` (``x[I, J]``, see ``advanced_index.py``): the output
  gradient scatter-added into zeros at the indices (PyTorch's ``index`` backward).
* ``relax.index_tensor(data, indices)`` (``x[I, J]``, see ``advanced_index.py``):
  ``scatter_nd(zeros, stacked indices, g, "add")``.
* ``relax.scatter_elements(data, indices, updates)``: the same, by ``gather_elements``. Its
  ``max`` / ``min`` / ``mul`` reductions (``scatter_reduce``, see ``scatter_reduce.py``) follow
  PyTorch's ``scatter_reduce_backward``: the gradient is divided evenly among the values equal
  to the result (``data``'s included); a product's is ``out / x``, with a lone zero's (or a
  zero ``data``'s) product of the others recomputed by a second scatter. One difference, on
  purpose: with ``include_self=False`` PyTorch (2.13) still counts the excluded ``self`` among
  the ties when it equals the result, then drops its share, so the shares of ``src`` sum to
  less than the output gradient (a known PyTorch bug: ``amax`` of ``[3, 1]`` into an excluded
  ``3`` gives ``src`` the gradient ``[0.5, 0]``). Here ``self`` is not counted (``[1, 0]``, the
  derivative); the two agree whenever the excluded value is not exactly the result.
* ``relax.gather_elements(data, indices, axis)``: the output gradient scatter-added into
  zeros. Where ``indices`` picks one element per row of ``axis`` (the class a
  cross-entropy reads: ``indices`` of extent 1 on ``axis``, full elsewhere), no two
  entries meet, and the gradient is ``where(iota == indices, g, 0)``: an elementwise
  expression that fuses into the kernel reading it, where the scatter is a kernel of its
  own that also needs a zero-filled ``data``-sized input (PyTorch's ``nll_loss_backward``
  keeps one such tensor).
* ``relax.topk`` (values and indices): the values' gradient scattered (added) back into
  zeros at the indices.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R
from tvm.relax.op.grad import no_grad

from .errors import UnsupportedError
from .relax_shapes import fit_to as _fit




def _index_put_grad(orig_var, orig_call, output_grad, ctx):
    data, indices, values = orig_call.args
    accumulate = bool(orig_call.attrs.accumulate)
    d_values = _fit(ctx, R.index_tensor(output_grad, indices), values)
    if accumulate:
        d_data = output_grad
    else:  # the written positions of data are overwritten: no gradient flows to them
        zeros = R.zeros(ctx.normalize(d_values).ty.shape, values.ty.dtype)
        d_data = R.index_put(output_grad, indices, zeros, False)
    return [d_data, no_grad(indices), d_values]


def _scatter_nd_grad(orig_var, orig_call, output_grad, ctx):
    data, indices, updates = orig_call.args
    reduction = str(orig_call.attrs.reduction)
    if reduction not in ("update", "add"):
        raise UnsupportedError(
            f"the gradient of relax.scatter_nd is known for reduction 'update' and 'add' "
            f"(torch index_put / index_add), not '{reduction}'")
    d_updates = R.gather_nd(output_grad, indices)
    if reduction == "add":
        d_data = output_grad
    else:  # the written slices of data are overwritten: no gradient flows to them
        zeros = R.zeros(updates.ty.shape, updates.ty.dtype)
        d_data = R.scatter_nd(output_grad, indices, zeros, "update")
    return [d_data, no_grad(indices), d_updates]


def _gather_nd_grad(orig_var, orig_call, output_grad, ctx):
    data, indices = orig_call.args
    if int(orig_call.attrs.batch_dims) != 0:
        raise UnsupportedError("the gradient of relax.gather_nd is known for batch_dims=0 "
                               "(x[I, J] indexing), not batch_dims="
                               f"{int(orig_call.attrs.batch_dims)}")
    zeros = R.zeros(data.ty.shape, data.ty.dtype)
    return [R.scatter_nd(zeros, indices, output_grad, "add"), no_grad(indices)]


def _index_tensor_grad(orig_var, orig_call, output_grad, ctx):
    # x[I, J] (advanced_index.py): the output gradient added into zeros at the same index
    # tuples; TVM's index_put needs one index per dim, so the k index tensors are stacked on
    # a last axis for scatter_nd (in the backward only: the forward keeps the index tensors)
    data, indices = orig_call.args
    fields = list(indices.fields) if isinstance(indices, relax.Tuple) else [
        relax.TupleGetItem(indices, n) for n in range(len(indices.ty.fields))]
    k = len(fields)
    out_dims = list(orig_var.ty.shape.values)
    lead = out_dims[:len(out_dims) - (data.ty.ndim - k)]  # the broadcast index shape
    cols = [R.broadcast_to(R.expand_dims(R.astype(f, "int64"), [-1]), lead + [1])
            for f in fields]
    stacked = cols[0] if k == 1 else R.concat(cols, axis=-1)
    zeros = R.zeros(data.ty.shape, data.ty.dtype)
    return [R.scatter_nd(zeros, stacked, output_grad, "add"), no_grad(indices)]


def _scatter_elements_grad(orig_var, orig_call, output_grad, ctx):
    data, indices, updates = orig_call.args
    axis = int(orig_call.attrs.axis)
    reduction = str(orig_call.attrs.reduction)
    if reduction in ("max", "min"):
        return _scatter_extreme_grad(orig_var, orig_call, output_grad, axis)
    if reduction == "mul":
        return _scatter_mul_grad(orig_var, orig_call, output_grad, axis)
    if reduction not in ("update", "add"):
        raise UnsupportedError(
            f"the gradient of relax.scatter_elements is known for reduction 'update', 'add', "
            f"'mul', 'max' and 'min' (torch scatter / scatter_add / scatter_reduce), not "
            f"'{reduction}'; way out: scatter_reduce(reduce='mean') is imported as 'add' and a "
            "division (scatter_reduce.py)")
    d_updates = R.gather_elements(output_grad, indices, axis=axis)
    if reduction == "add":
        d_data = output_grad
    else:
        d_data = R.scatter_elements(output_grad, indices, R.zeros_like(updates), axis=axis)
    return [d_data, no_grad(indices), d_updates]


def _scatter_extreme_grad(orig_var, orig_call, output_grad, axis):
    # PyTorch's scatter_reduce amax / amin backward: the gradient is divided evenly among the
    # values equal to the result, data's own value included. With include_self=False data's
    # scattered positions hold the identity (scatter_reduce.py), so an excluded self is never
    # counted; PyTorch counts it when it equals the result (see the module docstring)
    data, indices, updates = orig_call.args
    dtype = data.ty.dtype
    data_is = R.astype(R.equal(data, orig_var), dtype)
    src_is = R.astype(R.equal(updates, R.gather_elements(orig_var, indices, axis=axis)), dtype)
    share = R.divide(output_grad, R.scatter_elements(data_is, indices, src_is, axis=axis,
                                                     reduction="add"))
    d_updates = R.multiply(src_is, R.gather_elements(share, indices, axis=axis))
    return [R.multiply(data_is, share), no_grad(indices), d_updates]


def _scatter_mul_grad(orig_var, orig_call, output_grad, axis):
    # PyTorch's scatter_reduce prod backward: out / x, except where x is 0 (data) or the only 0
    # met at its position (an update), whose gradient is the product of the others recomputed
    data, indices, updates = orig_call.args
    dtype = data.ty.dtype
    zero, one = relax.const(0, dtype), relax.const(1, dtype)
    masked_data = R.where(R.equal(data, zero), one, data)
    d_data = R.divide(R.multiply(output_grad, R.scatter_elements(
        masked_data, indices, updates, axis=axis, reduction="mul")), masked_data)
    src_zero = R.equal(updates, zero)
    zeros_met = R.gather_elements(R.scatter_elements(
        R.zeros(data.ty.shape, dtype), indices, R.astype(src_zero, dtype), axis=axis,
        reduction="add"), indices, axis=axis)
    single_zero = R.logical_and(src_zero, R.equal(zeros_met, one))
    others = R.scatter_elements(data, indices, R.where(single_zero, one, updates), axis=axis,
                                reduction="mul")
    d_updates = R.where(
        single_zero, R.gather_elements(R.multiply(output_grad, others), indices, axis=axis),
        R.divide(R.gather_elements(R.multiply(output_grad, orig_var), indices, axis=axis),
                 R.where(src_zero, one, updates)))
    return [d_data, no_grad(indices), d_updates]


def _known_shape(expr):
    """The static shape of ``expr``, or None where a dimension is symbolic."""
    dims = getattr(expr.ty.shape, "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return [int(d) for d in dims]


def _gather_elements_grad(orig_var, orig_call, output_grad, ctx):
    data, indices = orig_call.args
    axis = int(orig_call.attrs.axis)
    shape, idx_shape = _known_shape(data), _known_shape(indices)
    one_per_row = shape is not None and idx_shape is not None
    if one_per_row:
        axis %= len(shape)
        one_per_row = idx_shape[axis] == 1 and all(
            a == b for d, (a, b) in enumerate(zip(shape, idx_shape)) if d != axis)
    if not one_per_row:
        zeros = R.zeros(data.ty.shape, data.ty.dtype)
        return [R.scatter_elements(zeros, indices, output_grad, axis=axis, reduction="add"),
                no_grad(indices)]
    view = [1] * len(shape)
    view[axis] = shape[axis]
    iota = R.reshape(R.arange(0, shape[axis], 1, indices.ty.dtype), view)
    zero = relax.const(0.0, data.ty.dtype)
    return [R.where(R.equal(iota, indices), output_grad, zero), no_grad(indices)]


def _topk_grad(orig_var, orig_call, output_grad, ctx):
    data = orig_call.args[0]
    attrs = orig_call.attrs
    if str(attrs.ret_type) != "both":
        raise UnsupportedError(
            "the gradient of relax.topk needs both outputs (values and indices); got "
            f"ret_type='{attrs.ret_type}'")
    axis = int(attrs.axis)
    d_values = relax.TupleGetItem(output_grad, 0)
    indices = relax.TupleGetItem(orig_var, 1)
    zeros = R.zeros(data.ty.shape, data.ty.dtype)
    return [R.scatter_elements(zeros, indices, d_values, axis=axis, reduction="add")]


GRADS = {
    "relax.index_put": _index_put_grad,
    "relax.scatter_nd": _scatter_nd_grad,
    "relax.scatter_elements": _scatter_elements_grad,
    "relax.gather_nd": _gather_nd_grad,
    "relax.index_tensor": _index_tensor_grad,
    "relax.topk": _topk_grad,
    "relax.gather_elements": _gather_elements_grad,
}
