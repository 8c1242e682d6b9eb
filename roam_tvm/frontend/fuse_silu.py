"""Fold ``x * sigmoid(x)`` back into one ``relax.nn.silu`` op before autodiff.

``torch.export``'s decompositions (``run_ep_decomposition=True``) spell ``F.silu`` (the
SiLU-gated MLP of LLaMA, Qwen2 and Mistral, and ``nn.SiLU`` anywhere) as
``x * sigmoid(x)``. Relax ``Gradient`` then keeps ``sigmoid(x)`` for the multiply's
backward, beside ``x`` (the sigmoid's) and ``x * sigmoid(x)`` (read by the gate's multiply):
one more ``[tokens, ffn]`` tensor per MLP than PyTorch's autograd, whose ``silu_backward``
reads only ``x``. TVM's own ``silu`` gradient reads ``x`` and the output, which the gate
keeps anyway. Same function; the fused op rounds once, so results agree with PyTorch to
float32 rounding.
"""
from __future__ import annotations

from tvm import relax
from tvm.relax.dpl import is_op, rewrite_call, wildcard


def fuse_silu(func: relax.Function) -> relax.Function:
    """``func`` with every ``x * sigmoid(x)`` (either operand order) replaced by ``R.nn.silu(x)``."""
    x = wildcard()
    sig = is_op("relax.sigmoid")(x)
    pattern = is_op("relax.multiply")(x, sig) | is_op("relax.multiply")(sig, x)

    def rewrite(expr, matches):
        # both operands are x's shape and dtype (sigmoid keeps them): nothing broadcasts
        return relax.op.nn.silu(matches[x])

    return rewrite_call(pattern, rewrite, func)
