"""``roam-tvm plan``: write the roam plan of one training step as files.

``write_plan`` runs the ``roam`` planner (``RoamOrder`` + ``RoamLayout``) and,
for comparison, ``tvm-default`` (StaticPlanBlockMemory) through the peak
simulator (``roam_tvm.report.simulate.run_planner``) and writes into a folder:

``plan.json``
    function, target, alignment, the arena and its lower bound, both planners'
    peaks and kernel scratch (``scratch_bytes``: the largest scratch a kernel still
    requests outside the plan; roam places what it cannot remove in the arena, see
    ``LiftKernelScratch``; ``peak_with_scratch_bytes``: the peak with it), the order
    record's summary, the op at every step, and per tensor its
    id, name, shape, dtype, size, reserved (aligned) size, first/last step
    (inclusive) and offset in the arena.
``plan.csv``
    the arena as a minimalloc instance with its solution,
    ``id,lower,upper,size,offset`` (``upper`` = last step + 1, ``size`` = the
    aligned bytes reserved), validated before it is written.
``timeline.png``
    step on x, offset on y, one rectangle per arena tensor; the arena height
    (dashed), the max-live lower bound (dotted) and the peak step.
``timeline-tvm-default.png``
    TVM's default plan at storage level: each storage (``R.memory.alloc_storage``)
    or unplanned allocation, live from its first to its last use, stacked by a
    greedy for display only (TVM allocates each one separately, so the line
    that matters is the sum of live storages).

Steps are kernel steps (ops of the lowered function in the planner's order,
views included); the storage-level graphs' allocation bookkeeping ops are
mapped onto the kernel they precede, so both timelines share the x axis.
"""
from __future__ import annotations

import json
import os
import sys
import time

from ..graph import Graph
from ..layout import Buffer, Problem, Solution, greedy, live_peak, validate, write_csv
from .compare import versions, with_param_kinds
from .simulate import run_planner, schedule_for, scratch_for

__all__ = ["write_plan", "plan_problem", "storage_buffers", "PlanError"]

_BOOKKEEPING = ("relax.memory.", "relax.builtin.", "relax.vm.")


class PlanError(RuntimeError):
    """The roam plan read back from the pass failed validation."""


