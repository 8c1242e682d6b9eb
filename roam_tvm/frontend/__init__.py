"""roam_tvm.frontend: a real training step (forward, backward, optimizer) in one Relax function.

    from roam_tvm.frontend import from_torch, from_backbone, TrainingStep, SGD, Adam, AdamW
    ts = from_torch(model, example_inputs, targets, loss="cross_entropy", optimizer=Adam(lr=1e-3))
    ts.mod["train_step"]   # see roam_tvm.frontend.step for the signature

"""

from .errors import (DynamicShapeError, FrontendError, ImportError_, MetaWeightsError,
                     MissingGradientError, TraceError, UnsupportedError)
from .optim import SGD, Adam, AdamW, Optimizer
from .training_step import TrainingStep
from .torch_import import from_torch

try:
    from .backbone import from_backbone
except ImportError:  # pragma: no cover - while backbone.py is being written
    pass

__all__ = ["from_torch", "from_backbone", "TrainingStep", "SGD", "Adam", "AdamW", "Optimizer",
           "FrontendError", "TraceError", "ImportError_", "MissingGradientError",
           "DynamicShapeError", "MetaWeightsError", "UnsupportedError"]
