"""``roam-tvm compare --budget``: the budgeted roam planner beside the others.

The budgeted step is planned as ``roam`` is, with recomputation between order
and layout: dispatch/legalize/fuse (``schedule_for``), kernel scratch lifted,
the order ``RoamPlan`` keeps, ``RoamRemat(budget)``, roam's dataflow lowering,
``RoamLayout``; its peak comes
from the same simulator as every other planner's (``planned_peak``).

Two peaks are reported, honestly apart:

* ``remat_peak_bytes``: perfect packing on the call_tir-level graph, the
  quantity the recomputation planner guarantees to be ``<= budget_bytes``;
* ``peak_bytes``: the arena RoamLayout plans (alignment and fragmentation
  included). ``RoamRemat(layout=...)`` walks its recomputation path until this
  one fits too (one layout per plan tried), so ``fits`` is true unless the
  layout of the final module differs from the one measured.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import tvm

from .budget import Budget, resolve_budget
from .relax_remat import RoamRemat

__all__ = ["BudgetedPlan", "budget_report", "plan_budgeted"]


@dataclass
class BudgetedPlan:
    """A step planned under a budget: the module and what ``budget_report`` says of it."""

    #: the step after RoamLayout (arena offsets in place), ready for
    #: ``roam_tvm.runtime.pipeline.finalize_rest_passes`` and ``tvm.compile``
    module: tvm.IRModule
    report: dict


def budget_report(ts, budget: Budget, target: str = "llvm", unbudgeted_peak: int | None = None,
                  order_options: dict | None = None, layout_options: dict | None = None,
                  time_limit: float = 180.0) -> dict:
    """Plan ``ts`` under ``budget`` and simulate it (``plan_budgeted(...).report``)."""
    return plan_budgeted(ts, budget, target, unbudgeted_peak, order_options, layout_options, time_limit).report


def plan_budgeted(ts, budget: Budget, target: str = "llvm", unbudgeted_peak: int | None = None,
                  order_options: dict | None = None, layout_options: dict | None = None,
                  time_limit: float = 180.0, paths=None) -> BudgetedPlan:
    """Plan ``ts`` under ``budget`` and simulate it.

    Parameters
    ----------
    ts : TrainingStep
    budget : Budget
        Bytes, or a fraction of ``unbudgeted_peak``.
    target : str
    unbudgeted_peak : int, optional
        Roam's unbudgeted peak (the ``roam`` planner's simulated peak), the base
        of a fractional budget; default: roam's order with perfect packing.
    order_options, layout_options : dict, optional
        For ``RoamOrder`` and ``RoamLayout``.
    time_limit : float
        Seconds for the recomputation search (the issue's planning target);
        a truncated search is reported in the floor's text.
    paths : sequence of tuples, optional
        The recomputation planner's greedy paths (``RoamRemat(paths=...)``); default all.

    Returns
    -------
    BudgetedPlan
        ``module``: the planned step; ``report``: ``budget_bytes``, ``floor_bytes`` (the least
        budget met: the arena of the lowest plan, measured as the budget is), ``floor`` (its parts, as text) and
        ``planner`` (the ``roam-budget`` entry: peaks, overheads, recomputed ops).
    """
    from ..passes import RoamLayout, RoamPlan, extract_graph, latest_order
    from ..report.compare import with_param_kinds
    from ..report.simulate import lift_scratch, planned_peak, reorder_function_in, schedule_for
    from ..verify import check_plan
    from .check import check_recompute
    from ..runtime.pipeline import as_target, roam_lower_passes
    from ..runtime.targets import is_gpu_target

    func = ts.func_name
    tgt = as_target(target)
    start = time.perf_counter()
    # Start where the unbudgeted roam planner ends (report.simulate.run_planner): kernel scratch
    # lifted into the plan, roam's lowering, and the order RoamPlan kept (its own or the program's),
    # so that a budget at roam's peak needs no recomputation and a fraction means what it says.
    lower = roam_lower_passes(tgt)
    scheduled, _ = lift_scratch(schedule_for(with_param_kinds(ts), tgt), tgt)
    # The budget is exact to the byte: take roam's layout wherever it is lower, not only when it
    # saves a page over TVM's (RoamLayout's default min_saving, which on small steps keeps TVM's
    # plan and can miss a budget that roam's layout of the same step meets).
    layout = {**(layout_options or {}), "min_saving": 0}
    with tgt:
        RoamPlan(lower, {"functions": [func], **(order_options or {})}, layout_options)(scheduled)
        rec = latest_order(func)
        ordered = reorder_function_in(scheduled, func, rec.order) if rec and rec.order else scheduled
        if budget.fraction is not None and unbudgeted_peak is not None:
            budget = Budget(bytes=resolve_budget(budget, unbudgeted_peak), text=budget.text)
        remat = RoamRemat(budget, functions=[func], layout=layout, time_limit=time_limit, paths=paths)
        budgeted = remat.rewrite(ordered)
        lowered = tvm.transform.Sequential(lower)(budgeted)
        planned = RoamLayout(**layout)(lowered)
    seconds = time.perf_counter() - start
    # Two independent checks: the recomputation against roam's order, the
    # layout against the budgeted step it laid out.
    violations = check_recompute(ordered[func], budgeted[func], budgeted, gpu=is_gpu_target(tgt))
    violations += check_plan(lowered[func], planned[func], planned)
    peak, g = planned_peak(planned[func], planned)
    if func in remat.skipped:
        return BudgetedPlan(planned, _left_as_is(remat.skipped[func], budget, unbudgeted_peak or peak, peak, g,
                                                 violations, seconds))
    plan, floor = remat.plans[func], remat.floor(func)
    over = plan.report["overheads"]
    time_share = over.get("roofline")
    return BudgetedPlan(planned, {
        "budget_bytes": plan.budget,
        "floor_bytes": floor.bytes,
        "floor": floor.describe() + ("" if floor.measured else " (perfect packing on the call_tir-level graph)")
                 + (" (search stopped at its time limit)" if floor.truncated else ""),
        "planner": {
            "peak_bytes": peak,
            "intermediate_bytes": peak - g.always_live_bytes,
            "order_bound_bytes": extract_graph(lowered[func], lowered, func).graph.peak(),
            "valid": not violations,
            "note": "; ".join(f"plan checker: {v}" for v in violations[:3]),
            "method": (f"recompute {len(plan.source)} ops, {len(plan.inplace)} in place"
                       + (f", +{100 * time_share:.1f}% time" if time_share is not None else "")
                       + ("" if peak <= plan.budget else ", arena over budget")),
            "fits": peak <= plan.budget,
            "remat_peak_bytes": plan.peak,
            "unbudgeted_remat_peak_bytes": plan.report["unbudgeted_peak"],
            "overhead_flops": over.get("flops"),
            "overhead_time": over.get("roofline"),
            "overhead_bytes": over.get("bytes"),
            "recomputed_ops": len(plan.source),
            "inplace_ops": len(plan.inplace),
            "plan_seconds": seconds,
        },
    })


def _left_as_is(why: str, budget: Budget, base: int, peak: int, g, violations: list[str], seconds: float) -> dict:
    """``budget_report``'s answer when RoamRemat left the step without recomputation (it could not
    analyse it): the step's own peak against the budget, no floor, and why."""
    b = resolve_budget(budget, base)
    return {
        "budget_bytes": b,
        "floor_bytes": None,
        "floor": f"unknown: recomputation could not plan this step ({why})",
        "planner": {
            "peak_bytes": peak, "intermediate_bytes": peak - g.always_live_bytes, "order_bound_bytes": None,
            "valid": not violations,
            "note": "; ".join([f"no recomputation: {why}"] + [f"plan checker: {v}" for v in violations[:3]]),
            "method": "no recomputation (step left as it is)" + ("" if peak <= b else ", arena over budget"),
            "fits": peak <= b, "remat_peak_bytes": None, "unbudgeted_remat_peak_bytes": None,
            "overhead_flops": 0.0, "overhead_time": 0.0, "overhead_bytes": 0.0,
            "recomputed_ops": 0, "inplace_ops": 0, "plan_seconds": seconds,
        },
    }
