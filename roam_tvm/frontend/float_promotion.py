"""Converters that follow PyTorch's integer-to-float promotion, which TVM 0.27's importer
does not.

``torch`` computes ``int_tensor / 2``, ``int_tensor * 0.5`` and ``torch.log(int_tensor)`` in
floating point (the exported node's value says so). TVM's importer keeps the integer dtype:
it builds ``divide`` of two ``int64`` operands (a floor division), turns ``0.5`` into an
``int64`` constant ``0``, and refuses ``log`` of an integer tensor (DeBERTa-v2's log-bucketed
relative positions: ``torch.log(abs_pos / mid)``). Each converter here casts the integer
operands to the node's floating output dtype first (``in_result_dtype`` for every op TVM converts
in its operand's dtype); any node whose operands already match goes to TVM's own converter unchanged.
"""
from __future__ import annotations

import operator

from torch import fx
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


def tvm_converter(importer, name: str):
    """TVM's own converter for ``name`` (``"log.default"``), before our converters replaced it."""
    defaults = importer.__dict__.get("_roam_tvm_converters")
    if defaults is None:  # built once per import: the map binds the importer's methods
        defaults = importer.__dict__["_roam_tvm_converters"] = importer.create_convert_map()
    return defaults[name]


def _operand_nodes(node, positions) -> list:
    """The fx nodes at ``positions`` of ``node.args`` (a list argument, ``cat``'s, gives each element)."""
    out = []
    for i in positions:
        if i < len(node.args):
            arg = node.args[i]
            out.extend(arg if isinstance(arg, (list, tuple)) else [arg])
    return out


def in_result_dtype(name: str, positions=(0, 1), convert=None):
    """TVM's converter for ``name`` (or ``convert``), run with the operands at ``positions`` cast to the
    dtype torch's node reports, where they differ from it.

    ``torch.reciprocal(int_tensor)`` is float (Idefics2's ``1.0 / nb_patches``): TVM builds ``1 / x`` in
    ``x``'s integer dtype, a floor division that makes every step 0. ``torch.where(mask, ints, floats)``,
    ``torch.stack([floats, ints])`` and ``int_tensor ** 0.5`` promote the same way; TVM's converters keep
    an operand's dtype (a Python-number operand takes the tensor's dtype: ``0.5`` becomes ``0``) or refuse
    the mix. A node whose operands already have its dtype goes to the converter unchanged.
    """
    def convert_node(node, importer):
        default = convert or tvm_converter(importer, name)
        call = (lambda: default(node, importer)) if convert is not None else (lambda: default(node))
        out = _out_dtype(node)
        if out is None or out == "bool":
            return call()
        env = importer.env
        saved = {}
        for arg in _operand_nodes(node, positions):
            x = env.get(arg) if isinstance(arg, fx.Node) else None
            dtype = _tensor_dtype(x) if x is not None else None
            if dtype is not None and dtype != out and arg not in saved:
                saved[arg] = x
                env[arg] = importer.block_builder.emit(R.astype(x, out))
        try:
            return call()
        finally:  # later readers of the operand see its own dtype
            env.update(saved)

    return convert_node


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
    # torch computes these in floating point whatever the input's dtype
    **{f"{name}.default": in_result_dtype(f"{name}.default", (0,))
       for name in ("log", "exp", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                    "asinh", "acosh", "atanh", "reciprocal", "sigmoid", "tanh", "erf", "log1p", "log2", "log10",
                    "expm1")},
    # operands promoted to the result's dtype (``where``'s condition stays boolean)
    "where.self": in_result_dtype("where.self", (1, 2)),
    "stack.default": in_result_dtype("stack.default", (0,)),
    "atan2.default": in_result_dtype("atan2.default"),
    **{f"pow.{kind}": in_result_dtype(f"pow.{kind}") for kind in ("Scalar", "Tensor_Scalar", "Tensor_Tensor")},
    **{f"{name}.{kind}": in_result_dtype(f"{name}.{kind}")
       for name in ("fmod", "remainder", "rsub") for kind in ("Scalar", "Tensor")},
}
