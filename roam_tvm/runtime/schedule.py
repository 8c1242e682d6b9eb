"""Robust GPU scheduling of every PrimFunc of a module.

TVM's stock ``dl.ApplyDefaultSchedule(Matmul, GEMV, Reduction, GeneralReduction,
Fallback)`` (``roam_rules`` adds ``ReductionIntoEpilogue`` before ``Fallback``) takes the *first rule that returns a schedule*, and fails on training
graphs in two ways (tvm-notes, "Building"):

* a rule raises while scheduling (``dl.gpu.GEMV`` asserts ``s_loops`` on a fused
  collapse-sum kernel);
* a rule returns a schedule that does not lower (``max_pool2d_backward`` under the
  reduction rules: "No matched reducer", or an internal check in a TIR pass).

``robust_schedule`` tries the same rules in the same order, per function, and keeps
the first whose result *still lowers* (it is run through TVM's TIR lowering pipeline
and device code generation for the target, alone). When no rule works it uses
``simple_gpu_schedule``: inline what can be inlined, then for every remaining block
fuse its spatial loops and bind them to blockIdx.x/threadIdx.x, leaving reduction
loops serial inside the thread (one thread per output element). If even that does
not lower, the variant without inlining is tried (and, for in-place updates, one
without the schedule's dependency checks). Functions that are loop programs rather
than blocks (``take_backward``, scalar counters) get ``loop_schedule.bind_loops``:
race-free parallel loops, or one thread for small serial work. A function nothing
lowers for fails the pass with ``UnschedulableError``, naming it and every rule's
reason: it is never left to run as host code over device memory.

The rule each function got is logged at DEBUG level on the ``roam_tvm.runtime.schedule``
logger and recorded in the PrimFunc attribute ``roam.schedule_rule`` (a string), so
tests and reports can see it; ``robust_schedule.last_report`` keeps the last run's
rule per function and the failures that were skipped.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import IRModule

from .loop_schedule import LOOPS_RULE, LoopBindError, bind_loops
from .targets import as_target, is_gpu_target
from .kernel_audit import check_lowers, host_accesses, short_error

logger = logging.getLogger(__name__)

RULE_ATTR = "roam.schedule_rule"
_SCHEDULED_ATTR = "tirx.is_scheduled"

__all__ = [
    "robust_schedule",
    "stock_dlight_schedule",
    "default_rules",
    "roam_rules",
    "schedule_func",
    "simple_gpu_schedule",
    "check_lowers",
    "ScheduleReport",
    "UnschedulableError",
    "RULE_ATTR",
]


def default_rules() -> list[tuple[str, object]]:
    """The stock CUDA rule list of TVM 0.27, in its order, as (name, rule)."""
    from tvm.s_tir import dlight as dl  # pylint: disable=import-outside-toplevel

    return [
        ("Matmul", dl.gpu.Matmul()),
        ("GEMV", dl.gpu.GEMV()),
        ("Reduction", dl.gpu.Reduction()),
        ("GeneralReduction", dl.gpu.GeneralReduction()),
        ("Fallback", dl.gpu.Fallback()),
    ]


def roam_rules() -> list[tuple[str, object]]:
    """``default_rules`` with ``ReductionIntoEpilogue`` before ``Fallback``: a fused kernel that the
    stock rules leave to the fallback computes a reduction its last stage reads in that stage's
    threads, not through global scratch (``epilogue_schedule.py``)."""
    from .epilogue_schedule import RULE_NAME, ReductionIntoEpilogue  # pylint: disable=import-outside-toplevel

    rules = default_rules()
    at = [name for name, _ in rules].index("Fallback")
    return rules[:at] + [(RULE_NAME, ReductionIntoEpilogue())] + rules[at:]


def stock_dlight_schedule() -> tvm.transform.Pass:
    """TVM's stock CUDA schedule pass (what relax.backend.cuda.legalize_passes uses)."""
    from tvm.s_tir import dlight as dl  # pylint: disable=import-outside-toplevel

    return dl.ApplyDefaultSchedule(*[r for _, r in default_rules()])


