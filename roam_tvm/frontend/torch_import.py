"""``from_torch``: a PyTorch model + loss + optimizer into a Relax ``train_step``.

Route (see docs/tvm-notes): ``torch.export`` of model+loss in train mode (``export.py``) ->
``from_exported_program(run_ep_decomposition=True, keep_params_as_input=True,
unwrap_unit_return_tuple=True)`` (``relax_import.py``) -> fixes (bool cumsum / compares,
``llvm_fixes.py``; tied weights and parameter order, ``torch_params.py``; dynamic dims at
their upper bound, ``dynamic_dims.py``) -> ``build_train_step`` (``step.py``).
"""

from __future__ import annotations

from .amp import check_precision, unscaling, warn_adam_eps, with_loss_scale
from .data_sizes import check_static_sizes
from .dynamic_dims import bind_upper_bounds, check_dynamic_spec
from .errors import FrontendError
from .export import export_with_loss
from .frozen import check_trainable
from .llvm_fixes import fix_bindings
from .losses import make_loss_fn
from .optim import SGD, Optimizer, as_optimizer
from .progress import Progress
from .operand_dtypes import check_operand_dtypes
from .random_ops import check_random_ops
from .relax_import import import_exported
from .step import build_train_step
from .torch_params import (bn_buffer_names, check_running_stats, exported_names, initial_arrays, input_names,
                           is_meta, order_params, strip_prefix)
from .training_step import TrainingStep


def _as_tuple(tensors) -> tuple:
    import torch

    return (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)


def _target_names(n: int) -> list:
    """``target``, ``target_1``, ...; none for a model that returns its own loss (no targets)."""
    return (["target"] + [f"target_{i}" for i in range(1, n)]) if n else []


