"""``aten.embedding`` with ``padding_idx``: the padding row gets no gradient, as in PyTorch.

TVM 0.27's converter drops ``padding_idx`` and emits ``take(weight, indices)``, so the
padding row received the gradient of every position holding it and was updated by the
optimizer (silently wrong: PyTorch's ``embedding_backward`` skips those positions).

Here the looked-up rows are passed through ``where(indices == padding_idx, no_grad(rows),
rows)``: the forward value is unchanged (``take`` and ``where`` fuse into one kernel, so
no second copy of the rows is made), and the gradient of ``where`` sends nothing to the
``no_grad`` operand, i.e. the positions holding ``padding_idx`` contribute nothing to the
table's gradient. The ``(..., 1)`` boolean mask is what the backward keeps (PyTorch keeps
the indices). ``scale_grad_by_freq`` is refused with a clear error; ``sparse`` changes only
the storage of PyTorch's gradient, not its value, and is ignored. ``max_norm`` (an in-place
write to the table during the forward) is refused with a clear error.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R
from tvm.relax.op.grad import no_grad

from .errors import UnsupportedError


def lookup(bb: relax.BlockBuilder, weight: relax.Expr, indices: relax.Expr,
           padding_idx: int | None, narrow: bool = True) -> relax.Expr:
    """Rows of ``weight`` at ``indices`` (any shape), the ``padding_idx`` row getting no gradient.

    Parameters
    ----------
    bb : relax.BlockBuilder
        Where the bindings are emitted.
    weight : relax.Expr
        The ``(num, dim)`` table.
    indices : relax.Expr
        Integer indices, any shape.
    padding_idx : int or None
        The row that gets no gradient (negative counts from the end); ``None``: none.
    narrow : bool
        Cast the indices to int32 first (see ``_embedding``).

    Returns
    -------
    relax.Expr
        ``indices.shape + (dim,)``.
    """
    shape = list(indices.ty.shape.values)  # symbolic where a dim is dynamic
    if narrow:
        indices = bb.emit(R.astype(indices, "int32"))
    flat = indices if len(shape) == 1 else bb.emit(R.reshape(indices, [-1]))
    rows = bb.emit(R.take(weight, flat, axis=0))
    if padding_idx is not None:
        rows = bb.emit(R.where(pad_mask(bb, weight, flat, padding_idx),
                               bb.emit(no_grad(rows)), rows))
    if len(shape) != 1:
        rows = bb.emit(R.reshape(rows, shape + [weight.ty.shape.values[-1]]))
    return rows


def pad_mask(bb: relax.BlockBuilder, weight: relax.Expr, flat: relax.Expr,
             padding_idx: int) -> relax.Expr:
    """``(n, 1)`` boolean: which of the 1-D ``flat`` indices are ``padding_idx``."""
    num = int(weight.ty.shape.values[0])
    pad = padding_idx % num  # torch normalises a negative padding_idx the same way
    hit = bb.emit(R.equal(flat, relax.const(pad, str(flat.ty.dtype))))
    return bb.emit(R.expand_dims(hit, [-1]))


def _embedding(node, importer):
    """``embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False)``."""
    args = importer.retrieve_args(node)
    weight, indices = args[0], args[1]

    def arg(i, name, default):
        return args[i] if len(args) > i else node.kwargs.get(name, default)

    padding_idx = arg(2, "padding_idx", -1)
    if arg(3, "scale_grad_by_freq", False):
        raise UnsupportedError(
            "nn.Embedding(scale_grad_by_freq=True) is not supported (its gradient depends on "
            "each index's count in the batch); way out: construct the embedding without "
            "scale_grad_by_freq")
    # aten's padding_idx -1 means "none" (nn.Embedding normalises a user's -1 to num-1)
    pad = None if padding_idx is None or int(padding_idx) < 0 else int(padding_idx)
    # computed indices (T5's position buckets) are cast to int32, as TVM's own converter
    # does: the backward keeps them at half the size; a model input is live for the whole
    # step anyway, so a cast would only add a copy (PyTorch keeps the int64 input)
    narrow = getattr(node.args[1], "op", None) != "placeholder"
    return lookup(importer.block_builder, weight, indices, pad, narrow)


def _embedding_renorm(node, importer):
    """``max_norm``: PyTorch rescales the looked-up rows of the table in place during the
    forward, so the step would have to update the parameter twice (renorm, then the
    optimizer); refused clearly, with the way out."""
    raise UnsupportedError(
        "nn.Embedding / nn.EmbeddingBag / F.embedding with max_norm is not supported: PyTorch "
        "renormalises the table's rows in place during the forward (embedding_renorm_), a "
        "second write to the parameter the training step cannot plan. Way out: drop max_norm, "
        "or renormalise the weight outside the step (with torch.no_grad(): "
        "torch.embedding_renorm_(emb.weight, ids, max_norm, 2.0) before each step)")


CONVERTERS = {"embedding.default": _embedding, "embedding_renorm.default": _embedding_renorm}
