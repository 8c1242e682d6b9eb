"""Build a whole training step (forward, backward, optimizer) as one Relax function.

``train_step`` signature (see :attr:`TrainingStep.signature`), in this order:

1. ``input``  — the model's example inputs (names from ``torch.export``: ``x``, ``input_ids``, …);
2. ``target`` — the loss targets (``target``, ``target_1``, …);
3. ``param``  — trainable parameters, named like ``model.named_parameters()``;
   then ``frozen`` — parameters with ``requires_grad=False`` (no gradient, no state, never
   updated: constants of the step passed as inputs);
4. ``state``  — optimizer states ``<param>.<suffix>`` (per parameter, in parameter order),
   then BatchNorm running statistics ``<module>.running_mean`` / ``.running_var`` /
   ``.num_batches_tracked``;
5. ``hyper``  — 0-d step-dependent scalars ``hyper.<name>`` (see ``optim.py``).

It returns the loss (a 0-d tensor) and a tuple with every updated parameter and
state. Those are *the same buffers* as the corresponding inputs: each update is an
``R.call_tir_inplace`` call, whose outputs alias its inputs (nothing is allocated or
copied). The tuple is returned only so that dead-code elimination keeps the
updates (``call_tir_inplace`` is "pure" to Relax); a caller ignores it and reads
the mutated inputs.

Program order: each parameter's update is placed right after the later of
(a) the binding that makes its gradient final and (b) the last binding that reads
the parameter (directly or through a view: reshape, squeeze, expand_dims, flatten,
tuple). So the gradient dies right after its update, and nothing after the update
reads the old parameter. A pass that reorders ``train_step`` must keep that rule:
``TrainingStep.update_deps`` lists, for each update binding, the parameter it mutates. A
gradient returned as row blocks (an RNN weight's gates, ``rnn_gate_grads``) is applied by a
chain of row-block updates, one per block (``block_updates``).

:func:`build_train_step` runs the stages, each in its own module: ``forward_prep`` (names,
BatchNorm statistics, rewrites), ``autodiff`` (gradient pre-check, stop-gradient wiring,
Relax ``Gradient``), ``step_precision`` (bf16/fp16 around autodiff), ``signature``
(``train_step``'s parameters), ``placement`` (where each in-place update goes) and
``assemble`` (``train_step`` itself).
"""

from __future__ import annotations

from typing import Callable

import tvm
from tvm import relax

from . import step_precision
from .assemble import assemble
from .autodiff import check_gradients, differentiate
from .bn_stats import BNSpec, add_bn_stat_outputs
from .dynamic_dims import bind_upper_bounds, check_static_shapes
from .forward_prep import prepare_forward
from .optim import Optimizer
from .progress import Progress
from .reductions import blocked_reduction
from .rnn_gate_grads import weight_grads_per_gate
from .relax_walk import VIEW_OPS, attrs_dict, bindings, free_vars, ident, op_name, resolve
from .signature import StepNames
from .training_step import TrainingStep
from .zero_fills import fold_zero_fills

# the names this module had before it was split (tests and other modules import them)
_Progress = Progress
_VIEW_OPS = VIEW_OPS
_bindings, _op_name, _free_vars, _resolve = bindings, op_name, free_vars, resolve
_attrs_dict, _ident = attrs_dict, ident

__all__ = ["build_train_step", "TrainingStep", "BNSpec", "add_bn_stat_outputs",
           "blocked_reduction", "check_gradients", "check_static_shapes"]


def build_train_step(fwd: relax.Function, *, input_names, target_names, param_names,
                     optimizer: Optimizer, bn_specs=(), param_values: dict | None = None,
                     buffer_values: dict | None = None, meta: bool = False,
                     quiet: bool | None = None, progress: Callable[[str], None] | None = None,
                     extra_module: tvm.IRModule | None = None, carry_names=(),
                     precise_reductions: bool = True, frozen_names=()) -> TrainingStep:
    """Core: ``fwd(inputs..., targets..., params...) -> loss`` into a ``TrainingStep``.

    Parameters
    ----------
    fwd : relax.Function
        The forward with its loss. Its parameters are ordered inputs, targets, trainable
        parameters, frozen parameters, carried states, named by the arguments below.
    input_names, target_names, param_names : sequence of str
        Names of the inputs, the loss targets and the trainable parameters.
    optimizer : Optimizer
        The in-place update rule.
    bn_specs : sequence of BNSpec
        BatchNorm layers whose running statistics are states, in graph order.
    param_values, buffer_values : dict, optional
        Initial parameter and BatchNorm-statistic arrays by name.
    meta : bool
        The model had no weights (shapes only).
    quiet : bool, optional
        Stage messages (see ``progress.Progress``), unless ``progress`` is given.
    progress : callable, optional
        Receives a message at each stage.
    extra_module : tvm.IRModule, optional
        Functions carried into the result.
    carry_names : sequence of str
        States the forward returns updated after the loss (a backbone's).
    precise_reductions : bool
        Split multi-axis float reductions (see ``reductions.blocked_reduction``).
    frozen_names : sequence of str
        Frozen parameters: no gradient and no optimizer state; inputs of the step that it
        never updates.

    Returns
    -------
    TrainingStep
        With ``dynamic_bounds`` set where ``fwd`` had symbolic dims (each bounded by the
        ``tir_var_upper_bound`` attribute, else DynamicShapeError): the step is built for
        those bounds.
    """
    progress = progress or Progress(quiet)
    names = StepNames(tuple(input_names), tuple(target_names), tuple(param_names),
                      tuple(frozen_names), tuple(carry_names))
    if len(fwd.params) != len(names.in_order()):
        raise ValueError(f"forward has {len(fwd.params)} params, expected "
                         f"{len(names.inputs)}+{len(names.targets)}+{len(names.params)}+"
                         f"{len(names.frozen)}+{len(names.carried)}")
    # a symbolic dim with an upper bound is built (and planned) at that bound
    fwd, bounds = bind_upper_bounds(fwd)
    mod, bn_info = prepare_forward(fwd, names.in_order(), list(bn_specs), len(names.carried))
    _, pvars, _, _ = names.split(mod["fwd"].params)
    check_gradients(mod["fwd"], pvars)
    mod["fwd"], pvars, proxies = step_precision.before_gradient(mod["fwd"], pvars)
    adj = step_precision.after_gradient(differentiate(mod, pvars, progress), proxies)
    # an RNN weight's gradient is summed gate by gate, each gate's rows updated on their own
    # (in the parameter's dtype, so after the precision rewrites; rnn_gate_grads.py)
    adj = weight_grads_per_gate(adj)
    # sums with zero fills (adjoints started at zeros, an LSTM's first forget gate) drop them
    adj = fold_zero_fills(adj)
    progress("placing optimizer updates")
    mod, sig, update_deps = assemble(adj, names, optimizer, bn_info,
                                     precise_reductions=precise_reductions,
                                     extra_module=extra_module)
    return TrainingStep(mod=mod, signature=sig.sig, optimizer=optimizer, shapes=sig.shapes,
                        param_values=None if meta else param_values,
                        buffer_values=dict(buffer_values or {}), update_deps=update_deps,
                        hyper_dtypes=sig.hyper_dtypes, meta=meta, dynamic_bounds=bounds)
