"""Max pooling's indices (``MaxPool2d(return_indices=True)``, ``MaxUnpool2d``) and
``adaptive_max_pool{1,2}d``.

TVM 0.27's converter of ``max_pool{1,2,3}d_with_indices`` returns ``zeros_like(output)`` as
the indices: a SegNet-style ``MaxUnpool2d`` (which ``torch.export`` decomposes into an
``index_put`` at those indices) then scatters every value to element 0, or fails on the
float indices. ``adaptive_max_pool{1,2}d`` has no converter at all.

Here, when the indices are read, they are computed: for non-overlapping windows (kernel ==
stride, no padding, no dilation; PyTorch's ``MaxPool2d(2)``) the input is cropped to whole
windows, each window laid out along a last axis and ``argmax`` taken (the first maximum in
row-major order, as PyTorch's kernel picks), then turned into the flat index into the
input's spatial plane that PyTorch returns. The pooled values stay TVM's ``max_pool``
(which has a gradient); the indices are integers and get none. Other window shapes with
indices read are refused, naming the op and the way out.

``adaptive_max_pool`` is separable: the max over each output window of rows, then over each
window of columns, with PyTorch's window bounds ``[floor(i*n/o), ceil((i+1)*n/o))``.
"""

from __future__ import annotations

import math
import operator

from tvm import relax
from tvm.relax import op as R

from .dilated_pool import max_pool2d as dilated_max_pool2d
from .errors import UnsupportedError
from .pool3d import max_pool3d
from .relax_shapes import known_shape, static_shape


def _tuple(v, n):
    return tuple(int(a) for a in v) if isinstance(v, (list, tuple)) else (int(v),) * n


def _indices_read(node) -> bool:
    """Whether element 1 (the indices) of a ``(values, indices)`` node has a reader."""
    return any(u.target is operator.getitem and u.args[1] == 1 and u.users
               for u in node.users)


def _window_argmax(bb, x, kernel: tuple, out: tuple):
    """Flat spatial index (PyTorch's) of each non-overlapping window's first maximum."""
    shape = static_shape(x)
    lead, spatial = shape[:-len(kernel)], shape[-len(kernel):]
    nd, nl = len(kernel), len(lead)
    if any(o * k != s for o, k, s in zip(out, kernel, spatial)):  # floor mode: whole windows only
        x = bb.emit(R.strided_slice(x, axes=list(range(nl, nl + nd)), begin=[0] * nd,
                                    end=[o * k for o, k in zip(out, kernel)]))
    split = [d for o, k in zip(out, kernel) for d in (o, k)]
    x = bb.emit(R.reshape(x, [*lead, *split]))
    perm = list(range(nl)) + [nl + 2 * i for i in range(nd)] + [nl + 2 * i + 1 for i in range(nd)]
    x = bb.emit(R.permute_dims(x, perm))
    x = bb.emit(R.reshape(x, [*lead, *out, math.prod(kernel)]))
    local = bb.emit(R.argmax(x, axis=-1))  # int64, the offset inside the window, row-major
    flat, rest = None, math.prod(kernel)
    for i in range(nd):
        rest //= kernel[i]
        d = R.floor_mod(R.floor_divide(local, relax.const(rest, "int64")), relax.const(kernel[i], "int64"))
        o = R.arange(0, out[i], 1, dtype="int64")
        o = R.reshape(o, [out[i]] + [1] * (nd - 1 - i))
        g = R.add(R.multiply(o, relax.const(kernel[i], "int64")), d)  # coordinate along axis i
        stride = math.prod(spatial[i + 1:])
        g = R.multiply(g, relax.const(stride, "int64"))
        flat = g if flat is None else R.add(flat, g)
    return bb.emit(flat)


