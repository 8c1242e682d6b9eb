"""Low-precision parameters and AMP around autodiff (the rewrites live in ``precision.py``)."""

from __future__ import annotations

from tvm import relax

from . import precision


def before_gradient(fwd: relax.Function, pvars: list) -> tuple[relax.Function, list, dict]:
    """Prepare a bf16/fp16 forward for Relax ``Gradient``.

    bf16/fp16 norms work in fp32 inside, forward and backward (as PyTorch's kernels), and
    TVM's Gradient refuses bf16 parameters, so it differentiates w.r.t. fp32 stand-ins.

    Parameters
    ----------
    fwd : relax.Function
        The forward.
    pvars : list of relax.Var
        Its trainable parameters.

    Returns
    -------
    (relax.Function, list, dict)
        The forward, the vars to differentiate, and the stand-ins to drop afterwards.
    """
    return precision.add_float_proxies(precision.norms_in_fp32(fwd), pvars)


def after_gradient(adj: relax.Function, proxies: dict) -> relax.Function:
    """Undo :func:`before_gradient`'s stand-ins; low-precision matmuls and sums accumulate
    in fp32, rounded once (as in PyTorch)."""
    if proxies:
        adj = precision.drop_float_proxies(adj, proxies)
    return precision.accumulate_in_fp32(precision.recompute_casts(adj))
