"""Planner comparison: one training step, every planner, one simulator.

``compare_step`` takes a ``TrainingStep`` and returns the JSON-able report that
``roam-tvm compare`` prints and saves. All peaks come from
``roam_tvm.report.simulate`` (planned by TVM or by us) or from
``pytorch_peak`` (measured on a GPU, else simulated from PyTorch's own order).
"""
from __future__ import annotations

import os
import platform
import sys
import time
from typing import Callable, Sequence

import tvm
from tvm import relax

from ..passes.arena import default_alignment
from .names import ALL_PLANNERS
from .simulate import PLANNERS, lower_bounds, param_kinds_attr, run_planner, schedule_for, scratch_for
_KIND_OF = {"input": "input", "target": "input", "hyper": "input", "param": "param", "state": "state",
            "frozen": "param"}


def versions() -> dict:
    out = {"python": platform.python_version(), "roam_tvm": _version("roam-tvm"),
           "apache-tvm": _version("apache-tvm"), "numpy": _version("numpy"), "cvxpy": _version("cvxpy"),
           "highspy": _version("highspy")}
    for pkg in ("torch", "transformers"):
        out[pkg] = _version(pkg)
    return out


def _version(pkg: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def machine() -> dict:
    info = {"platform": platform.platform(), "processor": platform.machine(), "cpus": os.cpu_count()}
    try:
        import torch

        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    info.setdefault("gpu", None)
    return info


def count_ops(func: relax.Function) -> int:
    """Operator calls in a Relax function (its training graph before fusion)."""
    n = 0
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, relax.Call):
                n += 1
    return n


def with_param_kinds(ts) -> tvm.IRModule:
    """``ts.mod`` with ``roam.param_kinds`` so reports can tell parameters from state."""
    func = ts.mod[ts.func_name]
    kinds = {p.name: _KIND_OF.get(kind, "input") for p, (_, kind) in zip(func.params, ts.signature)}
    return param_kinds_attr(ts.mod, kinds, ts.func_name)


def arena_alignment(layout_options: dict | None) -> int:
    """The offset alignment roam's layout uses under ``layout_options``."""
    return (layout_options or {}).get("alignment") or default_alignment()


