"""Bicubic, antialiased and 1-D / 3-D linear interpolation as matmuls with constant matrices.

``F.interpolate(mode="bicubic")`` (DINOv2's and many ViTs' position-embedding resize, often
``antialias=True``), ``mode="bilinear", antialias=True``, ``mode="linear"`` and
``mode="trilinear"`` reach the importer as ``aten.upsample_bicubic2d.vec``,
``_upsample_bicubic2d_aa.vec``, ``_upsample_bilinear2d_aa.vec``, ``upsample_linear1d.vec`` and
``upsample_trilinear3d.vec``. ``torch.export``'s decompositions spell them as gathers whose
index tensors are folded into int64 constants of the *output's* broadcast shape, one per tap
(``[N, C, H', W', taps]``): constants are live for the whole step, so a tiny DINOv2 held 512 KiB
of indices, a third of its peak, where PyTorch holds none. TVM's own bicubic converter uses
``resize2d``'s cubic coefficient -0.5 (PyTorch's is -0.75), and ``resize2d`` has no gradient.

Each of these resizes is separable and linear: per ``(n, c)`` plane, ``y = A_h @ x @ A_w^T``
(and ``A_d`` over depth), with a constant ``A`` (output x input) per resized axis. The
matrices are computed by running the same ATen op on an identity basis, in float64, one
axis at a time with the other axes 2 -> 2 at scale 1 (which every mode maps to itself), so mode,
``align_corners``, scale factors and antialiasing are PyTorch's own. The import is
``matmul``s with those matrices, whose gradients Relax has (``A^T @ dy``); an axis that keeps
its size and maps to itself is skipped.
"""
from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax import op as R

from .errors import UnsupportedError
from .relax_shapes import known_shape

#: ATen ops (``.vec`` overloads: what ``F.interpolate`` traces to) -> number of spatial axes
SEPARABLE = {"upsample_bicubic2d.vec": 2, "_upsample_bicubic2d_aa.vec": 2,
             "_upsample_bilinear2d_aa.vec": 2, "upsample_linear1d.vec": 1,
             "upsample_trilinear3d.vec": 3}


def _aten(name: str):
    import torch

    packet, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, packet), overload)


def keep_undecomposed(table: dict) -> dict:
    """``table`` (a decomposition table) without the ops converted here, so they reach the importer."""
    for name in SEPARABLE:
        table.pop(_aten(name), None)
    return table


def axis_matrix(name: str, spatial: int, axis: int, n_in: int, out_size, align_corners: bool,
                scales) -> np.ndarray:
    """``(n_out, n_in)`` float64: the weights op ``name`` gives ``axis`` (of ``spatial`` axes).

    Parameters
    ----------
    name : str
        A key of :data:`SEPARABLE`.
    spatial : int
        Number of spatial axes of the op.
    axis : int
        The spatial axis (0-based).
    n_in : int
        The axis's input extent.
    out_size : sequence of int, optional
        The op's ``output_size`` (None when it was given scale factors).
    align_corners : bool
    scales : sequence of float, optional
        The op's ``scale_factors``.
    """
    import torch

    # the other axes 2 -> 2 at scale 1, which every mode maps onto itself (antialiased kernels
    # mis-handle an axis of extent 1); their first column is read
    size = None if out_size is None else [int(out_size[a]) if a == axis else 2 for a in range(spatial)]
    scale = None if scales is None else [float(scales[a]) if a == axis else 1.0 for a in range(spatial)]
    shape = [n_in, 1] + [n_in if a == axis else 2 for a in range(spatial)]
    view = [n_in, 1] + [n_in if a == axis else 1 for a in range(spatial)]
    basis = torch.eye(n_in, dtype=torch.float64).reshape(view).expand(shape).contiguous()
    out = _aten(name)(basis, size, bool(align_corners), scale)
    index = tuple([slice(None), 0] + [slice(None) if a == axis else 0 for a in range(spatial)])
    return out[index].reshape(n_in, -1).T.numpy()  # row j: output j's weights


def _const(bb, a: np.ndarray, dtype: str):
    if dtype in ("float16", "float32", "float64"):
        return relax.const(a.astype(dtype), dtype)
    return bb.emit(R.astype(relax.const(a.astype("float32"), "float32"), dtype))  # bfloat16


def _apply(bb, x, a: np.ndarray, axis_from_end: int, dtype: str):
    """``x`` with constant ``a`` (out x in) applied along the axis ``axis_from_end`` from the end."""
    if axis_from_end == 1:
        return bb.emit(R.matmul(x, _const(bb, a.T.copy(), dtype)))
    if axis_from_end == 2:
        return bb.emit(R.matmul(_const(bb, a, dtype), x))
    # depth: fold the two trailing axes into one, apply as rows, unfold
    shape = known_shape(x)
    flat = bb.emit(R.reshape(x, shape[:-2] + [shape[-2] * shape[-1]]))
    y = bb.emit(R.matmul(_const(bb, a, dtype), flat))
    return bb.emit(R.reshape(y, shape[:-3] + [a.shape[0]] + shape[-2:]))


def _converter(name: str, spatial: int):
    def convert(node, importer):
        x = importer.env[node.args[0]]
        args = list(node.args) + [None] * 4
        out_size, align, scales = args[1], bool(args[2]), args[3]
        shape = known_shape(x)
        if shape is None or len(shape) != spatial + 2:
            raise UnsupportedError(f"F.interpolate ({name}) of a tensor of shape {x.ty.shape}: only "
                                   f"static [N, C, {spatial} spatial axes] shapes are supported; give the "
                                   f"resized tensor a static shape (no dynamic_shapes on its dimensions)")
        dtype = str(x.ty.dtype)
        bb = importer.block_builder
        for axis in range(spatial):
            a = axis_matrix(name, spatial, axis, shape[2 + axis], out_size, align, scales)
            if a.shape[0] == a.shape[1] and np.array_equal(a, np.eye(a.shape[0])):
                continue  # this axis maps onto itself
            x = _apply(bb, x, a, spatial - axis, dtype)
        return x

    return convert


CONVERTERS = {name: _converter(name, spatial) for name, spatial in SEPARABLE.items()}
