"""roam_tvm.remat: fit a training step under a byte budget by recomputation (no TVM import).

``RematPlanner(g).plan(budget)`` / ``plan_remat(g, budget)`` give a
``RematPlan`` (graph with copies, order, peak <= budget) from one greedy
path; ``RematPortfolio`` (what ``RoamRemat`` uses) keeps the cheapest of
several; ``floor()`` names
the lowest budget; ``parse_budget`` reads ``--budget``. The Relax side is
``roam_tvm.remat.relax_remat.RoamRemat`` (imports TVM; not imported here).

Only the budget parser is imported eagerly, so that the command line can
check ``--budget`` before it loads numpy/scipy; the rest loads on first use.
"""
from importlib import import_module

from .budget import Budget, format_bytes, parse_budget, resolve_budget

_LAZY = {"COST_MODELS": ".cost", "op_costs": ".cost", "BudgetError": ".floor", "Floor": ".floor",
         "lower_bound": ".floor", "RematPlan": ".planner", "RematPlanner": ".planner", "plan_remat": ".planner",
         "RematPortfolio": ".portfolio"}

__all__ = ["Budget", "parse_budget", "resolve_budget", "format_bytes", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