def compare_step(ts, planners: Sequence[str] = ALL_PLANNERS, target: str = "llvm",
                 pytorch: Callable[[], dict] | None = None, cut: bool = True,
                 order_options: dict | None = None, layout_options: dict | None = None,
                 progress: bool = True, log: Callable[[str], None] | None = None, scratch: bool = True) -> dict:
    """Run every planner on one training step and simulate each one's peak.

    Parameters
    ----------
    ts : TrainingStep
        From ``roam_tvm.from_torch`` or ``from_backbone``.
    planners : sequence of str
        Any of ``tvm-default``, ``pytorch``, ``roam-order-only``, ``roam-layout-only``, ``roam``.
    target : str
        The target whose lowering is planned (arena offsets aligned to 64 B, the runtime's allocation alignment).
    pytorch : callable, optional
        Returns ``pytorch_peak``'s dict; required if ``pytorch`` is among ``planners``.
    cut : bool
        Compute the ``cut`` lower bound (one min-cut per candidate op).
    scratch : bool
        Add each planner's kernel-scratch columns (``scratch_bytes``,
        ``peak_with_scratch_bytes``, ``pool_peak_bytes``; see ``workspace_pool``) and
        ``report["scratch"]`` (per kernel, and the CPU threads counted).
    """
    from tqdm import tqdm

    log = log or (lambda msg: None)
    unknown = [p for p in planners if p not in ALL_PLANNERS]
    if unknown:
        raise ValueError(f"unknown planner(s) {unknown}; choose from {', '.join(ALL_PLANNERS)}")
    func_name = ts.func_name
    mod = with_param_kinds(ts)
    report: dict = {"ops": count_ops(mod[func_name]), "planners": {}, "lower_bounds": {}}
    stages = ["schedule"] + [p for p in planners if p != "pytorch"] + ["bounds"] + (
        ["pytorch"] if "pytorch" in planners else [])
    if "tvm-default" not in stages:
        stages.insert(1, "tvm-default")  # the bounds are taken on its graph
    bar = tqdm(stages, desc="compare", disable=not progress, file=sys.stderr, leave=False)
    default_graph, arena = None, None
    for stage in bar:
        bar.set_postfix_str(stage)
        if stage == "schedule":
            start = time.perf_counter()
            scheduled = schedule_for(mod, target)
            report["lower_seconds"] = time.perf_counter() - start
            kernels = None
            if scratch:
                start = time.perf_counter()
                kernels = scratch_for(scheduled, target)
                report["scratch"] = {"threads": kernels[1], "seconds": time.perf_counter() - start,
                                     "kernels": {k: v.bytes(kernels[1]) for k, v in kernels[0].items() if v.requests},
                                     # not counted: their scratch is unknown (see KernelScratch.error)
                                     "unknown": {k: v.error for k, v in kernels[0].items() if v.error}}
        elif stage in PLANNERS:
            result, extras = run_planner(scheduled, stage, target, func_name, order_options, layout_options, kernels)
            if stage == "tvm-default":
                default_graph, arena = extras["unplanned"], extras["arena_tensors"]
            if stage in planners:
                report["planners"][stage] = result.to_dict()
                report.setdefault("records", {})[stage] = {
                    k: (v.to_dict() if v is not None else None) for k, v in
                    (("order", extras["order_record"]), ("layout", extras["layout_record"]))}
                for k in ("order", "layout"):
                    rec = report["records"][stage][k]
                    if rec:  # per-tensor detail is for `roam-tvm plan`, not the summary
                        for big in ("order", "offsets", "lifetimes", "sizes", "names"):
                            rec.pop(big, None)
            log(f"{stage}: peak {result.peak_bytes / 2**20:.1f} MiB")
        elif stage == "bounds":
            g = default_graph
            start = time.perf_counter()
            # the least live-bytes peak of an order a planner reached (its perfect packing): what order
            # bounds compare with; once one is at cut or pair, the set and exact searches cannot raise them
            reached = [r.get("order_bound_bytes") or r["peak_bytes"] for r in report["planners"].values()
                       if r.get("peak_bytes")]
            report["lower_bounds"] = lower_bounds(g, cut=cut, reached=min(reached) if reached else None,
                                                  arena=arena, alignment=arena_alignment(layout_options))
            report["bounds_seconds"] = time.perf_counter() - start
            report["tensors"] = len(g.tensors)
            report["planned_ops"] = len(g.ops)
            report["always_live_bytes"] = g.always_live_bytes
        elif stage == "pytorch":
            start = time.perf_counter()
            try:
                res = pytorch()
            except Exception as err:  # noqa: BLE001 - the baseline must not sink the plans
                report["planners"]["pytorch"] = _baseline_failed(err, time.perf_counter() - start)
                if log is not None:
                    log(f"pytorch: {report['planners']['pytorch']['note']}")
                continue
            detail = res.get("detail", {})
            # Same split as ours: what is not parameters, buffers, inputs or optimizer state.
            resident = sum(int(detail.get(k, 0)) for k in
                           ("params_bytes", "buffers_bytes", "inputs_bytes", "optimizer_state_bytes"))
            report["planners"]["pytorch"] = {
                "peak_bytes": int(res["peak_bytes"]),
                # Simulated eager order with perfect packing: the peak is its own order bound.
                "order_bound_bytes": int(res.get("order_bound_bytes", res["peak_bytes"])),
                "intermediate_bytes": max(0, int(res["peak_bytes"]) - resident),
                "plan_seconds": time.perf_counter() - start, "valid": True,
                "method": res.get("method", "simulated"),
                "note": detail.get("order", res.get("note", ""))}
    bar.close()
    report["versions"] = versions()
    report["machine"] = machine()
    return report


def _baseline_failed(err: Exception, seconds: float) -> dict:
    """The ``pytorch`` row when PyTorch's own step could not be run or simulated: no figure
    (``peak_bytes`` None, ``valid`` None), and why, so the plans of the step still report."""
    first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    return {"peak_bytes": None, "order_bound_bytes": None, "intermediate_bytes": None,
            "plan_seconds": seconds, "valid": None, "method": "failed",
            "note": f"PyTorch's eager step could not be run: {type(err).__name__}: {first[:300]}"}


# What each of ``lower_bounds`` bounds: ``order`` is the program order's live bytes, a floor
# for laying out that one order only (a better order can go below it).
BOUND_MEANING = {"order": "least for the program order", "any": "least for any order (loose)",
                 "cut": "least for any order", "pair": "least for any order",
                 "set": "least for any order",
                 "cut_aligned": "least for any order, aligned arena",
                 "exact": "least for any order (exhaustive search)"}


def format_table(report: dict) -> str:
    """A fixed-width table: one row per planner, then the lower bounds."""
    mib = 2**20
    def col(r, key):
        return "" if r.get(key) is None else f"{r[key] / mib:,.1f}"

    rows = [("planner", "peak MiB", "scratch MiB", "+scratch MiB", "+pool MiB", "interm. MiB",
             "order-bound MiB", "plan s", "valid", "how")]
    for name, r in report["planners"].items():
        valid = "-" if r["valid"] is None else "yes" if r["valid"] else "NO"
        rows.append((name, col(r, "peak_bytes"), col(r, "scratch_bytes"), col(r, "peak_with_scratch_bytes"),
                     col(r, "pool_peak_bytes"), col(r, "intermediate_bytes"),
                     col(r, "order_bound_bytes"), f"{r['plan_seconds']:.2f}", valid, r.get("method", "planned")))
    for k, v in report.get("lower_bounds", {}).items():
        rows.append((f"bound:{k}", f"{v / mib:,.1f}", "", "", "", "", "", "", "", BOUND_MEANING.get(k, "lower bound")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
