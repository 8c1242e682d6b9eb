"""Converters that follow PyTorch's integer-to-float promotion, which TVM 0.27's importer
does not.

``torch`` computes ``int_tensor / 2``, ``int_tensor * 0.5`` and ``torch.log(int_tensor)`` in
floating point (the exported node's value says so). TVM's importer keeps the integer dtype:
it builds ``divide`` of two ``int64`` operands (a floor division), turns ``0.5`` into an
``int64`` constant ``0``, and refuses ``log`` of an integer tensor (DeBERTa-v2's log-bucketed
relative positions: ``torch.log(abs_pos / mid)``). Each converter here casts the integer
operands to the node's floating output dtype first; any node whose operands already match
goes to TVM's own converter unchanged.
"""
from __future__ import annotations

import operator

from tvm import relax
from tvm.relax import op as R


def _out_dtype(node) -> str | None:
    val = node.meta.get("val")
    dtype = getattr(val, "dtype", None)
    return None if dtype is None else str(dtype).replace("torch.", "")


def _is_float(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype == "bfloat16")


def _tensor_dtype(arg) -> str | None:
    ty = getattr(arg, "ty", None) if isinstance(arg, relax.Expr) else None
    dtype = getattr(ty, "dtype", None) if isinstance(ty, relax.TensorType) else None
    return None if dtype is None else str(dtype)  # a PrimType in TVM 0.27


def _promote(importer, arg, dtype: str):
    """``arg`` (a tensor or a Python number) as a ``dtype`` operand."""
    if isinstance(arg, relax.Expr):
        return arg if _tensor_dtype(arg) == dtype else importer.block_builder.emit(R.astype(arg, dtype))
    return relax.const(arg, dtype)


def _needs_promotion(node, args) -> str | None:
    """The float dtype to cast to, when torch's result is float and an operand is not."""
    out = _out_dtype(node)
    if not _is_float(out):
        return None
    ints = [a for a in args if isinstance(a, relax.Expr) and not _is_float(_tensor_dtype(a))]
    return out if ints else None


def _binary(relax_op, intrinsic):
    def convert(node, importer):
        args = importer.retrieve_args(node)
        alpha = node.kwargs.get("alpha", 1)
        dtype = _needs_promotion(node, args[:2])
        if dtype is None or alpha != 1 or len(args) != 2:
            return importer._binary_op(relax_op, intrinsic)(node)
        lhs, rhs = (_promote(importer, a, dtype) for a in args)
        return importer.block_builder.emit(relax_op(lhs, rhs))

    return convert


def _unary(relax_op, default_name: str):
    def convert(node, importer):
        x = importer.env[node.args[0]]
        dtype = _needs_promotion(node, [x])
        if dtype is None:
            default = getattr(importer, default_name, None)
            return default(node) if default is not None else importer._unary_op(relax_op)(node)
        return importer.block_builder.emit(relax_op(_promote(importer, x, dtype)))

    return convert


def _div_mode(node, importer):
    """``div(x, y, rounding_mode=...)`` (``//`` on tensors) in torch's result dtype.

    TVM's converter makes a Python-number divisor an ``int32`` / ``float32`` constant whatever the
    tensor's dtype, and Relax refuses ``floor_divide(int64, int32)`` (Llama-4's chunked attention mask,
    ``positions // chunk_size``). Both operands are taken in the dtype torch's node reports; integer
    ``divide`` truncates, as ``rounding_mode="trunc"`` asks."""
    args = importer.retrieve_args(node)
    out = _out_dtype(node)
    mode = args[2] if len(args) > 2 else node.kwargs.get("rounding_mode")
    if out is None or len(args) < 2 or mode not in (None, "floor", "trunc"):
        return importer._div(node)
    lhs, rhs = (_promote(importer, a, out) for a in args[:2])
    bb = importer.block_builder
    if mode == "floor":
        return bb.emit(R.floor_divide(lhs, rhs))
    quotient = bb.emit(R.divide(lhs, rhs))
    return bb.emit(R.trunc(quotient)) if mode == "trunc" and _is_float(out) else quotient


PROMOTING_CONVERTERS = {
    "div.Tensor_mode": _div_mode,
    **{f"{name}.{kind}": _binary(op, intrinsic)
       for name, op, intrinsic in (("div", R.divide, operator.truediv),
                                   ("mul", R.multiply, operator.mul),
                                   ("add", R.add, operator.add),
                                   ("sub", R.subtract, operator.sub))
       for kind in ("Tensor", "Scalar")},
    # TVM's own converters for these are methods of the importer (``_sqrt`` ...) or
    # ``_unary_op(op)``; the first is used where it exists
    "log.default": _unary(R.log, "_log"),
    "exp.default": _unary(R.exp, "_exp"),
    "sqrt.default": _unary(R.sqrt, "_sqrt"),
    "rsqrt.default": _unary(R.rsqrt, "_rsqrt"),
    "sin.default": _unary(R.sin, "_sin"),
    "cos.default": _unary(R.cos, "_cos"),
}
