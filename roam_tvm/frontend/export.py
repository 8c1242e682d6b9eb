"""``torch.export`` of a model together with its loss, in training mode."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from typing import Callable

from .amp import autocast
from .causal_mask import mask_hint_from_caller
from .complex_pairs import complex_as_pairs
from .checkpoint_regions import count_checkpoints, warn_checkpoints
from .errors import FrontendError, TraceError, UnsupportedError, model_frame
from .hf_experts import experts_implementations, exportable_experts
from .hf_default_mask import default_encoder_masks
from .hf_rope import settle_dynamic_rope, static_rope_updates
from .hf_rope_augment import rope_augmentation_off, warn_rope_augmentation
from .hf_solve_triangular import triangular_solves_traced
from .loss_input import apply_loss, first_output  # noqa: F401 - first_output: callers import it here
from .module_modes import kept_modes, to_train_mode
from .noop_casts import noop_module_casts
from .packed_sequence import traceable_packed_sequences
from .custom_functions import check_backwards, record_functions
from .dense_dispatch import dense_dispatch, warn_dense
from .drop_path import stochastic_depth_off, warn_stochastic_depth
from .topk_ties import find_topk_ties, has_topk, warn_topk_ties
from .traceable_ops import traceable_functionals
from .value_checks import ValueChecks, record_checks, warn_checks, watch_value_checks


def with_loss(model, n_inputs: int, loss_fn: Callable):
    """A module whose forward is ``loss_fn(model(*inputs), *targets)``; a named loss (tagged by
    ``losses.make_loss_fn``) reads the output's first tensor, a user callable the whole output
    (``loss_input.apply_loss``)."""
    import torch

    class _ModelWithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = self.model(*args[:n_inputs])
            return apply_loss(loss_fn, out, args[n_inputs:], named=getattr(loss_fn, "named_loss", False))

    return _ModelWithLoss()


def _model_frame(e: Exception) -> str:
    """Where in the model's own code (not torch's, not ours) the trace failed, or ''."""
    import os
    import traceback

    f = model_frame(traceback.extract_tb(e.__traceback__))
    if f is None:
        return ""
    code = f" ({f.line.strip()[:120]})" if f.line else ""
    return f" at {os.path.basename(f.filename)}:{f.lineno} in {f.name}{code}"


# torch.export's errors for a branch, loop or shape that depends on tensor values
_DATA_DEPENDENT = ("GuardOnDataDependentSymNode", "DataDependentOutputException",
                   "data-dependent", "data dependent")
_DATA_DEPENDENT_HINT = (
    " The forward loops, branches or sizes a tensor on tensor values (nonzero, boolean-mask "
    "indexing, a loop over the experts a router picked, a shape read back from a metadata tensor with "
    ".tolist() such as Qwen2-VL's grid_thw): the step is planned for static shapes. "
    "For a mixture of experts, run every expert on all tokens and weight the outputs by the "
    "routing mask (Hugging Face MoE layers with a config._experts_implementation are switched "
    "to 'batched_mm' automatically; ModuleDict experts such as Switch Transformers' are not).")


def _first_line(e: Exception) -> str:
    """The first non-blank line of ``e``'s message ('' if none)."""
    return next((ln for ln in str(e).strip().splitlines() if ln.strip()), "")


