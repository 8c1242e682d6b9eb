"""Arena plans for one extracted function: which tensors, where, and the rewrite.

Plain planning over a :class:`RelaxGraph` (``extract.py``): the tensors a roam
arena may hold, their offsets (one arena per ``runtime_device_index``, solved by
the layout core), and the mutator that puts them in place of their
``R.builtin.alloc_tensor`` bindings.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..graph import Graph
from ..layout import Buffer, Problem, solve, validate
from .extract import RelaxGraph


def default_alignment(target: tvm.target.Target | None = None) -> int:
    """Offset alignment of arena tensors: 64 B, on every target.

    It is the runtime's allocation alignment (``kAllocAlignment``): every TIR buffer is
    declared with that ``data_alignment``, so kernels (CUDA's widest vector access is 16 B)
    assume no more, and the VM's ``ensure_zero_offset`` is zero-copy at multiples of it.
    CUDA allocators return 256 B; ``RoamLayout(alignment=256)`` keeps that where a library
    wants it. On tiny models 256 B costs a lot (an RNN with 128-B tensors doubled its
    arena); at full sizes the two give the same peak (GPT-2 small, batch 1, 128 tokens).
    """
    return 64


@dataclass
class ArenaPlan:
    """Offsets of the planned tensors of one device's arena (plain data)."""

    offsets: dict[int, int]  # tensor id -> byte offset
    arena_bytes: int
    lower_bound_bytes: int
    lifetimes: dict[int, tuple[int, int]] = field(default_factory=dict)
    method: str = ""
    seconds: float = 0.0
    device: int = 0


def plannable_tensors(rg: RelaxGraph) -> dict[int, list[int]]:
    """Device index -> allocated roots an arena may hold.

    Those come from a top-level ``R.builtin.alloc_tensor``, are not returned
    (directly or through a view), and did not escape (``RelaxGraph.escaped``).
    """
    g = rg.graph
    groups: dict[int, list[int]] = {}
    for t in g.allocated:
        if t in rg.alloc_binding and t not in g.pinned_to_end and t not in rg.escaped and g.tensors[t].size > 0:
            groups.setdefault(rg.alloc_device.get(t, 0), []).append(t)
    return groups


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


def solve_arena(g: Graph, tensors: list[int], alignment: int, time_limit: float, device: int = 0) -> ArenaPlan:
    """Solve and validate the offsets; raise ``RuntimeError`` if no valid layout was found."""
    start = time.perf_counter()
    problem, life = layout_problem(g, tensors, alignment)
    sol = solve(problem, time_limit=time_limit)
    violations = validate(problem, sol)
    if violations:
        raise RuntimeError("layout failed validation: " + "; ".join(violations[:3]))
    offsets = {int(k): int(v) for k, v in sol.offsets.items()}
    # Sizes were rounded up to the alignment so that offsets stay aligned; the
    # arena itself ends where its highest tensor ends.
    top = max((off + g.tensors[t].size for t, off in offsets.items()), default=0)
    return ArenaPlan(offsets, int(top), int(problem.lower_bound()), life, getattr(sol, "method", ""),
                     time.perf_counter() - start, device)


@mutator
class _ArenaRewriter(PyExprMutator):
    """Replaces planned ``R.builtin.alloc_tensor`` bindings with views of their device's arena."""

    def __init__(self, mod: tvm.IRModule, planned_vars: dict, arena_bytes: dict[int, int]):
        super().__init__(mod)
        self.planned_vars = planned_vars  # relax Var -> (device, offset)
        self.arena_bytes = arena_bytes    # device -> bytes
        self.arenas: dict[int, relax.Var] = {}

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        planned = self.planned_vars.get(binding.var)
        if planned is None:
            super().visit_var_binding_(binding)
            return
        device, offset = planned
        call = binding.value
        shape, dtype, device_arg = call.args[0], call.args[1], call.args[2]
        if device not in self.arenas:
            name = "roam_arena" if device == 0 else f"roam_arena_dev{device}"
            self.arenas[device] = self.builder_.emit(
                relax.op.memory.alloc_storage(relax.ShapeExpr([self.arena_bytes[device]]), device_arg,
                                              "global", "uint8"), name_hint=name)
        raw = self.builder_.emit(
            relax.op.memory.alloc_tensor(self.arenas[device], offset, shape, dtype, device_arg),
            name_hint=binding.var.name + "_at")
        new = self.builder_.emit(relax.op.memory.ensure_zero_offset(raw), name_hint=binding.var.name)
        self.set_var_remap(binding.var, new)


def rewrite_with_arenas(mod: tvm.IRModule, rg: RelaxGraph, plans: list[ArenaPlan]) -> relax.Function:
    """Apply ``plans`` to the function (returns the new function; ``mod`` is not changed)."""
    func = rg.func
    placed = {rg.alloc_binding[t]: (p.device, off) for p in plans for t, off in p.offsets.items()}
    planned_vars = {}
    for bi, block in enumerate(func.body.blocks):
        for i, b in enumerate(block.bindings):
            if (bi, i) in placed:
                planned_vars[b.var] = placed[(bi, i)]
    arena_bytes = {p.device: p.arena_bytes for p in plans}
    return _ArenaRewriter(mod, planned_vars, arena_bytes).visit_expr(func)