def plan_problem(rec) -> tuple[Problem, Solution]:
    """The arena of a ``LayoutRecord`` as a layout problem and its solution (ids = tensor ids).

    Sizes are rounded up to the record's alignment, as ``RoamLayout`` placed them.
    """
    a = max(1, int(rec.alignment))
    buffers = []
    for t in sorted(rec.offsets, key=int):
        first, last = rec.lifetimes[t]
        size = -(-int(rec.sizes[t]) // a) * a
        buffers.append(Buffer(str(t), int(first), int(last) + 1, size))
    problem = Problem(buffers, None, a)
    sol = Solution.from_offsets(problem, {str(t): int(o) for t, o in rec.offsets.items()}, rec.method)
    return problem, sol


def _kernel_steps(planned: Graph, unplanned: Graph) -> list[int] | None:
    """Planned op index -> kernel step (index in ``unplanned``); None if the two do not line up."""
    kernels = [op.name for op in unplanned.ops]
    steps, k, names = [], 0, []
    for op in planned.ops:
        if op.name.startswith(_BOOKKEEPING):
            steps.append(min(k, len(kernels) - 1))
        else:
            steps.append(k)
            names.append(op.name)
            k += 1
    return steps if names == kernels else None


def storage_buffers(planned: Graph, unplanned: Graph | None = None, skip: tuple[str, ...] = ()
                    ) -> tuple[list[Buffer], dict[str, str], int | None, bool]:
    """The allocations of a memory-planned (storage-level) graph as buffers over kernel steps.

    Every allocated root (a storage or an unplanned ``alloc_tensor``) is live from
    its first to its last use. Returns the buffers (id = tensor id), id -> name,
    the peak step (kernel step of the simulated peak) and whether the steps were
    mapped onto ``unplanned``'s kernel steps (else they are planned op indices).
    """
    steps = _kernel_steps(planned, unplanned) if unplanned is not None else None
    mapped = steps is not None
    if steps is None:
        steps = list(range(len(planned.ops)))
    life = planned.lifetimes()
    buffers, names = [], {}
    for t, (a, b) in sorted(life.items()):
        tensor = planned.tensors[t]
        if tensor.size <= 0 or tensor.name in skip:
            continue
        buffers.append(Buffer(str(t), steps[a], steps[b] + 1, tensor.size))
        names[str(t)] = tensor.name
    prof = planned.live_profile()
    peak_step = steps[max(range(len(prof)), key=prof.__getitem__)] if prof else None
    return buffers, names, peak_step, mapped


def _stack(buffers: list[Buffer], base: int = 0) -> dict[str, int]:
    """Offsets from a size-first greedy (display only), shifted up by ``base``."""
    if not buffers:
        return {}
    sol = greedy(Problem(buffers, None, 1), "size")
    return {k: int(v) + base for k, v in sol.offsets.items()}


def _short(s: str, n: int = 28) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _argmax(xs: list[int]) -> int | None:
    return max(range(len(xs)), key=xs.__getitem__) if xs else None


def write_plan(ts, out_dir: str, target="cuda", time_limit: float = 10.0, progress: bool = True,
               func: str | None = None) -> list[str]:
    """Plan ``ts`` with roam (and tvm-default) and write plan.json, plan.csv and the timelines.

    Parameters
    ----------
    ts : TrainingStep
        From ``roam_tvm.from_torch`` or ``from_backbone``.
    out_dir : str
        Folder to write into (created).
    target : str
        Target whose lowering is planned (arena offsets aligned to 64 B, the runtime's allocation alignment);
        nothing is built or run.
    time_limit : float
        Solver seconds for RoamOrder (per piece) and RoamLayout.
    progress : bool
        A progress bar on stderr.

    Returns the paths written. Raises ``PlanError`` if the arena read back from
    ``RoamLayout`` does not validate.
    """
    import matplotlib.pyplot as plt
    from tqdm import tqdm

    from .plots import byte_unit, human_bytes as hb, plot_timeline, save

    func = func or ts.func_name
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise PlanError(f"{out_dir!r} is a file, not a folder; choose another output folder")
    target_name = str(target)
    bar = tqdm(["schedule", "roam", "tvm-default"], desc="plan", disable=not progress,
               file=sys.stderr, leave=False)
    opts = {"time_limit": time_limit}
    for stage in bar:
        bar.set_postfix_str(stage)
        if stage == "schedule":
            start = time.perf_counter()
            scheduled = schedule_for(with_param_kinds(ts), target)
            kernels = scratch_for(scheduled, target)
            lower_seconds = time.perf_counter() - start
        elif stage == "roam":
            roam, rx = run_planner(scheduled, "roam", target, func, opts, opts, scratch=kernels)
        elif stage == "tvm-default":
            default, dx = run_planner(scheduled, "tvm-default", target, func, scratch=kernels)
    bar.close()

    rec = rx["layout_record"]
    order_rec = rx["order_record"]
    unplanned: Graph = rx["unplanned"]
    if rec is None:
        raise PlanError(f"RoamLayout left no record for function {func!r}")
    problem, sol = plan_problem(rec)
    violations = validate(problem, sol)
    if violations:
        raise PlanError(f"the roam arena of {func!r} is invalid: " + "; ".join(violations[:3]))
    if rec.offsets and sol.height > rec.arena_bytes:
        raise PlanError(f"tensors reach {sol.height} B, past the {rec.arena_bytes} B arena")

    # Peak step: the step of the highest total (always-live + live + workspace) in roam's order.
    prof = unplanned.live_profile()
    peak_step = _argmax(prof)
    arena_used = rec.status == "roam"
    d_bufs, d_names, d_peak_step, d_mapped = storage_buffers(dx["planned_graph"], dx["unplanned"])
    # What roam allocates outside its arena (returned tensors, or everything when
    # RoamLayout kept StaticPlanBlockMemory's plan).
    skip = ("roam_arena",) if arena_used else ()
    r_extra, r_extra_names, _, r_mapped = storage_buffers(rx["planned_graph"], unplanned, skip)

    tensors = []
    for b in problem.buffers:
        t = int(b.id)
        tensor = unplanned.tensors[t]
        first, last = rec.lifetimes[t]
        tensors.append({"id": t, "name": rec.names.get(t, tensor.name), "op": unplanned.ops[first].name,
                        "shape": list(tensor.shape), "dtype": tensor.dtype, "size": int(rec.sizes[t]),
                        "reserved": b.size, "first": int(first), "last": int(last),
                        "offset": int(rec.offsets[t])})
    order_summary = None
    if order_rec is not None:
        order_summary = {k: v for k, v in order_rec.to_dict().items() if k != "order"}
    layout_summary = {k: v for k, v in rec.to_dict().items()
                      if k not in ("offsets", "lifetimes", "sizes", "names")}
    plan = {
        "function": func,
        "target": target_name,
        "alignment": rec.alignment,
        "status": rec.status,
        "arena_in_use": arena_used,
        "arena_bytes": rec.arena_bytes,
        "lower_bound_bytes": rec.lower_bound_bytes,
        "peak_bytes": {"roam": roam.peak_bytes, "tvm-default": default.peak_bytes},
        "scratch_bytes": {"roam": roam.scratch_bytes, "tvm-default": default.scratch_bytes},
        "peak_with_scratch_bytes": {"roam": roam.peak_with_scratch_bytes,
                                    "tvm-default": default.peak_with_scratch_bytes},
        "planners": {"roam": roam.to_dict(), "tvm-default": default.to_dict()},
        "always_live_bytes": unplanned.always_live_bytes,
        "peak_step": peak_step,
        "steps": [op.name for op in unplanned.ops],
        "order": order_summary,
        "layout": layout_summary,
        "outside_arena": [{"id": int(b.id), "name": r_extra_names[b.id], "size": b.size, "first": b.lower,
                           "last": b.upper - 1} for b in r_extra],
        "tensors": tensors,
        "lower_seconds": lower_seconds,
        "versions": versions(),
        "csv": "plan.csv",
        "note": "steps are op indices of the lowered function in roam's order (first/last inclusive); "
                "plan.csv uses minimalloc's half-open [lower, upper) and aligned sizes",
    }
    os.makedirs(out_dir, exist_ok=True)  # only now: a failed plan leaves nothing behind
    paths = []
    p = os.path.join(out_dir, "plan.json")
    with open(p, "w") as f:
        json.dump(plan, f, indent=1)
    paths.append(p)
    p = os.path.join(out_dir, "plan.csv")
    write_csv(p, problem, sol)
    paths.append(p)

    # Timelines, on one y scale so the two pictures compare at a glance.
    r_extra_offsets = _stack(r_extra, base=rec.arena_bytes if arena_used else 0)
    d_offsets = _stack(d_bufs)
    r_top = max([rec.arena_bytes if arena_used else 0] + [r_extra_offsets[b.id] + b.size for b in r_extra])
    d_top = max([d_offsets[b.id] + b.size for b in d_bufs] + [0])
    unit, scale = byte_unit(max(r_top, d_top, 1))
    ylim = max(r_top, d_top, 1) / scale * 1.08
    xmax = max(len(unplanned.ops), len(dx["unplanned"].ops))

    fig, ax = plt.subplots(figsize=(11, 5.5))
    if arena_used:
        plot_timeline(ax, problem.buffers, sol.offsets, peak_step=peak_step, height=rec.arena_bytes,
                      lower_bound=rec.lower_bound_bytes, unit=unit,
                      label_top=12, labels={str(t["id"]): _short(f'{t["id"]} {t["op"]}') for t in tensors},
                      extra=[(b, r_extra_offsets[b.id]) for b in r_extra],
                      extra_label="outside the arena (returned tensors)",
                      xlabel="step (op index in roam's order)" if r_mapped else "step (planned op index)")
        how = f"{len(problem.buffers)} tensors in one arena"
    else:  # RoamLayout kept StaticPlanBlockMemory's plan: show what runs
        plot_timeline(ax, r_extra, r_extra_offsets, peak_step=peak_step, unit=unit,
                      lower_bound=live_peak(r_extra), height_label="stacked for display",
                      bound_label="sum of live storages",
                      xlabel="step (op index in roam's order)" if r_mapped else "step (planned op index)")
        how = f"StaticPlanBlockMemory kept ({rec.status})"
    ax.set_ylim(0, ylim)
    ax.set_xlim(0, xmax)
    ax.set_title(f"roam plan of {func} ({target_name}): {how}\n"
                 f"peak {hb(roam.peak_bytes)} (always live {hb(unplanned.always_live_bytes)}) "
                 f"vs tvm-default {hb(default.peak_bytes)}", fontsize=10)
    paths.append(save(fig, os.path.join(out_dir, "timeline.png")))

    fig, ax = plt.subplots(figsize=(11, 5.5))
    plot_timeline(ax, d_bufs, d_offsets, peak_step=d_peak_step, unit=unit, lower_bound=live_peak(d_bufs),
                  height_label="stacked for display", bound_label="sum of live storages (simulated)",
                  label_top=10, labels=d_names,
                  xlabel="step (op index in program order)" if d_mapped else "step (planned op index)")
    ax.set_ylim(0, ylim)
    ax.set_xlim(0, xmax)
    ax.set_title(f"tvm-default (StaticPlanBlockMemory) plan of {func} ({target_name}): {len(d_bufs)} allocations\n"
                 f"peak {hb(default.peak_bytes)} (always live {hb(dx['unplanned'].always_live_bytes)}); "
                 "each storage is its own allocation, stacked here for display", fontsize=10)
    paths.append(save(fig, os.path.join(out_dir, "timeline-tvm-default.png")))
    return paths