# --------------------------------------------------------------------------- checking
def _is_scheduled(func) -> bool:
    return (
        isinstance(func, tirx.PrimFunc)
        and func.attrs is not None
        and _SCHEDULED_ATTR in func.attrs
        and bool(func.attrs[_SCHEDULED_ATTR])
    )


# --------------------------------------------------------------------------- fallback
def simple_gpu_schedule(
    func: tirx.PrimFunc, target: tvm.target.Target, inline: bool = True, checked: bool = True
) -> tirx.PrimFunc:
    """Plain thread binding: one thread per spatial output point, reductions serial.

    For every block that is not inlined: loops are classified by the block's iter
    vars (spatial / reduction); the leading run of spatial loops is fused, split by
    the target's max threads per block and bound to blockIdx.x/threadIdx.x. Anything
    below (reduction loops and spatial loops nested under them) stays serial in the
    thread. Reductions get their init split out (decompose_reduction) when possible.
    """
    from tvm.s_tir.dlight import base as dl_base  # pylint: disable=import-outside-toplevel

    max_threads = int(dl_base.max_threads_per_block(target))
    threads = min(256, max_threads)
    sch = s_tir.Schedule(func) if checked else s_tir.Schedule(func, enable_check=False)
    if inline:
        _inline_all(sch)
    root = sch.get_sblock("root") if _has_root(sch) else None
    blocks = sch.get_child_blocks(root) if root is not None else []
    for block in blocks:
        loops = sch.get_loops(block)
        if any(sch.get(lp).thread_binding is not None for lp in loops):
            continue
        sref_block = sch.get(block)
        kinds = _loop_kinds(sch, block, loops)
        lead = []
        for lp, kind in zip(loops, kinds):
            if kind != "S":
                break
            lead.append(lp)
        if not lead:
            lead = [sch.add_unit_loop(block)] if not loops else [sch.add_unit_loop(loops[0])]
        fused = sch.fuse(*lead) if len(lead) > 1 else lead[0]
        bx, tx = sch.split(fused, factors=[None, threads])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        if sref_block.init is not None:
            rest = sch.get_loops(block)[2:]
            try:
                if rest:
                    sch.decompose_reduction(block, rest[0])
            except Exception:  # pylint: disable=broad-except
                pass
    return sch.mod["main"]


def _inplace_elementwise(func: tirx.PrimFunc) -> bool:
    """True if some block reads a buffer it writes, always at exactly the written region
    (and no block has a reduction init): per-element in-place updates."""
    blocks = []
    tvm_ffi.structural_walk(func.body, [(s_tir.SBlock, blocks.append)])
    inplace = False
    for blk in blocks:
        if blk.name_hint == "root":
            continue
        if blk.init is not None:
            return False
        for wr in blk.writes:
            for rd in blk.reads:
                if _region_buffer(rd).same_as(_region_buffer(wr)):
                    if not tvm_ffi.structural_equal(rd.region, wr.region):
                        return False
                    inplace = True
    return inplace


def _region_buffer(region):
    buf = getattr(region, "buffer", None)
    return buf if buf is not None else region.source


def _has_root(sch) -> bool:
    try:
        sch.get_sblock("root")
        return True
    except Exception:  # pylint: disable=broad-except
        return False


def _inline_all(sch) -> None:
    """Inline every block that can be (compute_inline, else reverse_compute_inline)."""
    changed = True
    while changed:
        changed = False
        for block in sch.get_child_blocks(sch.get_sblock("root")):
            for prim in (sch.compute_inline, sch.reverse_compute_inline):
                try:
                    prim(block)
                    changed = True
                    break
                except Exception:  # pylint: disable=broad-except
                    continue
            if changed:
                break


