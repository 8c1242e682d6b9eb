"""roam-tvm: ROAM-style operator ordering and memory layout for training in TVM Relax.

    import roam_tvm
    ts = roam_tvm.from_torch(model, inputs, targets, loss="cross_entropy", optimizer=roam_tvm.Adam(lr=1e-3))
    exe = roam_tvm.runtime.build(ts.mod, "cuda")   # RoamOrder + RoamLayout in the pipeline

The solver core (``roam_tvm.graph``, ``roam_tvm.order``, ``roam_tvm.layout``) imports no TVM; the
frontend (torch) and the passes are imported on first use.
"""
__version__ = "0.1.0"

_FRONTEND = {"from_torch", "from_backbone", "TrainingStep", "SGD", "Adam", "AdamW", "FrontendError"}


def __getattr__(name: str):
    if name in _FRONTEND:
        from . import frontend

        return getattr(frontend, name)
    if name in ("RoamOrder", "RoamLayout"):
        from . import passes

        return getattr(passes, name)
    if name in ("runtime", "passes", "frontend", "zoo", "report", "graph", "order", "layout"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'roam_tvm' has no attribute {name!r}")