def _with_indices(nd: int, impl, op_name: str):
    def convert(node, importer):
        args = importer.retrieve_args(node)
        x, kernel = args[0], _tuple(args[1], nd)
        stride = _tuple(args[2], nd) if len(args) > 2 and args[2] not in (None, []) else kernel
        padding = _tuple(args[3], nd) if len(args) > 3 else (0,) * nd
        dilation = _tuple(args[4], nd) if len(args) > 4 else (1,) * nd
        ceil_mode = bool(args[5]) if len(args) > 5 else False
        values = impl(importer, x, kernel, stride, padding, dilation, ceil_mode)
        if not _indices_read(node):  # only the values are used: TVM's pooling is all there is
            return importer.block_builder.emit(relax.Tuple([values, R.zeros_like(values)]))
        shape = known_shape(x)
        if shape is None:
            raise UnsupportedError(f"aten.{op_name} with its indices read needs a static input "
                                   f"shape; got {x.ty}.")
        out = static_shape(values)[-nd:]
        whole = all(o * k == s for o, k, s in zip(out, kernel, shape[-nd:]))
        if stride != kernel or any(padding) or any(d != 1 for d in dilation) or (ceil_mode and not whole):
            raise UnsupportedError(
                f"aten.{op_name} (return_indices=True, e.g. for MaxUnpool) is supported for "
                f"non-overlapping windows only (kernel == stride, padding 0, dilation 1); got "
                f"kernel {kernel}, stride {stride}, padding {padding}, dilation {dilation}, "
                f"ceil_mode {ceil_mode}. Use such a pool where the indices are read, or drop "
                "return_indices.")
        idx = _window_argmax(importer.block_builder, x, kernel, out)
        return importer.block_builder.emit(relax.Tuple([values, idx]))

    return convert


def _max_pool2d(importer, x, kernel, stride, padding, dilation, ceil_mode):
    """TVM's pooling; a dilated one as slices (its TVM gradient does not lower: dilated_pool.py)."""
    if any(d != 1 for d in dilation) and x.ty.ndim == 4 and known_shape(x) is not None:
        return dilated_max_pool2d(importer.block_builder, x, kernel, stride, padding, dilation, ceil_mode)
    return importer._max_pool2d_impl(x, kernel, stride, padding, dilation, ceil_mode)


def _bounds(n: int, o: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling windows along an axis of ``n`` into ``o``."""
    return [(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]


def _adaptive_max(nd: int, op_name: str):
    def convert(node, importer):
        args = importer.retrieve_args(node)
        x, out = args[0], _tuple(args[1], nd)
        if _indices_read(node):
            raise UnsupportedError(
                f"the indices of aten.{op_name} are read by the model; only its values are "
                "supported. Use max_pool with return_indices=True (non-overlapping windows) "
                "for indices.")
        bb = importer.block_builder
        shape = known_shape(x)
        if shape is None:
            raise UnsupportedError(f"aten.{op_name} needs a static input shape; got {x.ty}.")
        y = x
        for i in range(nd):
            axis = len(shape) - nd + i
            parts = [R.max(R.strided_slice(y, axes=[axis], begin=[b], end=[e]), axis=[axis], keepdims=True)
                     for b, e in _bounds(shape[axis], out[i])]
            y = bb.emit(parts[0] if len(parts) == 1 else R.concat(parts, axis=axis))
        return bb.emit(relax.Tuple([y, R.zeros(static_shape(y), "int64")]))

    return convert


CONVERTERS = {
    "max_pool1d_with_indices.default": _with_indices(
        1, lambda imp, *a: imp._max_pool1d_impl(*a), "max_pool1d_with_indices"),
    "max_pool2d_with_indices.default": _with_indices(
        2, _max_pool2d, "max_pool2d_with_indices"),
    # TVM's max_pool3d has no gradient: two 2-D pools (pool3d.py)
    "max_pool3d_with_indices.default": _with_indices(3, max_pool3d, "max_pool3d_with_indices"),
    "adaptive_max_pool1d.default": _adaptive_max(1, "adaptive_max_pool1d"),
    "adaptive_max_pool2d.default": _adaptive_max(2, "adaptive_max_pool2d"),
}
