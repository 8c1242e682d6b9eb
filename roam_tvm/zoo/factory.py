"""User models: ``load_factory("path/to/file.py:factory")`` -> :class:`ModelSpec`.

Everything the factory returns is checked here, before any tracing, so a bad factory gets one
clear :class:`ZooError` instead of a traceback from deep inside ``torch.export`` or TVM.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from .dynamic import expand_to_upper_bounds
from .spec import LOSSES, ModelSpec, OptimizerConfig, ZooError, loss_name

DICT_KEYS = ("model", "example_inputs", "targets", "loss", "optimizer", "dynamic_shapes")
DEFAULT_OPTIMIZER = OptimizerConfig("sgd", lr=0.01)


def _import_factory(ref: str) -> Tuple[Callable, str]:
    if not isinstance(ref, str) or ":" not in ref:
        raise ZooError(f"expected 'path/to/file.py:factory', got {ref!r}")
    path, func_name = ref.rsplit(":", 1)
    if not path or not func_name:
        raise ZooError(f"expected 'path/to/file.py:factory', got {ref!r}")
    if not os.path.isfile(path):
        raise ZooError(f"model file {path!r} not found")
    mod_name = "roam_tvm_user_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec_ = importlib.util.spec_from_file_location(mod_name, path)
    if spec_ is None or spec_.loader is None:
        raise ZooError(f"cannot import {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec_)
    sys.modules[mod_name] = module
    try:
        spec_.loader.exec_module(module)
    except Exception as exc:
        raise ZooError(f"importing {path!r} failed: {type(exc).__name__}: {exc}") from exc
    factory = getattr(module, func_name, None)
    if factory is None or not callable(factory):
        funcs = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise ZooError(f"{path!r} has no callable {func_name!r}; callables there: {', '.join(funcs) or 'none'}")
    return factory, func_name


def _unpack(result: Any, ref: str) -> Dict[str, Any]:
    """The factory's tuple or dict -> a dict with the keys of ``DICT_KEYS`` it gave."""
    if isinstance(result, dict):
        unknown = sorted(str(k) for k in result if k not in DICT_KEYS)
        if unknown:
            raise ZooError(f"{ref}: the factory's dict has unknown keys {unknown}; valid keys: {', '.join(DICT_KEYS)}")
        missing = [k for k in DICT_KEYS[:3] if k not in result]
        if missing:
            raise ZooError(f"{ref}: the factory's dict lacks {missing}")
        return dict(result)
    if isinstance(result, (tuple, list)) and len(result) in (3, 4):
        return dict(zip(DICT_KEYS[:4], result))
    got = f"a {type(result).__name__} of length {len(result)}" if isinstance(result, (tuple, list)) else \
        type(result).__name__
    raise ZooError(f"{ref}: factory() must return (model, example_inputs, targets[, loss]) or a dict with keys "
                   f"{', '.join(DICT_KEYS)}; got {got}")


def _tensors(value: Any, what: str, ref: str, empty_ok: bool = False) -> Tuple[torch.Tensor, ...]:
    items = (value,) if isinstance(value, torch.Tensor) else value
    if not isinstance(items, (tuple, list)):
        raise ZooError(f"{ref}: {what} must be a tensor or a tuple of tensors, got {type(value).__name__}")
    for i, t in enumerate(items):
        if not isinstance(t, torch.Tensor):
            hint = " (tokenize text into integer id tensors first)" if isinstance(t, str) else ""
            raise ZooError(f"{ref}: {what}[{i}] is a {type(t).__name__} ({str(t)[:40]!r}), expected a "
                           f"torch.Tensor{hint}")
    if not items and not empty_ok:
        raise ZooError(f"{ref}: {what} is empty; at least one tensor is needed" + (
            " (a model that returns its own loss takes no targets with a loss callable, e.g. "
            "loss=lambda out: out)" if what == "targets" else ""))
    return tuple(items)


def _optimizer(opt: Any, ref: str) -> Optional[OptimizerConfig]:
    if opt is None or isinstance(opt, OptimizerConfig):
        return opt
    if isinstance(opt, dict):
        try:
            return OptimizerConfig(**opt)
        except (TypeError, ValueError) as exc:
            raise ZooError(f"{ref}: bad optimizer {opt!r}: {exc}") from None
    raise ZooError(f"{ref}: optimizer must be an OptimizerConfig or a dict of its fields "
                   f"(kind, lr, momentum, betas, eps, weight_decay), got {type(opt).__name__}")


