"""Plain containers of the zoo: ``OptimizerConfig``, ``ModelSpec``, ``ModelInfo`` and the loss conventions.

Loss conventions (the frontend relies on them):

* ``cross_entropy``: ``F.cross_entropy(output, target)``, classes in dimension 1 (``[B, C, ...]`` output
  with ``[B, ...]`` class indices or ``[B, C, ...]`` probabilities); language-model logits ``[B, T, V]``
  with ``[B, T]`` class indices put the classes last: ``F.cross_entropy(logits.reshape(-1, V),
  targets.reshape(-1))``. A shape that fits both readings is refused.
* ``mse``: ``F.mse_loss(output, target)`` (mean over all elements).
* a callable ``loss(output, *targets) -> scalar tensor`` (user factories) is used as it is.

With several targets the losses are summed (the built-in models always have one target).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

LOSSES = ("cross_entropy", "mse")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


@dataclass(frozen=True)
class OptimizerConfig:
    """Hyper-parameters of the optimizer of one training step.

    ``kind``: ``sgd`` (plain), ``momentum`` (SGD with a momentum buffer), ``adam`` (L2 ``weight_decay``
    added to the gradient, as ``torch.optim.Adam``) or ``adamw`` (decoupled weight decay, as
    ``torch.optim.AdamW``). As in ``torch.optim``: ``sgd`` with ``momentum > 0`` is SGD with momentum
    (kind ``momentum``), and ``weight_decay`` left out is 0.01 for ``adamw`` and 0 otherwise.
    """

    kind: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: Optional[float] = None

    def __post_init__(self):
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer kind {self.kind!r}; valid: {', '.join(OPTIMIZERS)}")
        if self.kind == "sgd" and self.momentum > 0.0:  # torch.optim.SGD(momentum=m) keeps a buffer
            object.__setattr__(self, "kind", "momentum")
        if self.kind == "momentum" and self.momentum <= 0.0:
            object.__setattr__(self, "momentum", 0.9)
        if self.weight_decay is None:
            object.__setattr__(self, "weight_decay", 0.01 if self.kind == "adamw" else 0.0)
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        self._check_ranges()

    def _check_ranges(self) -> None:
        """torch.optim's own checks, so a bad value is refused before any slow work."""
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr}")
        if not (math.isfinite(self.momentum) and self.momentum >= 0):
            raise ValueError(f"momentum must be >= 0, got {self.momentum}")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")
        if not (math.isfinite(self.eps) and self.eps >= 0):
            raise ValueError(f"eps must be >= 0, got {self.eps}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")

    @property
    def state_per_param(self) -> int:
        """Number of parameter-sized state tensors this optimizer keeps per parameter."""
        return {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}[self.kind]

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d


class ZooError(ValueError):
    """Unknown model, bad sizes, or a user factory that cannot be loaded."""


def torch_optimizer(config: OptimizerConfig, params, **extra) -> torch.optim.Optimizer:
    """The ``torch.optim`` optimizer equivalent to ``config`` (``extra`` is passed on, e.g. ``foreach``)."""
    params = list(params)
    if config.kind == "sgd":
        return torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay, **extra)
    if config.kind == "momentum":
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay, **extra)
    if config.kind == "adam":
        return torch.optim.Adam(params, lr=config.lr, betas=config.betas, eps=config.eps,
                                weight_decay=config.weight_decay, **extra)
    if config.kind == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, betas=config.betas, eps=config.eps,
                                 weight_decay=config.weight_decay, **extra)
    raise ValueError(f"unknown optimizer kind {config.kind!r}")


def check_loss(loss) -> None:
    """Raise ``ValueError`` unless ``loss`` is a loss name of ``LOSSES`` or a callable."""
    if not callable(loss) and loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; valid: {', '.join(LOSSES)} or a callable "
                         "loss(output, *targets) -> scalar tensor")


def loss_name(loss) -> str:
    """A JSON-able name: the loss name, or the callable's ``__qualname__``."""
    return loss if isinstance(loss, str) else getattr(loss, "__qualname__", type(loss).__name__)