def _trace_error(model, e: Exception) -> TraceError:
    first = _first_line(e) or type(e).__name__
    hint = _DATA_DEPENDENT_HINT if any(k in type(e).__name__ + first for k in _DATA_DEPENDENT) else ""
    frame = _model_frame(e)
    if hint and "layerdrop" in frame:  # a random layer skip (NLLB-MoE defaults to 0.05): a branch on a draw
        hint = (" The forward skips layers at random (LayerDrop): set the config's encoder_layerdrop / "
                "decoder_layerdrop (or layerdrop) to 0.0 for the import.")
    if "fake tensor in the exported program constant" in first:  # e.g. Gemma3n's weight.data.clamp_()
        hint = (" The forward most likely writes a parameter through .data (e.g. weight.data.clamp_(), "
                "Gemma3n's AltUp coefficient clip), which torch.export cannot trace: do that after the "
                "optimizer step instead, or turn it off for the import (Gemma3n: altup_coef_clip=None).")
    return TraceError(
        f"torch.export could not trace {type(model).__name__} with its loss: "
        f"{type(e).__name__}: {first[:400]}{frame}.{hint} Make the forward traceable (no data-dependent "
        "Python control flow, no .item()/.numpy() on tensors; for Hugging Face models use "
        "attn_implementation='eager'), or pass a model that torch.export.export accepts.")


def _configs_with_cache(model) -> list:
    """The distinct Hugging Face configs (``config.use_cache`` true) of ``model`` and its submodules."""
    found: dict[int, object] = {}
    for module in model.modules():
        cfg = getattr(module, "config", None)
        if getattr(cfg, "use_cache", None) is True:
            found.setdefault(id(cfg), cfg)
    return list(found.values())


def _eager_check(what: str, check: Callable, *args) -> None:
    """Run one of the eager checks of what the trace cannot see; a failure of the model's own eager run
    names the check (it is not a trace failure: the model traced)."""
    try:
        check(*args)
    except FrontendError:
        raise
    except Exception as e:  # noqa: BLE001 - the model's own code, run eagerly
        first = _first_line(e)
        raise TraceError(
            f"the model traced, but checking {what} runs it eagerly on CPU, and that run failed: "
            f"{type(e).__name__}: {first[:300]}{_model_frame(e)}. roam-tvm cannot tell whether the traced step "
            "trains the same model without that run. Way out: make the model run eagerly on CPU with the example "
            "inputs (e.g. no CUDA-only kernel in a custom backward).") from None


def export_with_loss(model, example_inputs: tuple, targets: tuple, loss_fn: Callable, *,
                     precision: str | None = None, loss_scale: float = 1.0,
                     dynamic_shapes=None):
    """``torch.export`` of ``loss_fn(model(*example_inputs), *targets)`` in training mode.

    Parameters
    ----------
    model : torch.nn.Module
        The model; its training flag (and a Hugging Face ``config.use_cache``) is restored.
    example_inputs, targets : tuple of torch.Tensor
        The model's inputs and the loss targets.
    loss_fn : callable
        ``loss_fn(output, *targets) -> scalar``.
    precision : str, optional
        ``"bf16-amp"`` / ``"fp16-amp"``: export under ``torch.autocast`` (see ``amp.py``).
    loss_scale : float
        Static AMP loss scale the exported loss is multiplied by.
    dynamic_shapes : sequence, optional
        One ``torch.export`` spec per input, then per target.

    Returns
    -------
    torch.export.ExportedProgram
    """
    import torch

    wrapped = with_loss(model, len(example_inputs), loss_fn)
    if precision is not None:
        wrapped = autocast(wrapped, precision, loss_scale)
    restore = contextlib.ExitStack()
    restore.enter_context(kept_modes(model))
    to_train_mode(model)
    # HF: a KV cache in a training step only adds a bogus concat (to an empty cache, which TVM's importer
    # refuses); off in every config, also of a model the user wrapped in a module of their own
    cached = _configs_with_cache(model)
    for cfg in cached:
        cfg.use_cache = False
    # one spec per input, then per target; the wrapper takes *args
    ds = (tuple(dynamic_shapes),) if dynamic_shapes is not None else None
    try:
        # drop-path modules: the identity while traced and checked, as dropout is
        dropped_paths = restore.enter_context(stochastic_depth_off(model))
        rope_augmentations = restore.enter_context(rope_augmentation_off(model))  # the same for DINOv3's RoPE
        settle_dynamic_rope(model, example_inputs)  # dynamic RoPE's update, fixed by the static shapes
        args = example_inputs + targets
        implementations = experts_implementations(model)
        for k, experts in enumerate(implementations):  # HF MoE experts: the next form if one fails
            try:
                ep, ckpts, dense, functions, checks = _checked_export(wrapped, model, args, ds, experts)
                break
            except Exception:  # noqa: BLE001
                if k + 1 == len(implementations):
                    raise
    except FrontendError:
        raise
    except Exception as e:  # noqa: BLE001 - report any tracing failure cleanly
        raise _trace_error(model, e) from None
    finally:
        restore.close()
        for cfg in cached:
            cfg.use_cache = True
    warn_checkpoints(ckpts, type(model).__name__)  # traced as the plain forward: no recomputation
    warn_dense(dense, type(model).__name__)
    warn_stochastic_depth(dropped_paths, type(model).__name__)
    warn_rope_augmentation(rope_augmentations, type(model).__name__)
    warn_checks(checks, type(model).__name__)
    return ep


