"""The forward as ``Gradient`` wants it: named parameters, BatchNorm statistics returned,
and the rewrites that keep the backward from saving more than it needs."""

from __future__ import annotations

import tvm
from tvm import relax

from .bn_stats import add_bn_stat_outputs
from .drop_empty import drop_empty_concat_operands
from .fuse_gelu import fuse_tanh_gelu
from .fuse_rms_norm import fuse_rms_norm
from .fuse_silu import fuse_silu
from .fuse_xent import fuse_cross_entropy
from .rnn_last_step import read_steps_directly
from .rnn_step_projection import per_step_projections
from .simplify import drop_matmul_weight_broadcasts, drop_noop_broadcasts


def rename_params(fwd: relax.Function, names: list) -> relax.Function:
    """``fwd`` with its parameters renamed ``names`` (same order, same types)."""
    new_params = [relax.Var(n, p.ty) for n, p in zip(names, fwd.params)]
    body = fwd.bind_params({old: new for old, new in zip(fwd.params, new_params)})
    return relax.Function(new_params, body.body, body.ret_ty, True, fwd.attrs)


def prepare_forward(fwd: relax.Function, names: list, bn_specs: list,
                    n_carry: int) -> tuple[tvm.IRModule, list]:
    """The module ``{"fwd": forward}`` that autodiff starts from.

    Parameters
    ----------
    fwd : relax.Function
        The forward, parameters ordered inputs, targets, params, frozen, carried.
    names : list of str
        A name per parameter of ``fwd``.
    bn_specs : list of BNSpec
        BatchNorm modules whose running statistics are states, in graph order.
    n_carry : int
        How many carried states ``fwd`` returns after the loss.

    Returns
    -------
    (tvm.IRModule, list)
        The module and ``(spec, count, dtype)`` per BatchNorm.
    """
    fwd = rename_params(fwd, names).with_attr("global_symbol", "fwd")
    fwd, bn_info = add_bn_stat_outputs(fwd, list(bn_specs), n_carry=n_carry)
    mod = tvm.IRModule({"fwd": fwd.with_attr("global_symbol", "fwd")})
    # explicit tanh-GELU (GPT-2's gelu_new) -> one op, whose gradient keeps only its input
    # likewise x * sigmoid(x) -> silu, and the spelled-out RMSNorm -> rms_norm (keeps x only)
    mod["fwd"] = fuse_rms_norm(fuse_silu(fuse_tanh_gelu(mod["fwd"])))
    # cross-entropy's log_softmax + gather -> x[t] - logsumexp(x): a fusable gradient
    mod["fwd"] = fuse_cross_entropy(mod["fwd"])
    # broadcast_to onto a tensor's own shape (torch.matmul's expand) would be a copy kernel
    # whose result the backward keeps beside the original (attention probabilities)
    mod["fwd"] = drop_noop_broadcasts(mod["fwd"])
    # and a weight broadcast over the time steps of an RNN's input projection would be T copies
    mod["fwd"] = drop_matmul_weight_broadcasts(mod["fwd"])
    # an RNN's whole-sequence input projection, sliced one step per cell, would be held through
    # the forward: each cell projects its own step's input instead (rnn_step_projection.py)
    mod["fwd"] = per_step_projections(mod["fwd"])
    # and its classifier's read of the last step reads that step, not a (permuted) stacked copy
    mod["fwd"] = read_steps_directly(mod["fwd"])
    # partial rotary with the whole head rotated concatenates an empty tensor, whose
    # zero-size adjoints Gradient cannot legalize (see drop_empty.py)
    mod["fwd"] = drop_empty_concat_operands(mod["fwd"])
    # layer_norm / batch_norm stay whole through Gradient: their registered gradients
    # (norm_grad.py) keep only x and gamma; they are decomposed after autodiff
    return relax.transform.DeadCodeElimination(["fwd"])(mod), bn_info
