"""roam_tvm.frontend: a real training step (forward, backward, optimizer) in one Relax function.

    from roam_tvm.frontend import from_torch, from_backbone, TrainingStep, SGD, Adam, AdamW
    ts = from_torch(model, example_inputs, targets, loss="cross_entropy", optimizer=Adam(lr=1e-3))
    ts.mod["train_step"]   # see roam_tvm.frontend.step for the signature

"""

import importlib

# Names resolve on first use (PEP 562): importing one submodule (the loss conventions the
# PyTorch baseline shares, say) must not load TVM's compiler, which a GPU machine that only
# runs prebuilt steps does not have (benchmarks/gpu_run.py).
_WHERE = {
    **{name: "errors" for name in ("DynamicShapeError", "FrontendError", "ImportError_", "MetaWeightsError",
                                   "MissingGradientError", "TraceError", "UnsupportedError")},
    **{name: "optim" for name in ("SGD", "Adam", "AdamW", "Optimizer")},
    "TrainingStep": "training_step",
    "from_torch": "torch_import",
    "from_backbone": "backbone",
}

__all__ = ["from_torch", "from_backbone", "TrainingStep", "SGD", "Adam", "AdamW", "Optimizer",
           "FrontendError", "TraceError", "ImportError_", "MissingGradientError",
           "DynamicShapeError", "MetaWeightsError", "UnsupportedError"]


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
