"""The peak simulator: one source of truth for every planner's figure.

Given a training module, each planner runs the same pipeline up to the point
where memory is planned, plans it its own way, and the planned Relax function
is read back as a storage-level graph (``extract_graph(..., planned=True)``):

* every ``R.memory.alloc_storage`` is one allocation, live from its first to its
  last use through any tensor placed in it;
* every unplanned ``R.builtin.alloc_tensor`` (outputs) is its own allocation;
* parameters, optimizer state and inputs are live throughout.

The peak is the highest total at any step, in the function's binding order.
The lower bounds are computed on the unplanned graph of the same step:
``order`` (perfect packing in the program order), ``any`` (the largest single
op) and ``cut`` (the least any topological order can do).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import tvm
from tvm import relax, tirx

from ..graph import Graph
from ..graph.bounds import any_bound, cut_profile
from ..graph.pair_bound import pair_cut_bound
from ..graph.set_bound import set_cut_bound
from ..order.dp import graph_optimum
from ..passes import LiftKernelScratch, RoamLayout, RoamOrder, RoamPlan, extract_graph, latest_layout, latest_order
from ..passes.arena import plannable_tensors
from ..passes.roam_order import reorder_function
from ..runtime.pipeline import dataflow_lower_passes, roam_lower_passes, legalize_passes, library_dispatch_passes, schedule_passes
from ..runtime.targets import as_target, is_gpu_target
from ..verify import check_plan
from .scratch import KernelScratch, kernel_scratch, op_requests, runtime_threads
from .workspace_pool import ScratchPeaks, scratch_peaks

PLANNERS = ("tvm-default", "roam-order-only", "roam-layout-only", "roam")
# planner -> (RoamOrder before lowering?, RoamLayout instead of StaticPlanBlockMemory?)
_PLANNER_PASSES = {
    "tvm-default": (False, False),
    "roam-order-only": (True, False),
    "roam-layout-only": (False, True),
    "roam": (True, True),
}


@dataclass
class PlannerResult:
    """One planner's figures for one function (bytes and seconds)."""

    peak_bytes: int
    order_bound_bytes: int
    intermediate_bytes: int
    plan_seconds: float
    valid: bool
    method: str = "planned"
    note: str = ""
    arena_bytes: int | None = None          # RoamLayout's arena (None: StaticPlanBlockMemory)
    arena_lower_bound_bytes: int | None = None  # max live bytes of the arena's tensors in this order
    # Kernel scratch (``scratch.py``, ``workspace_pool.py``); None when not computed.
    scratch_bytes: int | None = None            # the largest scratch of one op
    peak_with_scratch_bytes: int | None = None  # at each op: live + its kernel's scratch
    pool_peak_bytes: int | None = None          # live + what TVM's workspace pool holds

    def to_dict(self) -> dict:
        return asdict(self)


def planned_peak(func: relax.Function, mod: tvm.IRModule) -> tuple[int, Graph]:
    """Peak bytes of a memory-planned function, and its storage-level graph."""
    g = extract_graph(func, mod, planned=True).graph
    return g.peak(), g


def scratch_figures(func: relax.Function, mod: tvm.IRModule, scratch: dict[str, KernelScratch],
                    threads: int = 1) -> ScratchPeaks:
    """Peaks of a memory-planned function with its kernels' scratch (``kernel_scratch``)."""
    rg = extract_graph(func, mod, planned=True)
    return scratch_peaks(rg.graph.live_profile(), op_requests(func, rg.op_bindings, scratch), threads)


#: Seconds the pairwise and the set bound may each take on top of the cut (they only ever tighten it).
PAIR_SECONDS = 30.0


#: CPU seconds the exact search over the whole graph may take where the planners stayed above every
#: cut bound: it settles small steps, where a cut bound can be a few percent loose, in under one second
#: (a 72-op PixelShuffle CNN) to about sixteen (a 196-op MLP sharing one block three times, 134 MiB).
EXACT_SECONDS = 30.0


#: Arena padding (at the program order's peak) below this share of the peak is not worth a second cut.
ALIGNED_CUT_MIN_PADDING = 0.005


