"""Plain-data training graph (no TVM): ops, tensors, aliases, liveness, bounds."""
from .model import ALWAYS_LIVE_KINDS, Graph, GraphBuilder, GraphError, Op, Tensor

__all__ = ["ALWAYS_LIVE_KINDS", "Graph", "GraphBuilder", "GraphError", "Op", "Tensor"]
