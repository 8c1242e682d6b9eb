"""RoamLayout: one arena per function, with planned offsets, in place of StaticPlanBlockMemory.

Runs where ``relax.transform.StaticPlanBlockMemory`` runs (after
``CallTIRRewrite``). For each Relax function:

1. extract the plain graph (``extract.py``) and the lifetimes of every
   ``R.builtin.alloc_tensor`` in the current binding order;
2. solve the offsets with the layout core (``roam_tvm.layout``) and validate
   them independently;
3. rewrite: one ``R.memory.alloc_storage`` arena, and each planned tensor as
   ``R.memory.ensure_zero_offset(R.memory.alloc_tensor(arena, offset, ...))``;
4. compare the simulated peak with StaticPlanBlockMemory's on the same function
   and keep whichever is lower (never worse than TVM's default).

Tensors that reach the function's return value stay outside the arena, as in
StaticPlanBlockMemory. A function that cannot be planned statically (a
dimension without ``tir_var_upper_bound``, control flow) is left to
StaticPlanBlockMemory with a warning that names it.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..graph import Graph
from ..layout import Buffer, Problem, solve, validate
from .extract import ExtractError, RelaxGraph, extract_graph
from .records import LayoutRecord, record_layout


def default_alignment(target: tvm.target.Target | None = None) -> int:
    """256 B on GPUs (what CUDA allocators give), 64 B elsewhere (cache line, zero-copy views)."""
    target = target or tvm.target.Target.current(allow_none=True)
    if target is not None and ("gpu" in target.keys or target.kind.name in ("cuda", "rocm", "metal", "vulkan")):
        return 256
    return 64


@dataclass
class ArenaPlan:
    """Offsets of the planned tensors of one function (plain data)."""

    offsets: dict[int, int]  # tensor id -> byte offset
    arena_bytes: int
    lower_bound_bytes: int
    lifetimes: dict[int, tuple[int, int]] = field(default_factory=dict)
    method: str = ""
    seconds: float = 0.0


def plannable_tensors(rg: RelaxGraph) -> list[int]:
    """Allocated roots that come from ``R.builtin.alloc_tensor`` and are not returned."""
    g = rg.graph
    return [t for t in g.allocated if t in rg.alloc_binding and t not in g.pinned_to_end
            and g.tensors[t].size > 0]


def layout_problem(g: Graph, tensors: list[int], alignment: int,
                   order: list[int] | None = None) -> tuple[Problem, dict[int, tuple[int, int]]]:
    """The offset problem for ``tensors`` under ``order`` (default: program order)."""
    life = g.lifetimes(order)
    buffers = []
    for t in tensors:
        a, b = life[t]
        size = -(-g.tensors[t].size // alignment) * alignment
        buffers.append(Buffer(str(t), a, b + 1, size))
    return Problem(buffers, None, alignment), {t: life[t] for t in tensors}


def solve_arena(g: Graph, tensors: list[int], alignment: int, time_limit: float) -> ArenaPlan:
    """Solve and validate the offsets; raise ``RuntimeError`` if no valid layout was found."""
    start = time.perf_counter()
    problem, life = layout_problem(g, tensors, alignment)
    sol = solve(problem, time_limit=time_limit)
    violations = validate(problem, sol)
    if violations:
        raise RuntimeError("layout failed validation: " + "; ".join(violations[:3]))
    return ArenaPlan({int(k): int(v) for k, v in sol.offsets.items()}, int(sol.height),
                     int(problem.lower_bound()), life, getattr(sol, "method", ""),
                     time.perf_counter() - start)


@mutator
class _ArenaRewriter(PyExprMutator):
    """Replaces planned ``R.builtin.alloc_tensor`` bindings with arena views."""

    def __init__(self, mod: tvm.IRModule, planned_vars: dict, arena_bytes: int):
        super().__init__(mod)
        self.planned_vars = planned_vars  # relax Var -> offset
        self.arena_bytes = arena_bytes
        self.arena = None

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        offset = self.planned_vars.get(binding.var)
        if offset is None:
            super().visit_var_binding_(binding)
            return
        call = binding.value
        shape, dtype, device = call.args[0], call.args[1], call.args[2]
        if self.arena is None:
            self.arena = self.builder_.emit(
                relax.op.memory.alloc_storage(relax.ShapeExpr([self.arena_bytes]), device,
                                              "global", "uint8"), name_hint="roam_arena")
        raw = self.builder_.emit(
            relax.op.memory.alloc_tensor(self.arena, offset,
                                         shape, dtype), name_hint=binding.var.name + "_at")
        new = self.builder_.emit(relax.op.memory.ensure_zero_offset(raw), name_hint=binding.var.name)
        self.set_var_remap(binding.var, new)


def rewrite_with_arena(mod: tvm.IRModule, rg: RelaxGraph, plan: ArenaPlan) -> relax.Function:
    """Apply ``plan`` to the function (returns the new function; ``mod`` is not changed)."""
    func = rg.func
    planned_vars = {}
    offset_of_binding = {rg.alloc_binding[t]: off for t, off in plan.offsets.items()}
    for bi, block in enumerate(func.body.blocks):
        for i, b in enumerate(block.bindings):
            if (bi, i) in offset_of_binding:
                planned_vars[b.var] = offset_of_binding[(bi, i)]
    return _ArenaRewriter(mod, planned_vars, plan.arena_bytes).visit_expr(func)


def simulated_peak(func: relax.Function, mod: tvm.IRModule) -> int:
    """Peak bytes of a memory-planned function (storage level, program order)."""
    return extract_graph(func, mod, planned=True).graph.peak()


@tvm.transform.module_pass(opt_level=0, name="RoamLayout")
class RoamLayout:
    """Plan every Relax function's intermediate tensors into one arena.

    Parameters
    ----------
    alignment : int, optional
        Offset alignment in bytes. Default: 256 for GPU targets, 64 otherwise
        (at multiples of 64 B, ``ensure_zero_offset`` is a zero-copy view).
    time_limit : float
        Seconds the layout solver may spend per function.
    never_worse : bool
        Run StaticPlanBlockMemory too and keep its result for any function where
        it simulates to a lower peak. Leave on except for ablations.
    """

    def __init__(self, alignment: int | None = None, time_limit: float = 10.0, never_worse: bool = True):
        if time_limit <= 0:
            raise ValueError(f"RoamLayout: time_limit must be > 0 seconds, got {time_limit}")
        self.alignment = alignment
        self.time_limit = time_limit
        self.never_worse = never_worse

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        alignment = self.alignment or default_alignment()
        baseline = relax.transform.StaticPlanBlockMemory()(mod)
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, relax.Function):
                continue
            name = gv.name_hint
            record = LayoutRecord(function=name, alignment=alignment)
            try:
                rg = extract_graph(func, mod, name)
                tensors = plannable_tensors(rg)
                plan = solve_arena(rg.graph, tensors, alignment, self.time_limit)
                new_func = rewrite_with_arena(mod, rg, plan) if tensors else func
            except (ExtractError, RuntimeError) as err:
                warnings.warn(f"RoamLayout: function {name!r} left to StaticPlanBlockMemory: {err}")
                record.status = f"fallback: {err}"
                updates[gv] = baseline[gv]
                record_layout(record)
                continue
            probe = tvm.IRModule({gv: new_func})
            ours = simulated_peak(new_func, probe)
            theirs = simulated_peak(baseline[gv], baseline)
            record.update(arena_bytes=plan.arena_bytes, lower_bound_bytes=plan.lower_bound_bytes,
                          planned_tensors=len(plan.offsets), seconds=plan.seconds, method=plan.method,
                          peak_bytes=ours, static_plan_peak_bytes=theirs,
                          offsets=plan.offsets, lifetimes=plan.lifetimes,
                          sizes={t: rg.graph.tensors[t].size for t in plan.offsets},
                          names={t: rg.graph.tensors[t].name for t in plan.offsets})
            if self.never_worse and ours > theirs:
                record.status = "static-plan kept (lower peak)"
                updates[gv] = baseline[gv]
            else:
                record.status = "roam"
                updates[gv] = new_func
            record_layout(record)
        out = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
        for gv, f in updates.items():
            out[gv] = f
        return out
