"""Layout problems from the plain-data graph model (no TVM)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from .problem import Buffer, Problem, align_up
from .solver import solve
from .validate import is_valid


def problem_from_graph(g, order: Sequence[int] | None = None, alignment: int = 256) -> Problem:
    """One buffer per allocated storage root, live over its steps under ``order``.

    ``Graph.lifetimes`` gives inclusive (first, last) steps; buffers use the
    half-open ``[first, last + 1)``. Sizes are rounded up to ``alignment``.
    """
    lts = g.lifetimes(order)
    bufs = [Buffer(str(r), a, b + 1, align_up(int(g.tensors[r].size), alignment))
            for r, (a, b) in sorted(lts.items())]
    return Problem(bufs, None, alignment)


@dataclass
class LayoutPlan:
    """Offsets by tensor id (storage roots), the arena size and how it was found."""

    offsets: dict[int, int]
    arena_bytes: int
    lower_bound_bytes: int
    seconds: float
    method: str
    valid: bool
    stats: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0


def plan_layout(g, order: Sequence[int] | None = None, alignment: int = 256, time_limit: float = 30.0,
                method: str = "auto") -> LayoutPlan:
    """Solve the layout of ``g`` under ``order`` and return a validated plan."""
    t0 = time.perf_counter()
    prob = problem_from_graph(g, order, alignment)
    sol = solve(prob, time_limit=time_limit, method=method)
    return LayoutPlan(
        offsets={int(k): v for k, v in sol.offsets.items()},
        arena_bytes=sol.height,
        lower_bound_bytes=prob.lower_bound(),
        seconds=time.perf_counter() - t0,
        method=sol.method,
        valid=is_valid(prob, sol),
        stats={k: v for k, v in sol.stats.items() if k != "log"},
    )