def lower_bounds(g: Graph, cut: bool = True, reached: int | None = None,
                 arena: dict[int, list[int]] | None = None, alignment: int = 64) -> dict[str, int]:
    """The ``order``, ``any``, ``cut``, ``pair``, ``set`` and ``exact`` lower bounds of an unplanned graph.

    ``pair`` (:func:`~roam_tvm.graph.pair_bound.pair_cut_bound`) and ``set``
    (:func:`~roam_tvm.graph.set_bound.set_cut_bound`) are at least ``cut``; they
    are above it where unrelated ops each need the others to run first, as the
    weight-gradient sums of an unrolled RNN do (two ops, or several in sequence).
    ``set`` is left out when ``reached`` (the least live-bytes peak of an order a planner reached, its
    perfect packing) is already at ``cut`` or ``pair``: no bound can prove more there. Where ``reached`` is above all
    three, ``exact`` is the least peak of any order, proved by the exhaustive down-set search
    (:func:`~roam_tvm.order.dp.graph_optimum`) when it finishes in ``EXACT_SECONDS``: on small
    steps each cut can be met by some order but no order meets them all at once.

    ``arena`` (device -> the tensors an arena may hold, :func:`~roam_tvm.passes.arena.plannable_tensors`)
    adds ``cut_aligned`` where padding matters (small steps, odd sizes): the least any order reaches when
    those tensors sit at ``alignment``-byte offsets of one arena per device, as RoamLayout places them.
    Each then takes its size rounded up, except the highest one of each arena, whose end is the arena's
    (hence, per arena, the largest padding of one of its tensors off). It bounds roam's arena plans, not
    TVM's separately allocated storages, whose figures count exact sizes.
    """
    out = {"order": g.peak(), "any": any_bound(g)}
    if cut:
        prof = cut_profile(g)
        out["cut"] = prof.bound
        out["pair"] = pair_cut_bound(g, prof, time_limit=PAIR_SECONDS)
        if reached is None or reached > out["pair"]:
            out["set"] = set_cut_bound(g, prof, time_limit=PAIR_SECONDS)
        proved = max(out["cut"], out["pair"], out.get("set", 0))
        if reached is not None and reached > proved:
            exact = graph_optimum(g, floor=proved, time_limit=EXACT_SECONDS)
            if exact is not None:
                out["exact"] = exact
        if arena:
            padded = g.aligned(alignment, [t for ts in arena.values() for t in ts])
            if padded.peak() - out["order"] > ALIGNED_CUT_MIN_PADDING * out["order"]:
                slack = sum(max(padded.tensors[t].size - g.tensors[t].size for t in ts) for ts in arena.values() if ts)
                out["cut_aligned"] = max(out["cut"], cut_profile(padded).bound - slack)
    return out


def param_kinds_attr(mod: tvm.IRModule, kinds: dict[str, str], func: str = "train_step") -> tvm.IRModule:
    """Attach ``roam.param_kinds`` (parameter name -> input/param/state) for reporting."""
    f = mod[func].with_attr("roam.param_kinds", kinds)
    out = mod.clone()
    out[func] = f
    return out


def reorder_function_in(mod: tvm.IRModule, func: str, order: list[int]) -> tvm.IRModule:
    """``mod`` with ``func``'s bindings in ``order`` (as RoamOrder emitted them)."""
    rg = extract_graph(mod[func], mod, func)
    out = mod.clone()
    out[func] = reorder_function(rg, order)
    return out


def schedule_for(mod: tvm.IRModule, target="llvm") -> tvm.IRModule:
    """Dispatch, legalize, fuse and schedule: the module every planner starts from."""
    target = as_target(target)
    with target:
        # Memory planning does not depend on how kernels are scheduled, so planning
        # skips the (slow) GPU scheduling; builds use the full pipeline.
        passes = library_dispatch_passes(target) + legalize_passes(target, schedule=None)
        return tvm.transform.Sequential(passes)(mod)


def scratch_for(scheduled: tvm.IRModule, target="llvm") -> tuple[dict[str, KernelScratch], int]:
    """Each kernel's scratch when ``scheduled`` is built for ``target``, and the CPU threads counted.

    GPU kernels are scheduled first (planning skips it; scratch depends on it).
    """
    target = as_target(target)
    if is_gpu_target(target):
        with target:
            scheduled = tvm.transform.Sequential(schedule_passes(target))(scheduled)
        return kernel_scratch(scheduled, target), 1
    return kernel_scratch(scheduled, target), runtime_threads()


