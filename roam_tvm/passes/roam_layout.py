"""RoamLayout: one arena per function and device, with planned offsets, in place of StaticPlanBlockMemory.

Runs where ``relax.transform.StaticPlanBlockMemory`` runs (after
``CallTIRRewrite``). For each Relax function:

1. extract the plain graph (``extract.py``; what aliases what is in
   ``aliasing.py``) and the lifetimes of every ``R.builtin.alloc_tensor`` in the
   current binding order;
2. solve the offsets with the layout core (``roam_tvm.layout``), one arena per
   ``runtime_device_index``, and validate them;
3. rewrite (``arena.py``): each device's arena is one ``R.memory.alloc_storage``
   and each planned tensor ``R.memory.ensure_zero_offset(R.memory.alloc_tensor(
   arena, offset, ...))``; the allocations roam does not place (returned
   tensors, escaped ones, those inside ``If`` branches) are then planned by
   StaticPlanBlockMemory as usual;
4. check the planned function against the input with the independent checker
   (``roam_tvm.verify``, which shares no code with the extractor); a plan it
   rejects, or cannot verify, is not emitted;
5. keep StaticPlanBlockMemory's plan instead unless ours is no worse in both
   total storage bytes and simulated peak, and at least ``min_saving`` bytes
   lower in one (ties and page-sized gains go to TVM's well-trodden plan).

A function that cannot be analysed (a dimension without an upper bound, a
construct outside the alias model) is left to StaticPlanBlockMemory with one
warning that names the function and the reason.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import tvm
from tvm import relax

from ..graph import GraphError
from .arena import ArenaPlan, default_alignment, plannable_tensors, rewrite_with_arenas, solve_arena
from .extract import ExtractError, RelaxGraph, _upper_bounds, extract_graph, tensor_bytes
from ..verify import check_plan
from .records import LayoutRecord, record_layout

__all__ = ["RoamLayout", "ArenaPlan", "PlanCost", "default_alignment", "plan_cost", "simulated_peak",
           "plan_function"]

# TVM's planner, bound once: the baseline must be TVM's own even where a caller
# has put RoamLayout in its place under the same name.
tvm_static_plan = relax.transform.StaticPlanBlockMemory


@dataclass(frozen=True)
class PlanCost:
    """What a planned function costs: storage bytes allocated, and the simulated peak."""

    storage_bytes: int
    peak_bytes: int

    def no_worse_than(self, other: "PlanCost") -> bool:
        return self.storage_bytes <= other.storage_bytes and self.peak_bytes <= other.peak_bytes

    def saves_over(self, other: "PlanCost", min_saving: int) -> bool:
        """No worse in either measure, and at least ``min_saving`` bytes lower in one."""
        gain = max(other.storage_bytes - self.storage_bytes, other.peak_bytes - self.peak_bytes)
        return self.no_worse_than(other) and gain >= max(min_saving, 1)


def simulated_peak(func: relax.Function, mod: tvm.IRModule) -> int:
    """Peak bytes of a memory-planned function (storage level, program order)."""
    return extract_graph(func, mod, planned=True).graph.peak()


def storage_bytes(func: relax.Function) -> int:
    """Bytes of every storage and unplanned tensor the function allocates (upper bounds)."""
    bounds = _upper_bounds(func)
    allocs: list[relax.Call] = []

    def visit(expr):  # collect only: an exception here would cross the FFI
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name in (
                "relax.memory.alloc_storage", "relax.vm.alloc_storage", "relax.builtin.alloc_tensor"):
            allocs.append(expr)

    relax.analysis.post_order_visit(func.body, visit)
    total = 0
    for call in allocs:
        if call.op.name == "relax.builtin.alloc_tensor":
            total += tensor_bytes(call.ty, bounds, "a tensor")[0]
        else:
            total += tensor_bytes(relax.TensorType(call.args[0], "uint8"), bounds, "a storage")[0]
    return total


def plan_cost(func: relax.Function, mod: tvm.IRModule) -> PlanCost:
    """Storage bytes and simulated peak of a planned function."""
    return PlanCost(storage_bytes(func), simulated_peak(func, mod))


def with_functions(mod: tvm.IRModule, updates: dict) -> tvm.IRModule:
    """A copy of ``mod`` with ``updates`` (GlobalVar -> function); ``mod`` is not changed."""
    out = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    for gv, func in updates.items():
        out[gv] = func
    return out


def _with(mod: tvm.IRModule, gv: tvm.ir.GlobalVar, func: relax.Function) -> tvm.IRModule:
    return with_functions(mod, {gv: func})


def plan_function(mod: tvm.IRModule, gv: tvm.ir.GlobalVar, alignment: int,
                  time_limit: float) -> tuple[relax.Function, list[ArenaPlan], RelaxGraph]:
    """Roam's plan of one function of ``mod`` (arenas, then TVM's planner on what is left).

    Raises
    ------
    ExtractError, GraphError, RuntimeError
        The function cannot be analysed, or no valid layout was found.
    """
    func = mod[gv]
    rg = extract_graph(func, mod, gv.name_hint)
    groups = plannable_tensors(rg)
    plans = [solve_arena(rg.graph, ts, alignment, time_limit, device) for device, ts in sorted(groups.items())]
    new_func = rewrite_with_arenas(mod, rg, plans) if plans else func
    # What roam does not place (returned, escaped, in branches) gets TVM's plan.
    new_func = tvm_static_plan()(_with(mod, gv, new_func))[gv]
    violations = check_plan(func, new_func, mod)
    if violations:
        raise RuntimeError(checker_verdict(violations))
    return new_func, plans, rg


def checker_verdict(violations: list[str]) -> str:
    """Why a plan is not emitted: the checker found it wrong, or has no model for something in the function."""
    if all(v.startswith("cannot verify") for v in violations):
        reasons = "; ".join(v.removeprefix("cannot verify:").strip() for v in violations[:3])
        return f"the plan checker cannot verify a plan of this function ({reasons})"
    return "the plan checker rejected the plan: " + "; ".join(violations[:3])


def fallback_reason(err: Exception, expected: tuple) -> str:
    """Why a pass left a function alone: an ``expected`` error's own message, else an internal error of ours."""
    if isinstance(err, expected):
        return str(err)
    return f"internal error {type(err).__name__}: {err} (please report it with the module)"


