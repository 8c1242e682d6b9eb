"""roam_tvm.remat: fit a training step under a byte budget by recomputation (no TVM import).

``RematPlanner(g).plan(budget)`` / ``plan_remat(g, budget)`` give a
``RematPlan`` (graph with copies, order, peak <= budget); ``floor()`` names
the lowest budget; ``parse_budget`` reads ``--budget``.
"""
from .budget import Budget, format_bytes, parse_budget, resolve_budget
from .cost import COST_MODELS, op_costs
from .floor import BudgetError, Floor, lower_bound
from .planner import RematPlan, RematPlanner, plan_remat

__all__ = ["Budget", "parse_budget", "resolve_budget", "format_bytes", "COST_MODELS", "op_costs",
           "BudgetError", "Floor", "lower_bound", "RematPlan", "RematPlanner", "plan_remat"]