def lift_scratch(scheduled: tvm.IRModule, target="llvm",
                 scratch: tuple[dict[str, KernelScratch], int] | None = None
                 ) -> tuple[tvm.IRModule, tuple[dict[str, KernelScratch], int] | None]:
    """``LiftKernelScratch`` on a scheduled module, as roam's pipeline runs it, and the
    kernels' scratch updated for the kernels it rewrote."""
    target = as_target(target)
    with target:
        lifted = LiftKernelScratch(target)(scheduled)
    if scratch is None:
        return lifted, None
    changed = {gv.name_hint: f for gv, f in lifted.functions.items()
               if isinstance(f, tirx.PrimFunc) and not f.same_as(scheduled[gv.name_hint])}
    kernels = dict(scratch[0])
    if changed:
        kernels.update(kernel_scratch(tvm.IRModule(changed), target))
    return lifted, (kernels, scratch[1])


def run_planner(scheduled: tvm.IRModule, planner: str, target="llvm", func: str = "train_step",
                order_options: dict | None = None, layout_options: dict | None = None,
                scratch: tuple[dict[str, KernelScratch], int] | None = None) -> tuple[PlannerResult, dict]:
    """Plan ``func`` of a scheduled module (``schedule_for``) with one planner and simulate its peak.

    ``scratch`` (from ``scratch_for``) adds the kernel-scratch columns.

    Returns the result and a dict of extras (the unplanned and planned graphs,
    the records the passes left) for reports and plots.
    """
    if planner not in _PLANNER_PASSES:
        raise ValueError(f"unknown planner {planner!r}; choose from {', '.join(PLANNERS)}, pytorch")
    use_order, use_layout = _PLANNER_PASSES[planner]
    target = as_target(target)
    seconds = 0.0
    if use_order or use_layout:  # roam's pipelines place kernel scratch in the plan
        start = time.perf_counter()
        scheduled, scratch = lift_scratch(scheduled, target, scratch)
        seconds += time.perf_counter() - start
    lower = roam_lower_passes(target) if use_order or use_layout else dataflow_lower_passes(target)
    with target:
        if use_order and use_layout:
            # The full planner: both candidates, never worse than tvm-default.
            start = time.perf_counter()
            planned = RoamPlan(lower, {"functions": [func], **(order_options or {})}, layout_options)(scheduled)
            seconds += time.perf_counter() - start
            rec = latest_order(func)
            kept_order = bool(rec and rec.order)
            mod = reorder_function_in(scheduled, func, rec.order) if kept_order else scheduled
            lowered = tvm.transform.Sequential(lower)(mod)
        else:
            mod = scheduled
            if use_order:
                start = time.perf_counter()
                mod = RoamOrder(functions=[func], **(order_options or {}))(mod)
                seconds += time.perf_counter() - start
            lowered = tvm.transform.Sequential(lower)(mod)
            start = time.perf_counter()
            if use_layout:
                planned = RoamLayout(**(layout_options or {}))(lowered)
            else:
                planned = relax.transform.StaticPlanBlockMemory()(lowered)
            seconds += time.perf_counter() - start
        unplanned_rg = extract_graph(lowered[func], lowered, func)
        unplanned = unplanned_rg.graph
        # The independent checker compares the plan with the step in its original order.
        reference = lowered if not use_order else tvm.transform.Sequential(lower)(scheduled)
    violations = check_plan(reference[func], planned[func], planned)
    peak, g = planned_peak(planned[func], planned)
    layout_rec = latest_layout(func) if use_layout else None
    order_rec = latest_order(func) if use_order else None
    notes = [r.status for r in (order_rec, layout_rec) if r is not None]
    notes += [f"plan checker: {v}" for v in violations[:3]]
    result = PlannerResult(peak_bytes=peak, order_bound_bytes=unplanned.peak(),
                           intermediate_bytes=peak - g.always_live_bytes, plan_seconds=seconds,
                           valid=not violations, note="; ".join(notes),
                           arena_bytes=layout_rec.arena_bytes if layout_rec and layout_rec.status == "roam" else None,
                           arena_lower_bound_bytes=layout_rec.lower_bound_bytes if layout_rec else None)
    if scratch is not None:
        figures = scratch_figures(planned[func], planned, scratch[0], scratch[1])
        result.scratch_bytes = figures.scratch_bytes
        result.peak_with_scratch_bytes = figures.peak_with_scratch_bytes
        result.pool_peak_bytes = figures.pool_peak_bytes
    extras = {"unplanned": unplanned, "arena_tensors": plannable_tensors(unplanned_rg), "planned_graph": g, "lowered": lowered, "planned": planned,
              "order_record": order_rec, "layout_record": layout_rec}
    return result, extras