def _loop_kinds(sch, block, loops) -> list[str]:
    """'S' for loops that only feed spatial iter vars, 'R' if any reduction var, 'O' other."""
    realize_node = _find_realize(sch, block)
    bindings = []
    if realize_node is not None:
        bindings = list(zip(realize_node.block.iter_vars, realize_node.iter_values))
    kinds = []
    for lp in loops:
        var = sch.get(lp).loop_var
        kind = "S"
        for iv, val in bindings:
            if _uses_var(val, var):
                if int(iv.iter_type) == int(tirx.IterVar.CommReduce):
                    kind = "R"
                    break
                if int(iv.iter_type) != int(tirx.IterVar.DataPar):
                    kind = "O"
        kinds.append(kind)
    return kinds


def _find_realize(sch, block):
    target = sch.get(block)
    found = []

    def visit(node):
        if node.block.same_as(target):
            found.append(node)

    tvm_ffi.structural_walk(sch.mod["main"].body, [(s_tir.SBlockRealize, visit)])
    return found[0] if found else None


def _uses_var(expr, var) -> bool:
    hit = []

    def visit(node):
        if node.same_as(var):
            hit.append(True)

    tvm_ffi.structural_walk(expr, [(tirx.Var, visit)])
    return bool(hit)


# --------------------------------------------------------------------------- driver
@tvm_ffi.register_error  # keeps its type when raised inside a pass, across the FFI
class UnschedulableError(RuntimeError):
    """Some PrimFuncs of a GPU build got no schedule that lowers to device kernels."""


def _unschedulable(names: list[str], failures: dict[str, list[str]]) -> str:
    lines = [f"  {n}: " + " | ".join(failures.get(n, [])) for n in names]
    return (
        f"no GPU schedule for {len(names)} PrimFunc(s) {names}; each would otherwise run "
        "as host code over GPU memory. Why each rule failed:\n" + "\n".join(lines)
        + "\nBuild for llvm, or register a schedule for these ops."
    )


@dataclass
class ScheduleReport:
    """Which rule each PrimFunc got (also written to the func attr ``roam.schedule_rule``)."""

    rule_of: dict[str, str] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)

    def counts(self) -> Counter:
        return Counter(self.rule_of.values())


def schedule_func(
    func: tirx.PrimFunc,
    target: tvm.target.Target,
    rules=None,
    verify: bool = True,
    name: str = "?",
    failures: list[str] | None = None,
) -> tuple[tirx.PrimFunc, str]:
    """Schedule one PrimFunc; return (scheduled func, rule name).

    rule name is one of the dlight rule names, "simple", "simple-noinline",
    "simple-inplace", "loops" (``loop_schedule.bind_loops``) or "none" (nothing
    lowered; ``failures`` says why for each rule tried).
    """
    rules = roam_rules() if rules is None else rules
    failures = [] if failures is None else failures
    for rule_name, rule in rules:
        try:
            space = rule.apply(func, target, False)
        except Exception as err:  # pylint: disable=broad-except
            failures.append(f"{rule_name}: raised {type(err).__name__}: {short_error(err)}")
            continue
        if space is None:
            continue
        if isinstance(space, list):
            if not space:
                continue
            space = space[0]
        try:
            new = space.mod["main"]
        except Exception as err:  # pylint: disable=broad-except
            failures.append(f"{rule_name}: bad schedule {type(err).__name__}: {short_error(err)}")
            continue
        err = _rejects(new, target, verify)
        if err is not None:
            failures.append(f"{rule_name}: does not lower: {err}")
            continue
        return new, rule_name
    variants = [("simple", True, True), ("simple-noinline", False, True)]
    try:
        inplace = _inplace_elementwise(func)
    except Exception as err:  # pylint: disable=broad-except
        failures.append(f"inplace check raised {type(err).__name__}: {short_error(err)}")
        inplace = False
    if inplace:
        variants.append(("simple-inplace", False, False))
    for rule_name, inline, checked in variants:
        try:
            new = simple_gpu_schedule(func, target, inline=inline, checked=checked)
        except Exception as err:  # pylint: disable=broad-except
            failures.append(f"{rule_name}: raised {type(err).__name__}: {short_error(err)}")
            continue
        err = _rejects(new, target, verify)
        if err is None:
            return new, rule_name
        failures.append(f"{rule_name}: does not lower: {err}")
    try:
        new = bind_loops(func, target)
    except LoopBindError as err:
        failures.append(f"{LOOPS_RULE}: {err}")
        return func, "none"
    err = _rejects(new, target, verify)
    if err is None:
        return new, LOOPS_RULE
    failures.append(f"{LOOPS_RULE}: does not lower: {err}")
    return func, "none"


