"""Autodiff of the forward: the gradient pre-check, the stop-gradient wiring around Relax
``Gradient``, and the decomposition of the adjoint into primitive ops."""

from __future__ import annotations

from typing import Callable

import tvm
from tvm import relax

from . import gradients
from .backward_attention import recompute_attention_in_backward
from .backward_casts import recompute_upcasts_in_backward
from .backward_elementwise import recompute_elementwise_in_backward
from .backward_input_slices import recompute_input_slices_in_backward
from .double_transpose import cancel_double_transposes
from .errors import MissingGradientError, UnsupportedError
from .gradient_errors import explain_gradient_failure
from .norm_grad import share_statistics
from .per_consumer_terms import merge_identical_bindings, per_consumer_terms
from .relax_walk import bindings, op_name
from .split_of_pad import split_pads
from .stop_gradient import ActiveVars, insert_stop_gradients, remove_stop_gradients
from .unit_axis_sums import sums_over_unit_axes_as_reshapes
from .zero_fills import fold_zero_fills


def check_gradients(func: relax.Function, param_vars: list) -> None:
    """Raise MissingGradientError for the first op on a param->loss path with no gradient.

    Parameters
    ----------
    func : relax.Function
        The forward.
    param_vars : list of relax.Var
        The trainable parameters (the ops ``Gradient`` will differentiate are those that
        depend on them).
    """
    gradients.ensure_registered()
    active = ActiveVars(func, param_vars).active  # what Gradient will differentiate
    target = _target(func)
    if param_vars and target is not None and target not in active:
        raise UnsupportedError(
            "the loss does not depend differentiably on any trainable parameter: every path from a "
            "parameter to the loss passes through a no-grad region (torch.no_grad(), .detach(), "
            "set_grad_enabled(False)) or a non-differentiable op (argmax, rounding, integer casts), so "
            "the step would train nothing. Move the no-grad region off the path to the loss, or check "
            "which parameters should have requires_grad=True.")
    for b in bindings(func):
        if b.var not in active:
            continue
        name = op_name(b.value)
        if name is None:
            continue
        if tvm.ir.Op.get(name).get_attr("FPrimalGradient") is None:
            raise MissingGradientError(
                f"Relax op '{name}' (binding '{b.var.name}' = {str(b.value)[:160]}) has no "
                "gradient in TVM 0.27, and it lies on a path from a parameter to the loss. "
                f"Register one with tvm.relax.op.register_gradient('{name}', fn) before "
                "calling the frontend (see roam_tvm/frontend/gradients.py for examples), or "
                "change the model to avoid the op.")


def params_without_gradient(func: relax.Function, param_vars: list) -> set:
    """The parameters among ``param_vars`` whose every path to the loss passes a no-grad region
    (``torch.no_grad()``, ``.detach()``) or an op with no derivative: PyTorch leaves their ``.grad``
    None and its optimizers skip them (no update, no weight decay, no state). Empty where the loss
    cannot be read off the bindings."""
    target = _target(func)
    active = ActiveVars(func, param_vars).active
    if target is None or target not in active:
        return set()
    reached = {target}
    for b in reversed(bindings(func)):  # differentiable edges only: between active vars
        if b.var in reached:
            reached.update(v for v in relax.analysis.free_vars(b.value) if v in active)
    return {p for p in param_vars if p not in reached}


def _target(func: relax.Function):
    """The float var ``Gradient`` differentiates (the forward's first output, through tuples and
    renames), or None where that cannot be read off the bindings."""
    defs = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    ret = func.body.body
    for _ in range(len(defs) + 2):
        if isinstance(ret, relax.Tuple) and ret.fields:
            ret = ret.fields[0]
        elif isinstance(ret, relax.TupleGetItem):
            whole = defs.get(ret.tuple_value, ret.tuple_value)
            if not isinstance(whole, relax.Tuple):
                return None
            ret = whole.fields[ret.index]
        elif isinstance(ret, relax.Var) and isinstance(defs.get(ret), (relax.Tuple, relax.Var, relax.TupleGetItem)):
            ret = defs[ret]
        else:
            break
    return ret if isinstance(ret, relax.Var) and isinstance(ret.ty, relax.TensorType) else None


