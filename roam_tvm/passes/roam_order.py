"""RoamOrder: reorder the bindings of Relax functions to lower their peak memory.

Runs on the scheduled, call_tir-level module (before dataflow lowering), or on a
lowered module where ``StaticPlanBlockMemory`` would run. For each function:

1. extract the plain graph (``extract.py``): ops, tensors, aliases, in-place
   updates, with write-after-read edges so no reader sees an updated value;
2. choose an order with the ordering core (``roam_tvm.order.plan_order``:
   segments, subgraph tree, MIP per piece, weight-update scheduling);
3. check it: a permutation that respects every dependency, and a simulated peak
   no higher than the input order's (otherwise the function is left as it was);
4. rewrite: emit the bindings of each block in the new order, and check it
   against the input with the independent checker (``roam_tvm.verify``);
5. on a lowered function (where memory planning runs), plan memory for the
   input order and for the new order as ``RoamLayout`` (default options) would,
   and keep the new order only if its plan is no worse in storage bytes and
   simulated peak and better in one. So ``Sequential([RoamOrder(), RoamLayout()])``
   is never worse than ``StaticPlanBlockMemory`` on the module as given.

Bindings never move across blocks. The decision is recorded
(``roam_tvm.passes.latest_order``) for reports and for ``RoamLayout``.
"""
from __future__ import annotations

import time
import warnings

import tvm
from tvm import relax

from ..graph import GraphError
from .extract import ExtractError, RelaxGraph, extract_graph
from ..verify import check_plan
from .records import OrderRecord, record_order
from .roam_layout import (checker_verdict, choose_plan, default_alignment, fallback_reason, tvm_static_plan,
                          with_functions)


def reorder_function(rg: RelaxGraph, order: list[int]) -> relax.Function:
    """Return ``rg.func`` with the bindings of each block emitted in ``order``."""
    func = rg.func
    blocks = list(func.body.blocks)
    per_block: list[list] = [[] for _ in blocks]
    for op in order:
        for bi, i in rg.op_bindings[op]:
            per_block[bi].append(blocks[bi].bindings[i])
    new_blocks = []
    for block, bindings in zip(blocks, per_block):
        if len(bindings) != len(block.bindings):
            raise ExtractError("internal: reordering lost bindings")
        cls = relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else relax.BindingBlock
        new_blocks.append(cls(bindings))
    body = relax.SeqExpr(new_blocks, func.body.body)
    new_func = relax.Function(list(func.params), body, func.ret_ty, func.is_pure, func.attrs)
    return relax.BlockBuilder().normalize(new_func)  # fills in the types of the rebuilt nodes


