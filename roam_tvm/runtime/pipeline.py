"""The roam-tvm Relax compilation pipeline: one place that says where each pass sits.

::

    library dispatch          DispatchSampling, DispatchSortScan (TVM's, per target)
    legalize                  LegalizeOps, AnnotateTIROpPattern, FoldConstant, SplatConstants, FuseOps, FuseTIR
    schedule (GPU only)       robust_schedule(target)      (replaces dl.ApplyDefaultSchedule)
    [LiftKernelScratch]       if order or layout (CPU targets): kernel intermediates that would
                              be run-time workspace are removed where they are waste, and the
                              rest become extra call_tir outputs, planned like any tensor
    [RoamOrder]               if order=True: rewrites binding order of the call_tir-level module
                              (order and layout both on: RoamPlan runs RoamOrder, lowering and
                              RoamLayout, keeping per function the better of new and program order)
    dataflow lowering         RewriteDataflowReshape, ToNonDataflow, RemovePurityChecking,
                              CallTIRRewrite
    ---- memory planning ---- lower_to_memory_planning() stops here
    [RoamLayout | StaticPlanBlockMemory]
    finalize                  TVM's finalize passes for the target, minus StaticPlanBlockMemory
                              (cuda: RewriteCUDAGraph, LowerAllocTensor, KillAfterLastUse,
                              LowerRuntimeBuiltin, ComputePrimValue, VMShapeLower,
                              AttachGlobalSymbol)
    check (GPU only)          RequireDeviceKernels: no PrimFunc touches device memory
                              outside a thread binding

``pipeline(target, order=False, layout=False)`` is the ``tvm-default`` planner: the
same passes as ``relax.get_default_pipeline(target)`` (TVM's per-target backend
pipeline), except that on GPU targets the dlight schedule is applied by
``robust_schedule`` (which tries the same rules in the same order and only differs
where the stock rule would crash or produce a kernel that does not lower).
Pass ``schedule="dlight"`` to get TVM's stock ``dl.ApplyDefaultSchedule`` instead.

Note on llvm: ``tvm.compile(mod, "llvm")`` with ``relax_pipeline="default"`` uses
``relax.pipeline.default_build_pipeline`` which does *not* fuse (no FuseOps/FuseTIR),
whereas ``relax.get_default_pipeline(llvm)`` does. We follow the per-target backend
pipeline (fused), so that CPU and GPU builds see the same fused graph as the planner.

The pipeline is also registered as the named Relax pipeline ``"roam"`` (TVM 0.27
has ``relax.pipeline.register_pipeline``), so
``tvm.compile(mod, target, relax_pipeline="roam")`` works; the target is then taken
from ``tvm.target.Target.current()`` (``tvm.compile`` enters the target scope before
running the pipeline), and ``order``/``layout`` take their defaults (both on).
"""

from __future__ import annotations

import logging
from typing import Any

import tvm
from tvm import relax

from ..passes import ForwardTupleItems, LiftKernelScratch, RoamLayout, RoamOrder, RoamPlan
from .schedule import robust_schedule, stock_dlight_schedule
from .targets import as_target, is_gpu_target
from .kernel_audit import RequireDeviceKernels
from .splat_constants import SplatConstants

logger = logging.getLogger(__name__)

__all__ = [
    "as_target",
    "is_gpu_target",
    "library_dispatch_passes",
    "legalize_passes",
    "schedule_passes",
    "dataflow_lower_passes",
    "roam_lower_passes",
    "memory_plan_passes",
    "finalize_passes",
    "pre_planning_pipeline",
    "pipeline",
    "lower_to_memory_planning",
    "split_options",
]

_SPBM = "StaticPlanBlockMemory"


# --------------------------------------------------------------------------- helpers
def split_options(options: dict[str, Any]) -> tuple[dict, dict, dict]:
    """Split ``**options`` into (order_options, layout_options, rest).

    ``order_options=`` / ``layout_options=`` dicts are taken as given; keys named
    ``order_<name>`` / ``layout_<name>`` are routed to RoamOrder / RoamLayout as
    ``<name>``. Everything else is returned in ``rest``.
    """
    options = dict(options)
    order_opts = dict(options.pop("order_options", None) or {})
    layout_opts = dict(options.pop("layout_options", None) or {})
    rest = {}
    for key, val in options.items():
        if key.startswith("order_"):
            order_opts[key[len("order_") :]] = val
        elif key.startswith("layout_"):
            layout_opts[key[len("layout_") :]] = val
        else:
            rest[key] = val
    return order_opts, layout_opts, rest


# --------------------------------------------------------------------------- stages
def library_dispatch_passes(target) -> list[tvm.transform.Pass]:
    """TVM's library dispatch passes for the target."""
    target = as_target(target)
    try:
        return list(relax.pipeline.library_dispatch_passes(target))
    except ValueError:
        return [relax.backend.DispatchSampling(), relax.backend.DispatchSortScan()]