def _rejects(func: tirx.PrimFunc, target: tvm.target.Target, verify: bool) -> str | None:
    """Why a scheduled func is refused (None: accepted); host access is always checked."""
    if verify:
        return check_lowers(func, target)
    names = host_accesses(func)
    return f"host code would access GPU buffers {names}" if names else None


def robust_schedule(target=None, rules=None, verify: bool = True) -> tvm.transform.Pass:
    """Module pass: schedule every unscheduled PrimFunc for a GPU target (see module doc).

    For CPU targets (llvm) it is the identity: TVM's llvm backend needs no schedule.
    target None -> the PrimFunc's ``target`` attr, else Target.current() at run time.
    The last run's report is available as ``robust_schedule.last_report``.

    Raises
    ------
    UnschedulableError
        After trying every function, if some got no schedule that lowers: it names
        each such function and why every rule failed (never a host loop over GPU memory).
    """

    @tvm.transform.module_pass(opt_level=0, name="RoamRobustSchedule")
    def _pass(mod: IRModule, _ctx: tvm.transform.PassContext) -> IRModule:
        default_target = as_target(target) if target is not None else tvm.target.Target.current(
            allow_none=True
        )
        report = ScheduleReport()
        updates = {}
        for gvar, func in mod.functions_items():
            if not isinstance(func, tirx.PrimFunc) or _is_scheduled(func):
                continue
            ftarget = func.attrs.get("target") if func.attrs is not None else None
            ftarget = ftarget if ftarget is not None else default_target
            if ftarget is None or not is_gpu_target(ftarget):
                continue
            fails: list[str] = []
            try:
                with ftarget:
                    new, rule = schedule_func(
                        func, ftarget, rules=rules, verify=verify, name=gvar.name_hint, failures=fails
                    )
            except Exception as err:  # pylint: disable=broad-except  (reported below)
                fails.append(f"schedule_func raised {type(err).__name__}: {short_error(err)}")
                new, rule = func, "none"
            report.rule_of[gvar.name_hint] = rule
            if fails:
                report.failures[gvar.name_hint] = fails
            if rule == "none":
                continue
            if fails:
                logger.debug("robust_schedule: %s -> %s after: %s", gvar.name_hint, rule, "; ".join(fails))
            else:
                logger.debug("robust_schedule: %s -> %s", gvar.name_hint, rule)
            updates[gvar] = new.with_attr(_SCHEDULED_ATTR, True).with_attr(RULE_ATTR, rule)
        if updates:
            mod = mod.shallow_copy() if hasattr(mod, "shallow_copy") else IRModule(
                dict(mod.functions_items()), attrs=mod.attrs
            )
            for gvar, func in updates.items():
                mod[gvar] = func
        robust_schedule.last_report = report
        if report.rule_of:
            logger.info("robust_schedule: %s", dict(report.counts()))
        missing = [n for n, r in report.rule_of.items() if r == "none"]
        if missing:
            raise UnschedulableError(_unschedulable(missing, report.failures))
        return mod

    return _pass


robust_schedule.last_report = ScheduleReport()