@tvm.transform.module_pass(opt_level=0, name="RoamOrder")
class RoamOrder:
    """Choose the operator order of each Relax function that minimises its peak memory.

    Parameters
    ----------
    time_limit : float
        Seconds the MIP may spend on each piece (per process). Pieces that time
        out keep the best order found, or a heuristic order.
    node_budget : int
        Maximum ops per piece of the subgraph tree (ROAM's NL, default 100).
    delay_radius : int, optional
        How many steps an optimizer update may be delayed past the point where
        its gradient is ready (``None``: the ordering core's default).
    jobs : int, optional
        Worker processes for solving pieces (default: number of cores).
    seed : int
        Seed for randomised heuristics, for reproducible plans.
    functions : list of str, optional
        Names of the functions to reorder (default: every Relax function).
    progress : bool
        Show a progress bar over the pieces.
    total_time_limit : float, optional
        Seconds for the whole function (default: the ordering core's, which
        grows with the graph: 60 s at 2.5k ops, 300 s from 15k ops).
    """

    def __init__(self, time_limit: float = 10.0, node_budget: int = 100, delay_radius: int | None = None,
                 jobs: int | None = None, seed: int = 0, functions: list[str] | None = None,
                 progress: bool = False, total_time_limit: float | None = None):
        if time_limit <= 0:
            raise ValueError(f"RoamOrder: time_limit must be > 0 seconds, got {time_limit}")
        if node_budget < 2:
            raise ValueError(f"RoamOrder: node_budget must be at least 2 ops, got {node_budget}")
        self.options = dict(time_limit=time_limit, node_budget=node_budget, jobs=jobs, seed=seed,
                            progress=progress)
        if delay_radius is not None:
            self.options["delay_radius"] = delay_radius
        if total_time_limit is not None:
            self.options["total_time_limit"] = total_time_limit
        self.functions = functions

    def plan(self, rg: RelaxGraph) -> tuple[list[int], OrderRecord]:
        """Order one extracted function (plain data in, plain data out)."""
        from ..order import plan_order

        # ordered on the sizes RoamLayout will pack (each rounded up to the arena alignment):
        # on small steps, padding is a few percent of the peak
        g = rg.graph.aligned(default_alignment())
        start = time.perf_counter()
        result = plan_order(g, **self.options)
        order = list(result.order)
        g.check_order(order)  # independent check, whatever the core did
        before, after = g.peak(), g.peak(order)
        status = "reordered"
        if after >= before:
            # No gain with perfect packing: keep the program order, which TVM's own
            # planner was tuned on (an equal-peak reorder can still pack worse).
            order, after, status = list(range(len(g.ops))), before, "kept program order (no gain)"
        rec = OrderRecord(function=g.name, status=status, ops=len(g.ops), pieces=result.pieces,
                          optimal=result.optimal, time_limited=result.time_limited, fallback=result.fallback,
                          peak_before=before, peak_after=after, cut_bound=result.report.get("cut_bound"),
                          optimal_proved=bool(result.report.get("optimal_proved")) and after == result.peak,
                          seconds=time.perf_counter() - start,
                          summary=result.summary() if hasattr(result, "summary") else "", order=order)
        return order, rec

    @staticmethod
    def _worse_for_layout(mod: tvm.IRModule, baseline: tvm.IRModule, gv: tvm.ir.GlobalVar,
                          new_func: relax.Function) -> str | None:
        """Why memory planned on ``new_func`` is not better than on the input order (``None``: it is).

        ``baseline`` is ``mod`` planned by StaticPlanBlockMemory."""
        alignment = default_alignment()
        reordered = with_functions(mod, {gv: new_func})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _f, before, _r = choose_plan(mod, baseline, gv, alignment, 10.0)
            _f, after, _r = choose_plan(reordered, tvm_static_plan()(reordered), gv, alignment, 10.0)
        if before is None or after is None:
            return "its memory plan could not be simulated"
        if after.no_worse_than(before) and after != before:
            return None
        return (f"memory planned on the new order ({after.storage_bytes} B storage, {after.peak_bytes} B peak) "
                f"is not better than on the input order ({before.storage_bytes} B, {before.peak_bytes} B)")

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        updates = {}
        baseline = None  # StaticPlanBlockMemory on the input module, planned once if a lowered function is reordered
        for gv, func in mod.functions.items():
            if not isinstance(func, relax.Function):
                continue
            if self.functions is not None and gv.name_hint not in self.functions:
                continue
            try:
                rg = extract_graph(func, mod, gv.name_hint)
                order, rec = self.plan(rg)
                if order != list(range(len(rg.graph.ops))):
                    new_func = reorder_function(rg, order)
                    violations = check_plan(func, new_func, mod)
                    worse = None
                    if rg.alloc_binding and not violations:
                        baseline = baseline if baseline is not None else tvm_static_plan()(mod)
                        worse = self._worse_for_layout(mod, baseline, gv, new_func)
                    if violations:
                        rec.status = f"kept input order: {checker_verdict(violations)}"
                        warnings.warn(f"RoamOrder: function {gv.name_hint!r} kept in its input order: "
                                      f"{checker_verdict(violations)}")
                    elif worse:
                        rec.status = f"kept input order: {worse}"
                        warnings.warn(f"RoamOrder: function {gv.name_hint!r} kept in its input order: {worse}")
                    else:
                        updates[gv] = new_func
            except Exception as err:  # noqa: BLE001 - a drop-in pass must not stop the user's build
                reason = fallback_reason(err, (ExtractError, GraphError))
                warnings.warn(f"RoamOrder: function {gv.name_hint!r} left in program order: {reason}")
                rec = OrderRecord(function=gv.name_hint, status=f"skipped: {reason}")
            record_order(rec)
        return with_functions(mod, updates) if updates else mod