def legalize_passes(target, schedule: str | None = "robust") -> list[tvm.transform.Pass]:
    """Legalize + fuse, then (GPU only) schedule.

    schedule: "robust" (default) -> robust_schedule(target); "dlight" -> TVM's stock
    dl.ApplyDefaultSchedule(Matmul, GEMV, Reduction, GeneralReduction, Fallback);
    None -> no scheduling (the module will not build for GPU unless already scheduled).
    """
    target = as_target(target)
    passes = [
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        SplatConstants(),  # zeros/full tensors are filled when needed, not held all step
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
    return passes + schedule_passes(target, schedule)


def schedule_passes(target, schedule: str | None = "robust") -> list[tvm.transform.Pass]:
    """The TIR scheduling step (empty for CPU targets)."""
    target = as_target(target)
    if schedule is None or not is_gpu_target(target):
        return []
    if schedule == "robust":
        return [robust_schedule(target)]
    if schedule == "dlight":
        return [stock_dlight_schedule()]
    raise ValueError(f"unknown schedule {schedule!r}; expected 'robust', 'dlight' or None")


def dataflow_lower_passes(target=None) -> list[tvm.transform.Pass]:
    """Dataflow lowering: the same four passes for every TVM backend in 0.27."""
    return [
        relax.transform.RewriteDataflowReshape(),
        relax.transform.ToNonDataflow(),
        relax.transform.RemovePurityChecking(),
        relax.transform.CallTIRRewrite(),
    ]


def roam_lower_passes(target=None) -> list[tvm.transform.Pass]:
    """Dataflow lowering for roam's planners: TVM's four passes, then ``ForwardTupleItems``
    (a multi-output call's tuple, only taken apart, would keep its tensors alive in the VM)."""
    return dataflow_lower_passes(target) + [ForwardTupleItems()]


def memory_plan_passes(layout: bool = True, **layout_options) -> list[tvm.transform.Pass]:
    """[RoamLayout(**layout_options)] if layout else [StaticPlanBlockMemory()]."""
    if layout:
        return [RoamLayout(**layout_options)]
    if layout_options:
        raise TypeError(f"layout options given with layout=False: {sorted(layout_options)}")
    return [relax.transform.StaticPlanBlockMemory()]


def _stock_finalize(target: tvm.target.Target) -> list[tvm.transform.Pass]:
    try:
        return list(relax.pipeline.finalize_passes(target))
    except ValueError:
        # unknown target kind: TVM's generic list (same as cpu_generic, plus CUDA graph
        # rewriting on GPU targets).
        passes = [relax.transform.StaticPlanBlockMemory()]
        if is_gpu_target(target):
            passes.append(relax.transform.RewriteCUDAGraph())
        return passes + [
            relax.transform.LowerAllocTensor(),
            relax.transform.KillAfterLastUse(),
            relax.transform.LowerRuntimeBuiltin(),
            relax.transform.ComputePrimValue(),
            relax.transform.VMShapeLower(),
            relax.transform.AttachGlobalSymbol(),
        ]


def finalize_passes(target, layout: bool = True, **layout_options) -> list[tvm.transform.Pass]:
    """Memory planning + TVM's finalize passes for the target.

    The list is TVM's own ``relax.pipeline.finalize_passes(target)`` with the
    StaticPlanBlockMemory pass replaced by ``memory_plan_passes(layout, ...)``
    (so a TVM upgrade that changes the finalize list is followed automatically).
    """
    target = as_target(target)
    stock = _stock_finalize(target)
    out: list[tvm.transform.Pass] = []
    replaced = False
    for p in stock:
        if p.info.name == _SPBM:
            out.extend(memory_plan_passes(layout, **layout_options))
            replaced = True
        else:
            out.append(p)
    if not replaced:  # pragma: no cover - TVM moved memory planning
        raise RuntimeError(
            f"TVM's finalize passes for {target.kind.name} contain no {_SPBM}: "
            f"{[p.info.name for p in stock]}"
        )
    return out


def finalize_rest_passes(target) -> list[tvm.transform.Pass]:
    """TVM's finalize passes for the target *after* memory planning."""
    target = as_target(target)
    return [p for p in _stock_finalize(target) if p.info.name != _SPBM]


def pre_planning_passes(
    target, order: bool = False, schedule: str | None = "robust", lift_scratch: bool | None = None,
    **order_options
) -> list[tvm.transform.Pass]:
    """Everything up to (not including) memory planning.

    ``lift_scratch`` (default: ``order``) adds ``LiftKernelScratch(target)`` after scheduling.
    """
    target = as_target(target)
    passes = library_dispatch_passes(target) + legalize_passes(target, schedule)
    roam = order if lift_scratch is None else lift_scratch
    if roam:
        passes.append(LiftKernelScratch(target))
    if order:
        passes.append(RoamOrder(**order_options))
    elif order_options:
        raise TypeError(f"order options given with order=False: {sorted(order_options)}")
    return passes + (roam_lower_passes(target) if roam else dataflow_lower_passes(target))


def _in_target(target, passes_fn, name: str) -> tvm.transform.Pass:
    """Wrap a list of passes in a module pass that runs them inside the target scope.

    target may be None: then it is resolved when the pass runs (Target.current()).
    """

    @tvm.transform.module_pass(opt_level=0, name=name)
    def _pass(mod: tvm.ir.IRModule, _ctx: tvm.transform.PassContext) -> tvm.ir.IRModule:
        tgt = as_target(target)
        with tgt:
            return tvm.transform.Sequential(passes_fn(tgt), name=name)(mod)

    return _pass


def pre_planning_pipeline(target=None, order: bool = False, **options) -> tvm.transform.Pass:
    """A module pass = pre_planning_passes(target, order, ...) run inside the target."""
    order_opts, layout_opts, rest = split_options(options)
    if layout_opts:
        raise TypeError(f"layout options make no sense before planning: {sorted(layout_opts)}")
    schedule = rest.pop("schedule", "robust")
    lift_scratch = rest.pop("lift_scratch", None)
    if rest:
        raise TypeError(f"unknown pipeline options: {sorted(rest)}")
    return _in_target(
        target,
        lambda t: pre_planning_passes(t, order=order, schedule=schedule, lift_scratch=lift_scratch,
                                      **order_opts),
        "RoamPrePlanning",
    )


def pipeline(
    target: str | tvm.target.Target | None = None,
    order: bool = True,
    layout: bool = True,
    **options,
) -> tvm.transform.Pass:
    """The full roam-tvm Relax pipeline as one module pass.

    Parameters
    ----------
    target: the build target ("llvm", "cuda", a Target) or None for the current
        ``tvm.target.Target`` scope at the time the pass runs.
    order: insert ``RoamOrder(**order_options)`` after scheduling.
    layout: use ``RoamLayout(**layout_options)`` instead of StaticPlanBlockMemory.
    options:
        ``order_options={...}``, ``layout_options={...}`` or ``order_<k>=v`` /
        ``layout_<k>=v`` (routed to the pass as ``k=v``);
        ``schedule="robust" | "dlight" | None`` (GPU scheduling, default "robust").

    ``pipeline(target, order=False, layout=False)`` is TVM's default per-target
    pipeline with robust scheduling (the ``tvm-default`` planner).
    """
    order_opts, layout_opts, rest = split_options(options)
    schedule = rest.pop("schedule", "robust")
    if rest:
        raise TypeError(f"unknown pipeline options: {sorted(rest)}")
    if not order and order_opts:
        raise TypeError(f"order options given with order=False: {sorted(order_opts)}")
    if not layout and layout_opts:
        raise TypeError(f"layout options given with layout=False: {sorted(layout_opts)}")

    def _passes(tgt):
        if order and layout:
            # RoamPlan = RoamOrder -> dataflow lowering -> RoamLayout, keeping per
            # function the better of (new order, program order): never worse than
            # TVM's default planner on the original order.
            plan = RoamPlan(roam_lower_passes(tgt), order_opts, layout_opts)
            passes = (library_dispatch_passes(tgt) + legalize_passes(tgt, schedule)
                      + [LiftKernelScratch(tgt), plan] + finalize_rest_passes(tgt))
        else:
            # roam's planners place kernel scratch; tvm-default stays TVM's own pipeline
            passes = pre_planning_passes(
                tgt, order=order, schedule=schedule, lift_scratch=order or layout, **order_opts
            ) + finalize_passes(tgt, layout=layout, **layout_opts)
        # last: whatever scheduled (or did not schedule) the TIR, no GPU build may
        # leave a PrimFunc to run on the host over device memory
        return passes + ([RequireDeviceKernels(tgt)] if is_gpu_target(tgt) else [])

    name = f"RoamPipeline(order={order},layout={layout})"
    return _in_target(target, _passes, name)


def lower_to_memory_planning(
    mod: tvm.ir.IRModule,
    target: str | tvm.target.Target = "llvm",
    order: bool = False,
    **options,
) -> tvm.ir.IRModule:
    """Run the pipeline up to the point where StaticPlanBlockMemory / RoamLayout runs.

    Returns the module after CallTIRRewrite (explicit ``R.builtin.alloc_tensor`` +
    ``call_tir``/``call_packed`` bindings, non-dataflow, purity checks removed), with
    PrimFuncs scheduled for the target. The input module is not modified.
    """
    return pre_planning_pipeline(target, order=order, **options)(mod)


# --------------------------------------------------------------------------- registry
def _register_named_pipeline() -> bool:
    """Register ``"roam"`` in relax.pipeline's named pipelines (idempotent)."""
    pmap = getattr(relax.pipeline, "PIPELINE_MAP", None)
    register = getattr(relax.pipeline, "register_pipeline", None)
    if pmap is None or register is None:  # pragma: no cover - other TVM versions
        return False
    if "roam" in pmap:
        return True

    def _roam_named(target=None, order: bool = True, layout: bool = True, **options):
        return pipeline(target, order=order, layout=layout, **options)

    register("roam")(_roam_named)
    return True


NAMED_PIPELINE_REGISTERED = _register_named_pipeline()
