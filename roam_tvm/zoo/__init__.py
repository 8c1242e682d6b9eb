"""roam_tvm.zoo: built-in model definitions (random init, no downloads) and user model factories.

>>> from roam_tvm.zoo import get_model
>>> spec = get_model("resnet18", small=True)
>>> loss = spec.wrapped()(*spec.example_inputs, *spec.targets)
"""
from .registry import MODELS, ZooError, get_model, load_factory, meta_args, model_names
from .spec import (LOSSES, OPTIMIZERS, LossWrapper, ModelInfo, ModelSpec, OptimizerConfig, compute_loss,
                   torch_optimizer)

__all__ = ["MODELS", "ZooError", "get_model", "load_factory", "meta_args", "model_names", "LOSSES", "OPTIMIZERS",
           "LossWrapper", "ModelInfo", "ModelSpec", "OptimizerConfig", "compute_loss", "torch_optimizer"]