def _cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # the reference used by the PyTorch baseline; roam_tvm.frontend.losses implements it apart
    if target.is_floating_point() or output.dim() <= 2:
        return F.cross_entropy(output, target)
    dim1 = tuple(target.shape) == tuple(output.shape[:1] + output.shape[2:])
    last = tuple(target.shape) == tuple(output.shape[:-1])
    if dim1 and last:
        raise ValueError(f"cross_entropy is ambiguous for output {list(output.shape)} with targets "
                         f"{list(target.shape)}; pass a loss callable")
    if last:
        return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
    return F.cross_entropy(output, target)


def compute_loss(kind, output: torch.Tensor, *targets: torch.Tensor) -> torch.Tensor:
    """The scalar loss of ``output`` against ``targets`` under the zoo's loss conventions."""
    if callable(kind):
        return kind(output, *targets)
    check_loss(kind)
    if not targets:
        raise ValueError("compute_loss needs at least one target tensor")
    total = None
    for target in targets:
        if kind == "cross_entropy":
            term = _cross_entropy(output, target)
        else:
            term = F.mse_loss(output, target)
        total = term if total is None else total + term
    return total


class LossWrapper(nn.Module):
    """``forward(*inputs, *targets) -> scalar loss``: the module that gets exported.

    The wrapped model is registered as ``self.model``, so parameter names get a ``model.`` prefix.
    """

    def __init__(self, model: nn.Module, loss, num_inputs: int):
        super().__init__()
        check_loss(loss)
        self.model = model
        self.loss = loss
        self.num_inputs = num_inputs

    def forward(self, *args):
        from roam_tvm.frontend.loss_input import apply_loss, first_output  # frontend imports the zoo

        inputs, targets = args[: self.num_inputs], args[self.num_inputs:]
        out = self.model(*inputs)
        if callable(self.loss):  # the whole output, as ``from_torch`` gives a callable
            return apply_loss(self.loss, out, targets, named=False)
        # a Hugging Face ModelOutput (``.logits``), dict or tuple: the tensor the step trains on,
        # as ``from_torch`` reads it, so PyTorch's step is the same step
        return compute_loss(self.loss, first_output(out), *targets)


@dataclass
class ModelSpec:
    """One model, ready for a training step.

    ``model`` is in train mode and its ``forward(*example_inputs)`` returns a single tensor (the logits, or
    the prediction for ``mse``). ``config`` records the sizes used (JSON-able). ``meta`` tells whether the
    parameters live on the ``meta`` device (no storage).
    """

    name: str
    model: nn.Module
    example_inputs: Tuple[torch.Tensor, ...]
    targets: Tuple[torch.Tensor, ...]
    loss: Any = "cross_entropy"  # a name of LOSSES or a callable loss(output, *targets)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    config: Dict[str, Any] = field(default_factory=dict)
    small: bool = False
    meta: bool = False
    description: str = ""

    def __post_init__(self):
        check_loss(self.loss)
        self.example_inputs = tuple(self.example_inputs)
        self.targets = tuple(self.targets)

    def loss_fn(self, output: torch.Tensor, *targets: torch.Tensor) -> torch.Tensor:
        """The scalar loss of ``output`` (the model's forward result) against ``targets``."""
        return compute_loss(self.loss, output, *targets)

    def wrapped(self) -> LossWrapper:
        """An ``nn.Module`` whose ``forward(*example_inputs, *targets)`` returns the scalar loss."""
        return LossWrapper(self.model, self.loss, len(self.example_inputs))

    @property
    def args(self) -> Tuple[torch.Tensor, ...]:
        """``example_inputs + targets``: the arguments of ``wrapped()``."""
        return self.example_inputs + self.targets

    def num_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def param_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def make_optimizer(self, params=None, **extra) -> torch.optim.Optimizer:
        """``torch_optimizer(self.optimizer, params or self.model.parameters())``."""
        return torch_optimizer(self.optimizer, self.model.parameters() if params is None else params, **extra)


@dataclass(frozen=True)
class ModelInfo:
    """Registry entry: how to build a model and its default / small sizes."""

    description: str
    defaults: Dict[str, Any]
    small_sizes: Dict[str, Any]
    needs_meta_for_default: bool
    builder: Callable[..., ModelSpec] = field(repr=False, compare=False, default=None)
    sizes: Tuple[str, ...] = ("batch",)  # which of batch / seq / image apply

    @property
    def default_sizes(self) -> Dict[str, Any]:
        return dict(self.defaults)