def _gradient(mod: tvm.IRModule, pvars: list) -> tvm.IRModule:
    """Relax ``Gradient`` of ``mod["fwd"]``'s first output with the project's gradients."""
    try:
        with gradients.output_based_gradients():
            return relax.transform.Gradient("fwd", require_grads=pvars, target_index=0)(mod)
    except Exception as e:  # noqa: BLE001  # the pre-check catches most
        with gradients.output_based_gradients():
            raise explain_gradient_failure(mod, "fwd", pvars, e) from None


def _loss_var(adjoint: relax.Function) -> relax.Var | None:
    """The loss: the first field of what ``Gradient``'s adjoint returns."""
    ret = adjoint.body.body
    defs = {b.var: b.value for block in adjoint.body.blocks for b in block.bindings}
    while isinstance(ret, relax.Var) and ret in defs:
        ret = defs[ret]
    field = ret.fields[0] if isinstance(ret, relax.Tuple) else None
    return field if isinstance(field, relax.Var) else None


def differentiate(mod: tvm.IRModule, pvars: list,
                  progress: Callable[[str], None]) -> relax.Function:
    """The adjoint of ``mod["fwd"]`` w.r.t. ``pvars``, decomposed into primitive ops.

    Parameters
    ----------
    mod : tvm.IRModule
        Holds the forward as ``"fwd"``; it is updated in place.
    pvars : list of relax.Var
        The parameters to differentiate, among ``mod["fwd"]``'s.
    progress : callable
        Receives a stage message.

    Returns
    -------
    relax.Function
        ``fwd_adjoint``: returns ``(forward outputs, gradients)``.
    """
    gradients.ensure_registered()
    # an RNN's first step multiplies its zero initial state: no product, so no gradient term
    mod["fwd"] = fold_zero_fills(mod["fwd"])
    # Gradient sees no value that has no derivative (positions, masks, indices)
    mod["fwd"] = fwd = insert_stop_gradients(mod["fwd"], pvars)
    progress(f"gradient of {len(bindings(fwd))} bindings w.r.t. {len(pvars)} params")
    mod = _gradient(mod, pvars)
    mod["fwd_adjoint"] = remove_stop_gradients(mod["fwd_adjoint"])
    # a frozen weight's input gradient reads the weight, not a transposed copy of it
    mod["fwd_adjoint"] = cancel_double_transposes(mod["fwd_adjoint"])
    # a step's gradient padded to the sequence and split back into steps is split on the pad's
    # core: the steps in the padding get zero fills, no sequence-sized copies
    mod["fwd_adjoint"] = split_pads(mod["fwd_adjoint"])
    # the forward's norms become the same primitive ops as before (batch_norm in training
    # mode: batch statistics); the backward already is primitive
    mod = relax.transform.DecomposeOpsForTraining("fwd_adjoint")(mod)
    # a gradient summed over size-1 axes only is passed on as a view, as PyTorch's is
    mod["fwd_adjoint"] = sums_over_unit_axes_as_reshapes(mod["fwd_adjoint"])
    # autodiff binds many identical expressions: one of each; then the norms' cheap broadcast
    # terms once per reader, so that each fuses into it instead of being stored
    adjoint = merge_identical_bindings(mod["fwd_adjoint"])
    mod["fwd_adjoint"] = per_consumer_terms(adjoint, after=_loss_var(adjoint))
    # the norms' gradients read the forward's mean/variance vectors instead of recomputing
    adjoint = share_statistics(mod["fwd_adjoint"])
    # the backward casts a saved low-precision activation again instead of keeping the
    # forward's float32 copy alive (autocast), as PyTorch's autograd does
    adjoint = recompute_upcasts_in_backward(adjoint)
    # and redoes attention probabilities from Q and K, which it keeps anyway, as fused SDPA does
    adjoint = recompute_attention_in_backward(adjoint)
    # and hardswish's clip(x + 3, 0, 6) from x, which it keeps anyway, as PyTorch's does
    adjoint = recompute_elementwise_in_backward(adjoint)
    # and an RNN step's input x[:, t] from x, which is alive anyway, as PyTorch's view is
    return recompute_input_slices_in_backward(adjoint)