def load_factory(ref: str, loss: Optional[str] = None, optimizer: Optional[OptimizerConfig] = None,
                 name: Optional[str] = None) -> ModelSpec:
    """Load a user model from ``"path/to/file.py:factory"``.

    The factory contract: ``factory()`` is called without arguments and returns either

    * a tuple ``(model, example_inputs, targets)`` or ``(model, example_inputs, targets, loss)``, or
    * a dict with keys ``model``, ``example_inputs``, ``targets`` and optionally ``loss``, ``optimizer``,
      ``dynamic_shapes`` (any other key is an error, so a typo is not silently ignored).

    ``model`` is a ``torch.nn.Module``; its forward returns the tensor the loss reads (or an object whose
    ``logits`` / ``last_hidden_state`` / first element is that tensor). ``example_inputs`` and ``targets``
    are a tensor or a tuple of tensors. ``loss`` is ``"cross_entropy"`` (PyTorch's convention: classes in
    dimension 1; ``[B, T, V]`` logits with ``[B, T]`` targets: classes last), ``"mse"``, or a callable
    ``loss(output, *targets) -> scalar tensor`` (it gets the whole output, e.g. a ``(logits, aux_loss)``
    tuple or a dict, or the first tensor if it fails on the whole one); without one, integer targets mean ``cross_entropy`` and
    floating ones ``mse``. ``optimizer`` is an ``OptimizerConfig`` or a dict of its fields (default: SGD,
    lr 0.01). ``dynamic_shapes`` holds one ``torch.export`` spec per input, then per target (``None``,
    ``{dim: torch.export.Dim(name, max=N)}`` or a list with one entry per dim); the step is planned at each
    dynamic dim's upper bound ``N`` (the example tensors are tiled to it), which ``config["dynamic_bounds"]``
    states. A dynamic dim without a finite ``max`` is refused.

    Parameters
    ----------
    ref : str
        ``"path/to/file.py:factory"``.
    loss, optimizer : optional
        Override what the factory gives.
    name : str, optional
        The model's name in reports (default: the factory's name).

    Raises
    ------
    ZooError
        The file or factory cannot be loaded, the factory raises, or what it returns breaks the contract.
    """
    factory, func_name = _import_factory(ref)
    try:
        result = factory()
    except Exception as exc:  # noqa: BLE001 - the user's code: report it in one line
        raise ZooError(f"{ref}: the factory {func_name}() raised {type(exc).__name__}: {exc}") from exc
    got = _unpack(result, ref)
    model = got["model"]
    if not isinstance(model, torch.nn.Module):
        raise ZooError(f"{ref}: the model must be a torch.nn.Module, got {type(model).__name__}")
    inputs = _tensors(got["example_inputs"], "example_inputs", ref)
    loss = loss or got.get("loss")
    # no targets: the model returns its own loss (targets among its inputs), read by a loss callable
    targets = _tensors(got["targets"], "targets", ref, empty_ok=callable(loss))
    if loss is None:
        loss = "mse" if targets[0].is_floating_point() else "cross_entropy"
    if not callable(loss) and loss not in LOSSES:
        raise ZooError(f"{ref}: unknown loss {loss!r}; valid: {', '.join(LOSSES)} or a callable "
                       "loss(output, *targets) -> scalar tensor")
    opt = optimizer or _optimizer(got.get("optimizer"), ref)
    bounds: Dict[str, int] = {}
    if got.get("dynamic_shapes") is not None:
        inputs, targets, bounds = expand_to_upper_bounds(inputs, targets, got["dynamic_shapes"], ref)
    if not model.training:  # a model handed over in train mode keeps its modules' own flags (eval BN)
        model.train()
    meta = any(p.is_meta for p in model.parameters())
    config = {"name": name or func_name, "factory": ref, "loss": loss_name(loss),
              "input_shapes": [list(t.shape) for t in inputs], "target_shapes": [list(t.shape) for t in targets]}
    if bounds:
        config["dynamic_bounds"] = bounds
    return ModelSpec(name=name or func_name, model=model, example_inputs=inputs, targets=targets, loss=loss,
                     optimizer=opt or DEFAULT_OPTIMIZER, config=config, small=False, meta=meta,
                     description=f"user model from {ref}")
