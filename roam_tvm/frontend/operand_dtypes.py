"""Matmuls and convolutions whose float operands differ in dtype: refused with the model's line.

Eager PyTorch raises on ``linear(fp32 x, fp16 W)`` ("expected m1 and m2 to have the same dtype"), a half model
whose norm returns float32, say, but ``torch.export``'s fake kernels do not check it, so such a model was
planned as if it ran (or failed later in TVM's importer with "Binary operators must have the same datatype").
:func:`check_operand_dtypes` names the first such op before the import.
"""
from __future__ import annotations

from .errors import UnsupportedError
from .random_ops import _op, _where

# ops whose tensor operands must share one dtype in eager PyTorch (autocast aside, which casts them first)
_SAME_DTYPE = {"mm.default", "addmm.default", "bmm.default", "baddbmm.default", "matmul.default", "linear.default",
               "mv.default", "addmv.default", "conv1d.default", "conv2d.default", "conv3d.default",
               "convolution.default", "_convolution.default", "conv_transpose1d.input", "conv_transpose2d.input",
               "conv_transpose3d.input"}


def _float_dtypes(node) -> list:
    import torch

    out = []
    for a in (*node.args, *node.kwargs.values()):
        val = getattr(a, "meta", {}).get("val") if hasattr(a, "meta") else None
        if isinstance(val, torch.Tensor) and val.is_floating_point() and val.dtype not in out:
            out.append(val.dtype)
    return out


def check_operand_dtypes(ep) -> None:
    """Refuse a forward with a matmul or convolution over float operands of different dtypes.

    Parameters
    ----------
    ep : torch.export.ExportedProgram

    Raises
    ------
    UnsupportedError
        Names the op, its dtypes, the model's line and the way out.
    """
    for node in ep.graph.nodes:
        if node.op == "call_function" and _op(node) in _SAME_DTYPE:
            dtypes = _float_dtypes(node)
            if len(dtypes) > 1:
                shown = " and ".join(str(d).replace("torch.", "") for d in dtypes)
                raise UnsupportedError(
                    f"aten.{_op(node)}{_where(node)} multiplies {shown} operands, which eager PyTorch refuses "
                    "(a layer returning float32 into a half/bfloat16 layer, e.g. a norm computed in float32). "
                    "Way out: cast back to the layer's dtype (x.to(weight.dtype)), as the model would need to "
                    "run in PyTorch, or train with mixed precision (--precision bf16-amp / fp16-amp) on an fp32 "
                    "model.")