def from_torch(model, example_inputs, targets, loss="cross_entropy",
               optimizer: Optimizer | None = None, keep_params: bool = True,
               quiet: bool | None = None, dynamic_shapes=None, precise_reductions: bool = True,
               precision: str | None = None, loss_scale: float | None = None) -> TrainingStep:
    """Import ``model`` with ``loss`` and ``optimizer`` into a one-function training step.

    Parameters
    ----------
    model : torch.nn.Module
        The model. Models on the ``meta`` device (or fake tensors) import from shapes only.
    example_inputs, targets : tuple of torch.Tensor
        The model's inputs and the loss targets (a single tensor is accepted).
    loss : str or callable
        ``"cross_entropy"`` (classes in dim 1 as ``F.cross_entropy``; ``[B, T, V]`` logits
        with ``[B, T]`` targets: classes last; see ``.losses``), ``"mse"``, or a callable
        ``loss(output, *targets)``.
    optimizer : Optimizer, optional
        ``SGD``/``Adam``/``AdamW`` (default ``SGD(lr=1e-2)``).
    keep_params : bool
        Keep the model's parameter values for ``initial_values()``.
    quiet : bool, optional
        Stage messages go to stderr once the import runs longer than 3 s (``True``: never,
        ``False``: always).
    dynamic_shapes : sequence, optional
        One ``torch.export`` spec per input then per target (e.g.
        ``({0: Dim("b", max=64)}, {0: Dim("b", max=64)})``). Every dynamic dim needs an
        upper bound: the model is traced with the dims symbolic (so it must be valid over
        the whole range), then the step is built and planned for each dim's upper bound,
        stated in ``TrainingStep.dynamic_bounds``; it runs on tensors of that size.
    precise_reductions : bool
        Split multi-axis float sums/means into one-axis steps (see
        ``reductions.blocked_reduction``; fixes fp32 gradient error of large BatchNorm layers).
    precision : str, optional
        ``None`` trains the model in its own dtypes (fp32, fp64, bf16 or fp16 parameters);
        ``"bf16-amp"`` / ``"fp16-amp"`` is the AMP recipe (see ``roam_tvm.frontend.amp``):
        the model and loss run under ``torch.autocast``, so parameters and optimizer states
        stay fp32 (master weights) while autocast's ops (matmul, conv, ...) compute, save and
        differentiate in bf16/fp16.
    loss_scale : float, optional
        A static power of two the loss is multiplied by before the backward and every
        gradient divided by in the optimizer update (default 1024 with ``"fp16-amp"``, 1
        with ``"bf16-amp"``); the step returns the unscaled loss. No step is skipped on
        overflow.

    Returns
    -------
    TrainingStep
    """
    import torch

    progress = Progress(quiet)
    optimizer = as_optimizer(optimizer) if optimizer is not None else SGD(lr=1e-2)
    example_inputs, targets = _as_tuple(example_inputs), _as_tuple(targets)
    if not isinstance(model, torch.nn.Module):
        raise FrontendError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, torch.jit.ScriptModule):  # scripted or traced: torch.export cannot read it
        raise FrontendError(
            f"model is a TorchScript module ({type(model).__name__}), which torch.export cannot trace: "
            "pass the eager torch.nn.Module it was made from (before torch.jit.script / torch.jit.trace)")
    params = dict(model.named_parameters())  # tied weights: one entry
    meta = any(is_meta(p) for p in params.values())
    check_trainable(params)
    check_running_stats(model)
    scale = check_precision(precision, loss_scale, params.values())
    warn_adam_eps(optimizer, params.values(), precision)
    loss_fn = make_loss_fn(loss)
    if dynamic_shapes is not None:
        where = ([f"example_inputs[{i}]" for i in range(len(example_inputs))]
                 + [f"targets[{i}]" for i in range(len(targets))])
        check_dynamic_spec(dynamic_shapes, list(example_inputs + targets), where)

    progress("torch.export")
    ep = export_with_loss(model, example_inputs, targets, loss_fn, precision=precision,
                          loss_scale=scale, dynamic_shapes=dynamic_shapes)
    check_random_ops(ep)
    check_operand_dtypes(ep)
    check_static_sizes(ep)  # before TVM's importer, which fails on them with another message
    names = exported_names(ep, model)
    progress("from_exported_program")
    func, carried = import_exported(ep, meta, type(model).__name__, bn_buffer_names(names.bn_specs))
    func = fix_bindings(func)
    del ep
    func, param_names, frozen_names, unused = order_params(func, names, model, params,
                                                           [arg for arg, _ in carried])
    carry_names = [strip_prefix(buf) for _, buf in carried]
    if carry_names:
        progress(f"{len(carry_names)} buffers the forward updates in place are states of the step: "
                 f"{carry_names[:3]}")
    if unused:
        progress(f"{len(unused)} parameters do not reach the loss and are left out: {unused[:3]}")
    gradless = [n for n in frozen_names if params[n].requires_grad]
    if gradless:
        progress(f"{len(gradless)} parameters reach the loss only through no-grad regions: no gradient, "
                 f"kept constant as PyTorch's optimizer skips them: {gradless[:3]}")
    func, bounds = bind_upper_bounds(func, dynamic_shapes)
    if bounds:
        progress("dynamic dims built for their upper bounds: "
                 + ", ".join(f"{k}={v}" for k, v in bounds.items()))

    values, bufs = None, {}
    if keep_params and not meta:
        values, bufs = initial_arrays(model, params, param_names + frozen_names, names.bn_specs, carry_names)
    ts = build_train_step(func, input_names=input_names(model, len(example_inputs)),
                          target_names=_target_names(len(targets)),
                          param_names=param_names, frozen_names=frozen_names,
                          optimizer=unscaling(optimizer, scale), bn_specs=names.bn_specs,
                          param_values=values, buffer_values=bufs, meta=meta or not keep_params,
                          progress=progress, precise_reductions=precise_reductions, carry_names=carry_names)
    ts.meta = meta
    ts.dynamic_bounds = bounds  # under the Dim names the user gave
    if scale != 1.0:
        ts = with_loss_scale(ts, scale, optimizer)
    if not keep_params and not meta:
        ts.param_values = None
    progress("done")
    return ts