def choose_plan(mod: tvm.IRModule, baseline: tvm.IRModule, gv: tvm.ir.GlobalVar, alignment: int,
                time_limit: float, never_worse: bool = True,
                min_saving: int = 4096) -> tuple[relax.Function, PlanCost, LayoutRecord]:
    """The plan RoamLayout emits for one function, its cost, and the record of the decision.

    ``baseline`` is ``mod`` planned by StaticPlanBlockMemory. Roam's plan is
    chosen when it is no worse in storage bytes and simulated peak, and at
    least ``min_saving`` bytes lower in one (or always, with ``never_worse=False``).
    A function roam cannot analyse gets TVM's plan, with a warning.
    """
    name = gv.name_hint
    record = LayoutRecord(function=name, alignment=alignment)
    try:
        new_func, plans, rg = plan_function(mod, gv, alignment, time_limit)
        ours = plan_cost(new_func, _with(mod, gv, new_func))
        theirs = plan_cost(baseline[gv], baseline)
    except Exception as err:  # noqa: BLE001 - a drop-in pass must not stop the user's build
        reason = fallback_reason(err, (ExtractError, GraphError, RuntimeError))
        warnings.warn(f"RoamLayout: function {name!r} left to StaticPlanBlockMemory: {reason}")
        record.status = f"fallback: {reason}"
        return baseline[gv], _safe_cost(baseline[gv], baseline), record
    offsets = {t: off for p in plans for t, off in p.offsets.items()}
    g = rg.graph
    record.update(arena_bytes=sum(p.arena_bytes for p in plans),
                  lower_bound_bytes=sum(p.lower_bound_bytes for p in plans),
                  planned_tensors=len(offsets), seconds=sum(p.seconds for p in plans),
                  method="+".join(p.method for p in plans), peak_bytes=ours.peak_bytes,
                  static_plan_peak_bytes=theirs.peak_bytes, offsets=offsets,
                  lifetimes={t: life for p in plans for t, life in p.lifetimes.items()},
                  sizes={t: g.tensors[t].size for t in offsets}, names={t: g.tensors[t].name for t in offsets})
    if never_worse and not ours.saves_over(theirs, min_saving):
        record.status = (f"static-plan kept (roam {ours.storage_bytes} B storage / {ours.peak_bytes} B peak, "
                         f"StaticPlanBlockMemory {theirs.storage_bytes} / {theirs.peak_bytes})")
        return baseline[gv], theirs, record
    record.status = "roam"
    return new_func, ours, record


def _safe_cost(func: relax.Function, mod: tvm.IRModule) -> PlanCost | None:
    try:
        return plan_cost(func, mod)
    except Exception:  # noqa: BLE001 - no cost: callers keep TVM's plan
        return None


@tvm.transform.module_pass(opt_level=0, name="RoamLayout")
class RoamLayout:
    """Plan every Relax function's intermediate tensors into one arena per device.

    Parameters
    ----------
    alignment : int, optional
        Offset alignment in bytes. Default: what the current target needs
        (:func:`default_alignment`: 64, the runtime's allocation alignment).
    time_limit : float
        Seconds the layout solver may spend per function.
    never_worse : bool
        Keep StaticPlanBlockMemory's plan for any function where ours is not
        better in storage bytes or simulated peak, or is worse in either. Leave
        on except for ablations and tests of the raw plan.
    min_saving : int
        Bytes roam's plan must save (in storage or peak) to replace TVM's; below
        that, deviating from TVM's plan buys nothing (default: one 4 KiB page).
    """

    def __init__(self, alignment: int | None = None, time_limit: float = 10.0, never_worse: bool = True,
                 min_saving: int = 4096):
        if time_limit <= 0:
            raise ValueError(f"RoamLayout: time_limit must be > 0 seconds, got {time_limit}")
        if alignment is not None and alignment < 1:
            raise ValueError(f"RoamLayout: alignment must be >= 1 byte, got {alignment}")
        self.alignment = alignment
        self.time_limit = time_limit
        self.never_worse = never_worse
        if min_saving < 0:
            raise ValueError(f"RoamLayout: min_saving must be >= 0 bytes, got {min_saving}")
        self.min_saving = min_saving

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        alignment = self.alignment or default_alignment()
        baseline = tvm_static_plan()(mod)
        updates = {}
        for gv, func in mod.functions.items():
            if isinstance(func, relax.Function):
                updates[gv], _cost, record = choose_plan(mod, baseline, gv, alignment, self.time_limit,
                                                         self.never_worse, self.min_saving)
                record_layout(record)
            elif gv in baseline.functions:
                updates[gv] = baseline[gv]
        return with_functions(mod, updates)

