"""``from_backbone``: a Relax backbone module (the ``relax.training.SetupTrainer`` form).

Input: an IRModule with module attrs ``param_num`` and ``state_num`` and a function
``backbone(inputs..., params..., states...)`` returning ``prediction`` (no states) or
``(prediction, updated_states...)``. The loss is built in Relax
(``relax.training.loss``), appended with ``relax.transform.AppendLoss``, and the result
goes through the same ``build_train_step`` as ``from_torch``: in-place optimizer updates,
and the backbone's states written back in place (a copy kernel) once their new value
is computed and their old value has no reader left.

Names: ``input_<i>`` (or the backbone's own param names), ``target``, params and states
by their Relax names.
"""

from __future__ import annotations

import tvm
from tvm import relax

from .dynamic_dims import bind_upper_bounds
from .errors import FrontendError, UnsupportedError
from .optim import Optimizer, as_optimizer
from .progress import Progress
from .step import build_train_step
from .training_step import TrainingStep


def _loss_func(loss, pred_ty, target_ty):
    from tvm.relax.training import loss as L

    if isinstance(loss, L.Loss):
        return loss, loss(pred_ty, target_ty)
    if loss == "cross_entropy":
        obj = L.CrossEntropyLoss(reduction="mean")
    elif loss == "mse":
        obj = L.MSELoss(reduction="mean")
    else:
        raise UnsupportedError(f"unknown loss {loss!r}: use 'cross_entropy', 'mse' or a "
                               "tvm.relax.training.loss.Loss instance")
    return obj, obj(pred_ty, target_ty)


def from_backbone(mod: tvm.IRModule, optimizer: Optimizer, loss="cross_entropy", target=None,
                  func_name: str = "backbone", quiet=None) -> TrainingStep:
    """Build a ``TrainingStep`` from a backbone module.

    ``target``: the target's type (``relax.TensorType``); default: for cross entropy an int64
    vector of the prediction's batch size, for mse the prediction's type.
    """
    progress = Progress(quiet)
    optimizer = as_optimizer(optimizer)
    if func_name not in [gv.name_hint if hasattr(gv, "name_hint") else gv.name
                         for gv in mod.get_global_vars()]:
        raise FrontendError(f"module has no function '{func_name}'")
    attrs = mod.attrs or {}
    if "param_num" not in attrs or "state_num" not in attrs:
        raise FrontendError("backbone module needs module attrs 'param_num' and 'state_num' "
                            "(I.module_attrs({'param_num': P, 'state_num': S}))")
    n_p, n_s = int(attrs["param_num"]), int(attrs["state_num"])
    # symbolic dims are built at their upper bound (AppendLoss cannot match symbolic types)
    bb_func, bounds = bind_upper_bounds(mod[func_name])
    if bounds:
        mod = mod.clone()
        mod[func_name] = bb_func
    n_in = len(bb_func.params) - n_p - n_s
    if n_in < 0:
        raise FrontendError(f"backbone has {len(bb_func.params)} params, fewer than "
                            f"param_num + state_num = {n_p + n_s}")
    ret_ty = bb_func.ret_ty
    pred_ty = ret_ty.fields[0] if isinstance(ret_ty, relax.TupleType) else ret_ty
    if target is None:
        if loss == "mse":
            target = pred_ty
        else:
            batch = pred_ty.shape.values[0]
            target = relax.TensorType((batch,), "int64")
    loss_obj, loss_fn = _loss_func(loss, pred_ty, target)
    from tvm.relax.training import AppendLoss

    mod = AppendLoss(func_name, loss_fn, loss_obj.num_backbone_outputs,
                     "backbone_loss")(mod)
    f = mod["backbone_loss"]
    # backbone_loss(inputs, params, states, targets) -> loss | (loss, new_states...)
    ps = list(f.params)
    ins, params, states, tgs = (ps[:n_in], ps[n_in:n_in + n_p], ps[n_in + n_p:n_in + n_p + n_s],
                                ps[n_in + n_p + n_s:])
    fwd = relax.Function(ins + tgs + params + states, f.body, f.ret_ty, True, f.attrs)
    in_names = [p.name for p in ins]
    tg_names = ["target"] + [f"target_{i}" for i in range(1, len(tgs))]
    if len(set(in_names + [p.name for p in params + states])) != len(ps) - len(tgs):
        in_names = [f"input_{i}" for i in range(n_in)]
    progress("building train_step from backbone")
    ts = build_train_step(fwd, input_names=in_names, target_names=tg_names,
                          param_names=[p.name for p in params], optimizer=optimizer,
                          carry_names=[p.name for p in states], meta=True, quiet=quiet,
                          progress=progress)
    ts.dynamic_bounds = bounds
    ts.no_values_reason = ("initial_values(): a backbone module carries no weights; create the "
                           "parameter and state arrays yourself from ts.shapes[name] = "
                           "(shape, dtype) (optimizer states start at zero)")
    return ts
