"""``aten.masked_scatter.default`` (``x.masked_scatter(mask, source)``), which TVM 0.27's importer
lacks: how every Hugging Face VLM merges image features into its text embeddings
(``inputs_embeds.masked_scatter(image_mask, image_features)``).

PyTorch writes ``source``'s elements, in order, to the positions where ``mask`` (broadcast to
``x``'s shape) is true, in row-major order. With static shapes this is a gather and a select:
the ``k``-th true position (``cumsum(mask) - 1``, clamped at 0 where no position is true yet)
reads ``source.flatten()[k]``, and ``where(mask, that, x)``::

    where(mask, source.flatten()[(mask.flatten().cumsum(0) - 1).clamp(min=0)].view(x.shape), x)

Both ``x`` and ``source`` get their gradients from the existing ``where`` and ``take`` ones: ``x``
the output gradient where ``mask`` is false, ``source``'s ``k``-th element the gradient at the
``k``-th true position (0 for elements past the last one, as in PyTorch's
``masked_scatter_backward``). The positions' index is a function of the mask alone, never of a
parameter, so nothing is differentiated through the ``cumsum``.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

from .errors import UnsupportedError
from .relax_shapes import known_shape

__all__ = ["CONVERTERS", "convert_masked_scatter"]


def convert_masked_scatter(node, importer) -> relax.Var:
    """Converter for ``aten.masked_scatter.default(self, mask, source)``."""
    bb = importer.block_builder
    data, mask, source = importer.retrieve_args(node)[:3]
    shape, src_shape = known_shape(data), known_shape(source)
    if shape is None or src_shape is None or known_shape(mask) is None:
        raise UnsupportedError("masked_scatter with a dynamic dim is not supported; way out: "
                               "trace it at a fixed size")
    if str(mask.ty.dtype) != "bool":
        mask = bb.emit(R.astype(mask, "bool"))
    if known_shape(mask) != shape:  # the mask broadcasts to x, as in PyTorch
        mask = bb.emit(R.broadcast_to(mask, shape))
    numel = 1
    for s in shape:
        numel *= s
    flat_src = bb.emit(R.reshape(source, (-1,)))
    if numel == 0 or int(flat_src.ty.shape.values[0]) == 0:
        return data  # nothing is true (PyTorch checks source covers the true positions)
    if str(source.ty.dtype) != str(data.ty.dtype):
        flat_src = bb.emit(R.astype(flat_src, data.ty.dtype))
    # the k-th true position (row-major) reads source's k-th element; clamped into source too,
    # so a mask with more true positions than traced (PyTorch raises) cannot read out of bounds
    n_src = int(flat_src.ty.shape.values[0])
    count = bb.emit(R.cumsum(R.astype(R.reshape(mask, (numel,)), "int64"), axis=0))
    pos = bb.emit(R.clip(R.subtract(count, relax.const(1, "int64")), 0, n_src - 1))
    picked = bb.emit(R.reshape(R.take(flat_src, pos, axis=0), shape))
    return bb.emit(R.where(mask, picked, data))


CONVERTERS = {"masked_scatter.default": convert_masked_scatter}
