"""Relax passes: ``RoamOrder`` (operator order) and ``RoamLayout`` (one arena with offsets)."""
from .extract import ExtractError, RelaxGraph, extract_graph
from .forward_tuples import ForwardTupleItems
from .lift_scratch import LiftKernelScratch
from .records import LayoutRecord, OrderRecord, clear_records, latest_layout, latest_order
from .roam_layout import RoamLayout
from .roam_order import RoamOrder
from .roam_plan import RoamPlan

__all__ = ["ExtractError", "ForwardTupleItems", "LiftKernelScratch", "RelaxGraph", "extract_graph", "RoamLayout", "RoamOrder", "RoamPlan", "LayoutRecord", "OrderRecord",
           "latest_layout", "latest_order", "clear_records"]
