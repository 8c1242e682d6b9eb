"""roam_tvm.order: operator ordering (no TVM import).

``plan_order(g) -> OrderResult`` is the entry point; ``exact_order`` is the
small-graph oracle; the heuristics are usable on their own.
"""
from .exact import exact_order
from .heuristics import (HEURISTICS, best_heuristic, deferred_program_order, dfs_order,
                         list_schedule, program_order)
from .planner import OrderResult, plan_order
from .updates import DEFAULT_DELAY_RADIUS, schedule_updates

__all__ = ["plan_order", "OrderResult", "exact_order", "HEURISTICS", "best_heuristic",
           "program_order", "deferred_program_order", "list_schedule", "dfs_order",
           "schedule_updates", "DEFAULT_DELAY_RADIUS"]