#: Traces of one export: the first, and one more per round of newly met value checks.
_CHECK_ATTEMPTS = 3


def _checked_export(wrapped, model, args: tuple, ds, experts: str | None):
    """``_export`` until no new value check is met, then the eager checks of what the trace cannot see;
    HF MoE experts run as ``experts`` throughout."""
    checks = ValueChecks()
    for attempt in range(_CHECK_ATTEMPTS):
        try:
            ep, ckpts, dense, functions = _export(wrapped, model, args, ds, checks, experts)
            break
        except Exception:
            # value checks met in the trace (assert / if ... raise): their outcome on the example,
            # then trace again with it (value_checks.py)
            if attempt + 1 == _CHECK_ATTEMPTS or not checks.pending - checks.outcomes.keys():
                raise
        with exportable_experts(model, experts):
            _eager_check("the value checks of its forward (assert / if ... raise on tensor values)",
                         record_checks, lambda: wrapped(*args), model, checks)
    with exportable_experts(model, experts):  # in training mode, as traced: a failure is the check's
        _eager_check("its value-sized selections traced dense (the model run with and without them)",
                     dense.check, wrapped, args, type(model).__name__)
        _eager_check(f"the backward of its autograd.Function(s) {', '.join(c.__qualname__ for c in functions)} "
                     "(the model's gradients with those backwards and with autodiff of their forwards)",
                     check_backwards, wrapped, args, model, functions)
        if has_topk(ep):
            ties = []
            _eager_check("its topk calls for ties (the model run once without gradients)",
                         lambda: ties.append(find_topk_ties(lambda: wrapped(*args), model)))
            warn_topk_ties(ties[0] if ties else 0, type(model).__name__)
    return ep, ckpts, dense, functions, checks


@contextlib.contextmanager
def _fake_tensor_log_quiet():
    """torch logs a failing fake-tensor op with a dump of its graph, and ``torch.export`` prints the partial
    graph to stderr, before raising; the raised error is what the user gets (``_trace_error``), so both
    dumps are dropped (logging handlers keep the stream they were made with: other logs still show)."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def _export(wrapped, model, args: tuple, ds, checks: ValueChecks, experts: str | None = None):
    """One ``torch.export`` of ``wrapped(*args)`` with the frontend's tracing helpers active; also
    the checkpoint count, the dense-dispatch record and the custom functions it met."""
    import torch

    with warnings.catch_warnings(), exportable_experts(model, experts), noop_module_casts(), \
            mask_hint_from_caller(), traceable_functionals(), traceable_packed_sequences(), \
            static_rope_updates(model), default_encoder_masks(model), complex_as_pairs(model), \
            count_checkpoints() as ckpts, dense_dispatch() as dense, record_functions() as functions, \
            watch_value_checks(checks), triangular_solves_traced(model), _fake_tensor_log_quiet():
        warnings.simplefilter("ignore")
        ep = torch.export.export(wrapped, args, strict=False, dynamic_shapes=ds)
    return ep, ckpts, dense, functions
