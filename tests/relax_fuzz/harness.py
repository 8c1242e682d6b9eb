"""Plan one generated function four ways, build each for llvm, run, compare bit for bit.

Planners, each in the place of StaticPlanBlockMemory, followed by the rest of
TVM's finalize passes for llvm:

* ``none``: no static plan at all (every tensor its own allocation). This is
  the ground truth; it shares nothing with any planner.
* ``static``: ``relax.transform.StaticPlanBlockMemory``. It must agree with
  ``none``; if it does not, the generated function is outside what TVM's
  planner supports, which is a generator bug (status ``generator``).
* ``layout``: ``RoamLayout()``.
* ``order+layout``: ``Sequential([RoamOrder(...), RoamLayout()])``.
* ``layout(raw)`` (opt-in, ``--raw``): ``RoamLayout(never_worse=False)``, roam's
  own plan even where the guard would keep TVM's; a wrong plan hidden by the
  guard shows here.

The roam planners must give outputs, and inputs updated in place, that are
bit-identical to ``static``'s, and (where ``roam_tvm.verify`` exists) plans
that its independent checker accepts.
"""
from __future__ import annotations

import time
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.relax import _ffi_api as relax_ffi
from tvm.relax import vm_build

from .generator import Case
from .kernels import register_externs

LLVM = tvm.target.Target("llvm")
REFERENCE_PLANNERS = ("none", "static")
ROAM_PLANNERS = ("layout", "order+layout")
ALL_PLANNERS = REFERENCE_PLANNERS + ROAM_PLANNERS
RAW_PLANNER = "layout(raw)"  # RoamLayout(never_worse=False): roam's own plan, never TVM's (opt-in)


def lower(mod: tvm.IRModule) -> tvm.IRModule:
    """TVM's passes up to where StaticPlanBlockMemory runs (one kernel per op, no fusion)."""
    passes = [relax.transform.RealizeVDevice(), relax.transform.LegalizeOps(),
              relax.transform.AnnotateTIROpPattern(), relax.transform.RewriteDataflowReshape(),
              relax.transform.ToNonDataflow(), relax.transform.RemovePurityChecking(),
              relax.transform.CallTIRRewrite()]
    with LLVM:
        return tvm.transform.Sequential(passes)(mod)


def planner_pass(name: str, time_limit: float) -> tvm.transform.Pass | None:
    """The memory-planning pass called ``name`` (``None`` for ``none``)."""
    from roam_tvm.passes import RoamLayout, RoamOrder  # pylint: disable=import-outside-toplevel

    if name == "none":
        return None
    if name == "static":
        return relax.transform.StaticPlanBlockMemory()
    if name == "layout":
        return RoamLayout(time_limit=time_limit)
    if name == RAW_PLANNER:
        return RoamLayout(time_limit=time_limit, never_worse=False)
    if name == "order+layout":
        return tvm.transform.Sequential([RoamOrder(time_limit=time_limit, jobs=1, progress=False),
                                         RoamLayout(time_limit=time_limit)])
    raise ValueError(f"unknown planner {name!r}; expected none, static, layout, order+layout or {RAW_PLANNER}")


def _finalize() -> list[tvm.transform.Pass]:
    stock = relax.pipeline.finalize_passes(LLVM)
    return [p for p in stock if p.info.name != "StaticPlanBlockMemory"]


def _flatten(out) -> list[np.ndarray]:
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [x for o in out for x in _flatten(o)]


