"""Converters for torch ops that TVM 0.27's PyTorch importer gets wrong, passed to
``from_exported_program(custom_convert_map=...)`` (TVM's installed files stay untouched).

* ``index_put`` (``x[I] = v``, ``index_add``): negative indices wrapped, fewer index tensors
  than dimensions (or a slice among them) as one ``scatter_nd`` (``index_put.py``).
* ``scatter_add`` (no converter in TVM 0.27): ``scatter_elements`` with ``reduction="add"``.
* ``amax`` / ``amin`` (no converter in TVM 0.27): ``max`` / ``min`` over the given dims
  (all of them when none is given), ``keepdim`` kept.
* Integer operands of float arithmetic (``int_tensor / 2``, ``torch.log(int_tensor)``):
  cast to the float result first (see ``float_promotion``).
* ``clamp`` of an integer tensor with one bound: only that bound (TVM fills the other with an
  infinity that cannot be cast to an integer).
* ``topk`` with ``sorted=False``: the sorted result (a valid unsorted one).
* ``sort.stable`` (``torch.argsort(..., stable=True)``): TVM's stable ``argsort`` and a gather.
* ``detach``: a stop-gradient (``detach``).
* ``cat`` with 1-D size-0 operands (an empty key/value cache): skipped, as PyTorch skips them.
* ``full`` / ``full_like`` with an infinite fill (a causal mask): see ``full_nonfinite``.
* ``select`` with a negative index (``out[:, -1]``): TVM emits ``take(x, -1, mode="fast")``,
  which reads before the start of the axis (garbage in an RNN classifier's last step). The
  index is taken modulo the axis length.
* ``elu`` with ``scale`` / ``input_scale`` (SELU, CELU): TVM drops them (convert_elu.py).
* ``embedding`` with ``padding_idx``: TVM drops it, so the padding row was trained
  (``embedding.py``).
* ``_embedding_bag`` (``nn.EmbeddingBag``; no converter in TVM 0.27): ``embedding_bag.py``.
* ``index.Tensor`` (``x[I, J]``, ``x[:, I, J]``): negative indices wrapped, index tensors
  zipped as in PyTorch, and a gradient (``advanced_index.py``).
* ``max_pool*d_with_indices``: real indices where they are read (TVM returns zeros), and
  ``adaptive_max_pool{1,2}d`` (no converter in TVM 0.27): ``pool_indices.py``.
* ``_native_batch_norm_legit_no_training`` (an eval-mode BN in a training step, e.g. a frozen
  backbone's): an affine map with the running statistics; ``DecomposeOpsForTraining``
  expanded TVM's ``batch_norm(training=False)`` with batch statistics (``eval_batch_norm.py``).
* ``arange`` with a negative step: TVM's length is off (``arange_negative.py``).
* ``upsample_bicubic2d``, ``_upsample_bicubic2d_aa``, ``_upsample_bilinear2d_aa``,
  ``upsample_linear1d``, ``upsample_trilinear3d``: matmuls with PyTorch's own interpolation
  matrices, not index constants (``interpolate.py``).
* ``max_pool3d`` / ``avg_pool3d`` (no gradient in TVM 0.27; LocalResponseNorm uses the
  latter): two 2-D poolings (``pool3d.py``).
* ``histc`` / ``bincount`` (no converter in TVM 0.27; the token counts of MoE load-balancing losses):
  a static count over the bins (``counts.py``).
* ``scatter_reduce.two`` (no converter in TVM 0.27; TAPAS's segment reductions): ``scatter_elements``
  with PyTorch's ``sum`` / ``prod`` / ``mean`` / ``amax`` / ``amin`` and ``include_self``
  (``scatter_reduce.py``).
* ``masked_scatter`` (no converter in TVM 0.27; a VLM's image-feature merge): a ``cumsum`` index, a
  ``take`` and a ``where`` (``masked_scatter.py``).

"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax import op as R
from .advanced_index import CONVERTERS as INDEX_CONVERTERS
from .arange_negative import CONVERTERS as ARANGE_CONVERTERS
from .convert_elu import convert_elu
from .detach import convert_detach
from .embedding import CONVERTERS as EMBEDDING_CONVERTERS
from .embedding_bag import CONVERTERS as BAG_CONVERTERS
from .eval_batch_norm import CONVERTERS as EVAL_BN_CONVERTERS
from .float_promotion import PROMOTING_CONVERTERS, in_result_dtype
from .full_nonfinite import convert_full, convert_full_like
from .counts import CONVERTERS as COUNT_CONVERTERS
from .index_put import CONVERTERS as PUT_CONVERTERS
from .interpolate import CONVERTERS as INTERPOLATE_CONVERTERS
from .pool3d import CONVERTERS as POOL3D_CONVERTERS
from .pool_indices import CONVERTERS as POOL_CONVERTERS
from .masked_scatter import CONVERTERS as MASKED_SCATTER_CONVERTERS
from .scatter_reduce import CONVERTERS as SCATTER_REDUCE_CONVERTERS



def _select(node, importer):
    x = importer.env[node.args[0]]
    dim, index = int(node.args[1]), int(node.args[2])
    if index < 0:
        extent = x.ty.shape.values[dim % x.ty.ndim]
        if isinstance(extent, tvm.tirx.IntImm):
            index += int(extent)
    return importer.block_builder.emit(R.take(x, relax.const(index, "int64"), dim))


def _scatter_add(node, importer):
    x, dim, index, src = (importer.env[a] if not isinstance(a, int) else a
                          for a in node.args[:4])
    return importer.block_builder.emit(
        R.scatter_elements(x, index, src, axis=int(dim), reduction="add"))


def _reduce_extreme(reduce):
    def convert(node, importer):
        x = importer.env[node.args[0]]
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", [])
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        axis = [int(d) for d in dims] if dims else None  # amax(x) / amax(x, []): every dim
        return importer.block_builder.emit(reduce(x, axis=axis, keepdims=bool(keep)))

    return convert


def _integer_clamp(kind):
    """``clamp`` / ``clamp_min`` / ``clamp_max`` of an integer tensor by integer bounds.

    TVM's converter fills a missing bound with ``-inf`` / ``inf`` and emits ``clip``, whose
    legalization casts the infinity to the integer dtype and aborts ("Cannot convert
    infinity to BigInt"): here only the given bounds are applied, as ``maximum`` /
    ``minimum`` with integer constants. Float tensors, and tensor or float bounds, go to
    TVM's own converter.
    """
    def convert(node, importer):
        args = importer.retrieve_args(node)
        x = args[0]
        if kind == "clamp":
            lo = args[1] if len(args) > 1 else node.kwargs.get("min")
            hi = args[2] if len(args) > 2 else node.kwargs.get("max")
        else:
            bound = args[1] if len(args) > 1 else node.kwargs.get(kind[len("clamp_"):])
            lo, hi = (bound, None) if kind == "clamp_min" else (None, bound)
        dtype = str(x.ty.dtype)
        integer = dtype.startswith(("int", "uint"))
        if not integer or not all(b is None or isinstance(b, int) for b in (lo, hi)):
            return getattr(importer, "_" + kind)(node)
        bb = importer.block_builder
        if lo is not None:
            x = bb.emit(R.maximum(x, relax.const(lo, dtype)))
        if hi is not None:
            x = bb.emit(R.minimum(x, relax.const(hi, dtype)))
        return x

    return convert


def _topk(node, importer):
    """``topk(..., sorted=False)`` (DeepSeek-V3's router) as the sorted ``topk``: PyTorch leaves
    the order of an unsorted result unspecified, so the sorted one is one of its valid results
    (TVM's converter refuses ``sorted=False``)."""
    args = importer.retrieve_args(node)
    x = args[0]
    k = args[1] if len(args) > 1 else node.kwargs.get("k", 1)
    dim = args[2] if len(args) > 2 else node.kwargs.get("dim", -1)
    largest = args[3] if len(args) > 3 else node.kwargs.get("largest", True)
    return importer.block_builder.emit(
        R.topk(x, k=k, axis=dim, largest=largest, ret_type="both", dtype="int64"))


def _is_empty_vector(x) -> bool:
    dims = getattr(getattr(x.ty, "shape", None), "values", None)
    return dims is not None and len(dims) == 1 and isinstance(dims[0], tvm.tirx.IntImm) and int(dims[0]) == 0


def _cat(node, importer):
    """``torch.cat`` skipping 1-D size-0 operands, as PyTorch's legacy rule does (a key/value cache that
    starts as ``torch.empty(0)`` and is concatenated with the first ``[B, H, T, D]`` keys: XLM with its default
    ``use_cache``); TVM's ``concat`` refuses operands of another rank."""
    args = importer.retrieve_args(node)
    tensors = [t for t in args[0] if not _is_empty_vector(t)] or list(args[0][:1])
    axis = args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    if len(tensors) == 1:
        return tensors[0]
    return importer.block_builder.emit(R.concat(tensors, axis=axis))


def _copy_strided(node, importer):
    """``prims.copy_strided(x, strides)`` (PyTorch's ``index_fill`` decomposition on a non-contiguous
    tensor keeps its strides so): Relax tensors have no strides, so the copy is ``x`` itself."""
    return importer.env[node.args[0]]


def _sort_stable(node, importer):
    """``sort(x, stable=..., dim=, descending=)`` (``torch.argsort(..., stable=True)``: sort-based MoE
    dispatch), which TVM's converter map lacks: its ``argsort`` is a stable sort (std::stable_sort on CPU),
    a valid result for both values of ``stable``, then the values gathered."""
    bb = importer.block_builder
    x = importer.retrieve_args(node)[0]
    dim = node.kwargs.get("dim", -1)
    descending = node.kwargs.get("descending", False)
    indices = bb.emit(R.argsort(x, dim, descending, dtype="int64"))
    return bb.emit(relax.Tuple([bb.emit(R.gather_elements(x, indices, axis=dim)), indices]))


CONVERTERS = {"select.int": _select, "sort.stable": _sort_stable, "copy_strided.default": _copy_strided,
              # operands of mixed dtypes promoted (LayoutLMv3's float and long masks)
              "cat.default": in_result_dtype("cat.default", (0,), convert=_cat),
              "scatter_add.default": _scatter_add,
              "amax.default": _reduce_extreme(R.max), "amin.default": _reduce_extreme(R.min),
              "topk.default": _topk, "full.default": convert_full,
              "full_like.default": convert_full_like, "detach.default": convert_detach,
              "clamp.default": _integer_clamp("clamp"),
              "clamp_min.default": _integer_clamp("clamp_min"),
              "clamp_max.default": _integer_clamp("clamp_max"),
              # SELU's scale, which TVM drops (convert_elu.py)
              "elu.default": convert_elu,
              **EMBEDDING_CONVERTERS, **BAG_CONVERTERS, **PUT_CONVERTERS,
              **INDEX_CONVERTERS, **PROMOTING_CONVERTERS,
              # a negative step at PyTorch's length (arange_negative.py)
              **ARANGE_CONVERTERS,
              # real max-pool indices (MaxUnpool), adaptive max pooling (pool_indices.py)
              **POOL_CONVERTERS, **POOL3D_CONVERTERS,
              # eval-mode BN (a frozen backbone's) with its running statistics (eval_batch_norm.py)
              **EVAL_BN_CONVERTERS,
              # bicubic / antialiased / 1-D / 3-D linear resizes as constant matmuls (interpolate.py)
              **INTERPOLATE_CONVERTERS,
              # token counts of MoE load-balancing losses (counts.py)
              **COUNT_CONVERTERS,
              # segment reductions (scatter_reduce.py), a VLM's feature merge (masked_scatter.py)
              **SCATTER_REDUCE_CONVERTERS, **MASKED_SCATTER_CONVERTERS}