class Linker:
    """Compiles each distinct set of kernels once, and links it to each planner's VM code.

    The planners change only the Relax function, so the kernels (and the LLVM
    JIT behind them) are shared: a build per planner costs the VM code alone.
    This is what ``relax.build`` does, in its two steps.
    """

    def __init__(self):
        self.libs: list[tuple[tvm.IRModule, tvm.runtime.Module]] = []

    def kernels(self, tir_mod: tvm.IRModule | None):
        if tir_mod is None:
            return None
        for mod, lib in self.libs:
            if tvm_ffi.structural_equal(mod, tir_mod):
                return lib
        lib = tvm.tirx.build(tir_mod, target=LLVM)
        self.libs.append((tir_mod, lib))
        return lib

    def build(self, final: tvm.IRModule) -> tvm.runtime.Executable:
        builder = relax.ExecBuilder()
        rest = vm_build._vmcodegen(builder, final, "bytecode")  # pylint: disable=protected-access
        lib = self.kernels(vm_build._filter_tir(rest))  # pylint: disable=protected-access
        return vm_build.VMExecutable(relax_ffi.VMLink(builder, LLVM, lib, [], {}))


def build_and_run(planned: tvm.IRModule, inputs: list[np.ndarray], linker: Linker | None = None) -> list[np.ndarray]:
    """Outputs, then every input as it is after the call (in-place updates)."""
    with LLVM:
        final = tvm.transform.Sequential(_finalize())(planned)
    ex = (linker or Linker()).build(final)
    vm = relax.VirtualMachine(ex, [tvm.cpu(0), tvm.cpu(1)])
    args = [tvm.runtime.tensor(a, tvm.cpu(0)) for a in inputs]
    outs = _flatten(vm["main"](*args))
    return outs + [a.numpy() for a in args]


def differences(ref: list[np.ndarray], got: list[np.ndarray], n_outputs: int) -> list[str]:
    """Every value that is not bit-identical (shape, dtype and bytes)."""
    if len(ref) != len(got):
        return [f"{len(got)} values returned, expected {len(ref)}"]
    diffs = []
    for i, (a, b) in enumerate(zip(ref, got)):
        what = f"output {i}" if i < n_outputs else f"input {i - n_outputs} after the call"
        if a.shape != b.shape or a.dtype != b.dtype:
            diffs.append(f"{what}: {b.dtype}{list(b.shape)}, expected {a.dtype}{list(a.shape)}")
            continue
        ab, bb = np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
        if not np.array_equal(ab, bb):
            bad = np.flatnonzero(ab.reshape(-1) != bb.reshape(-1))
            diffs.append(f"{what} {a.dtype}{list(a.shape)}: {bad.size} of {ab.size} bytes differ "
                         f"(first at byte {bad[0]}); e.g. {b.reshape(-1)[:4]} vs {a.reshape(-1)[:4]}")
    return diffs


def plan_checker():
    """``roam_tvm.verify.check_plan`` if it is installed yet, else ``None``.

    Only a missing ``roam_tvm.verify`` means "not there yet"; any other import
    error is the checker's own and is raised.
    """
    try:
        from roam_tvm.verify import check_plan  # pylint: disable=import-outside-toplevel
    except ModuleNotFoundError as err:
        if err.name in ("roam_tvm.verify", "roam_tvm"):
            return None
        raise
    return check_plan


@dataclass
class Result:
    """What happened to one generated function."""

    seed: int
    used: list[str]
    status: str = "ok"  # ok | fail (a roam planner is wrong) | generator (the reference is)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # fallbacks, checker skipped, ...
    script: str = ""
    seconds: float = 0.0

    def fail(self, status: str, problem: str) -> None:
        if self.status != "generator":
            self.status = status
        self.problems.append(problem)


def _short(err: BaseException) -> str:
    lines = [s for s in str(err).strip().splitlines() if s.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:400]


def _plan(low: tvm.IRModule, name: str, time_limit: float, res: Result, custom: dict) -> tvm.IRModule:
    p = custom[name]() if name in custom else planner_pass(name, time_limit)
    if p is None:
        return low
    with warnings.catch_warnings(record=True) as caught, LLVM:
        warnings.simplefilter("always")
        planned = p(low)
    res.notes.extend(f"{name}: {w.message}" for w in caught if "Roam" in str(w.message))
    if name not in REFERENCE_PLANNERS and name not in custom:
        from roam_tvm.passes import latest_layout  # pylint: disable=import-outside-toplevel

        rec = latest_layout("main")
        res.notes.append(f"{name}: layout status {rec.status if rec else '?'}")
    return planned


def run_case(case: Case, time_limit: float = 1.0, checker: bool = True,
             planners: tuple[str, ...] = ALL_PLANNERS, custom: dict | None = None) -> Result:
    """Plan, build and run ``case`` with ``planners``; compare with StaticPlanBlockMemory.

    ``custom`` maps further planner names to functions that make their pass
    (used to show that the harness catches a wrong plan); they are judged
    like the roam planners.
    """
    custom = dict(custom or {})
    register_externs()
    start = time.perf_counter()
    res = Result(case.seed, sorted(case.used), script=case.mod.script())
    try:
        low = lower(case.mod)
    except Exception as err:  # noqa: BLE001 - every failure is reported with its seed
        res.fail("generator", f"lowering: {_short(err)}")
        return res
    judged = tuple(p for p in planners if p not in REFERENCE_PLANNERS) + tuple(custom)
    values = _run_planners(case, low, tuple(planners) + tuple(custom), judged, time_limit, checker, custom, res)
    _compare(values, len(case.inputs), judged, res)
    res.seconds = time.perf_counter() - start
    return res


def _run_planners(case: Case, low: tvm.IRModule, names: tuple[str, ...], judged: tuple[str, ...],
                  time_limit: float, checker: bool, custom: dict, res: Result) -> dict[str, list[np.ndarray]]:
    """Plan (and check) with each planner, then build and run; failures go into ``res``."""
    values = {}
    linker = Linker()
    for name in names:
        stage = "plan"
        try:
            planned = _plan(low, name, time_limit, res, custom)
            if checker and (name in judged or name == "static"):
                _check(low, planned, name, res, judge=name != "static")
            stage = "build/run"
            values[name] = build_and_run(planned, case.inputs, linker)
        except Exception as err:  # noqa: BLE001
            res.fail("fail" if name in judged else "generator", f"{name}: {stage}: {_short(err)}")
            if name in judged:
                res.notes.append(f"{name}: traceback: {traceback.format_exc(limit=-3)}")
    return values


def _compare(values: dict[str, list[np.ndarray]], n_inputs: int, judged: tuple[str, ...], res: Result) -> None:
    """StaticPlanBlockMemory against no plan (the generator's check), then each judged planner against it."""
    ref = values.get("static")
    if ref is None:
        return
    n_out = len(ref) - n_inputs
    if "none" in values:
        for d in differences(values["none"], ref, n_out):
            res.fail("generator", f"static vs none: {d}")
    for name in judged:
        if name in values:
            for d in differences(ref, values[name], n_out):
                res.fail("fail", f"{name}: {d}")


def _check(low: tvm.IRModule, planned: tvm.IRModule, name: str, res: Result, judge: bool = True) -> None:
    """Run the plan checker; with ``judge=False`` (TVM's own plan) its verdicts are notes only."""
    try:
        check_plan = plan_checker()
    except Exception as err:  # noqa: BLE001
        res.fail("fail", f"{name}: the checker does not import: {_short(err)}")
        return
    if check_plan is None:
        if not any("checker" in n for n in res.notes):
            res.notes.append("checker: roam_tvm.verify is not importable yet; plan check skipped")
        return
    try:
        violations = check_plan(low["main"], planned["main"], planned)
    except Exception as err:  # noqa: BLE001
        res.fail("fail", f"{name}: checker raised {_short(err)}")
        return
    for v in violations:
        if str(v).startswith("cannot verify") or not judge:  # not a wrong roam plan
            res.notes.append(f"{name}: checker: {v}")
        else:
            res.fail("fail", f"{name}: checker: {v}")
