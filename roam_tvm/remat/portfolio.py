"""Several greedy paths, the cheapest plan of any of them per budget (no TVM).

One greedy path (:class:`~roam_tvm.remat.planner.RematPlanner`) takes at
each step the move that lowers the peak most per unit of cost. A richer move
set can make that path worse at some budgets: a move with the best ratio may
lower the peak a lot at once, and every budget in between must then pay for
all of it (ResNet-18: a hoisted chain worth 24 MiB for 5.5% of the step where
the plain path took 6 MiB for 1.7%). So the portfolio grows one path per move
set (all moves; no hoisting; the plain and chained moves only; all moves and
sibling moves from the order where in-place writers read their inputs last)
and plans each budget on every path, keeping the cheapest.

Still monotone: each path's cost never rises as the budget grows, so neither
does their minimum. Still exact: the plan returned is one path's plan, checked
as that path checks it. Never worse than any single path, and in particular
than the plain one the planner had before lean chains and hoisting.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from ..graph.model import Graph
from .budget import Budget, resolve_budget
from .cost import overheads
from .floor import BudgetError, Floor
from .planner import RematPlan, RematPlanner

__all__ = ["RematPortfolio", "PATHS"]

#: Move sets, one path each: (lean chains, hoisting[, readers first[, siblings]]). The first is
#: the richest of the scheduler's order.
#: The last starts from the order where in-place writers are their inputs' last readers
#: (:mod:`roam_tvm.remat.inplace_order`): it can end far lower (GPT-2's logits overwritten by
#: ``exp``) or higher (another greedy path) than the scheduler's order, so both are grown.
#: It also offers sibling moves (:mod:`roam_tvm.remat.group_moves`), new like it.
PATHS = ((True, True), (True, False), (False, False), (True, True, True, True))


class RematPortfolio:
    """:class:`RematPlanner`'s interface over several paths (see the module docstring).

    Parameters are :class:`RematPlanner`'s; ``time_limit`` is shared evenly
    between the paths, and ``paths`` lists their (lean, hoist[, readers_first[, siblings]]) move sets.
    """

    def __init__(self, g: Graph, order: Sequence[int] | None = None, cost_model: str = "bytes",
                 flops: Sequence[float] | None = None, max_candidates: int | None = None,
                 time_limit: float | None = None, inplace: dict | None = None,
                 paths: Sequence[tuple[bool, bool]] = PATHS):
        if not paths:
            raise ValueError("RematPortfolio needs at least one (lean, hoist) move set in paths")
        share = None if time_limit is None else time_limit / len(paths)
        first = RematPlanner(g, order, cost_model, flops, max_candidates, share, inplace, *paths[0])
        order = first.scheduler_order  # the others start from the same order (no second heuristic search)
        planners = [first] + [RematPlanner(g, order, cost_model, flops, max_candidates, share, inplace, *p)
                              for p in paths[1:]]
        # a readers-first path whose order moved nothing repeats its move set's path: dropped
        # when that path is grown too, its search time shared by the others
        flags = [(*p, False, False)[:4] for p in paths]
        plain_order = {(f[0], f[1], f[3]) for f in flags if not f[2]}
        kept = [i for i, (pl, f) in enumerate(zip(planners, flags))
                if not (f[2] and pl.base_order == pl.scheduler_order and (f[0], f[1], f[3]) in plain_order)]
        self.paths = [planners[i] for i in kept]
        if time_limit is not None:
            for pl in self.paths:
                pl.time_limit = time_limit / len(self.paths)
        words = ("lean", "hoist", "readers-first", "siblings")
        self.names = ["+".join(n for n, on in zip(words, paths[i]) if on) or "plain" for i in kept]
        self.g, self.costs, self.cost_model, self.flops = g, first.costs, cost_model, flops
        self.base_order, self.inplace, self.lower_bound = first.base_order, first.inplace, first.lower_bound
        self._given_measured: int | None = None  # the measured peak of as_given(), once asked

    def as_given(self, budget: int) -> RematPlan:
        """The plan that changes nothing: the step in its binding order, no copies, nothing in place."""
        order = list(range(len(self.g.ops)))
        step_cost = sum(self.costs)
        return RematPlan(self.g, order, self.g.peak(order), budget, {}, 0.0, step_cost, 0.0, self.cost_model,
                         {"path": "as given", "overheads": overheads(self.g, [], self.flops),
                          "unbudgeted_peak": self.unbudgeted_peak, "inplace_ops": 0, "hoists": 0,
                          "plan_seconds": 0.0, "seconds": self.seconds, "truncated": False}, [])

    @property
    def unbudgeted_peak(self) -> int:
        return self.paths[0].unbudgeted_peak

    @property
    def initial_peak(self) -> int:
        """Least peak of the paths' base orders with their in-place writes and no recomputation."""
        return min(p.lives[0].peak for p in self.paths)

    @property
    def truncated(self) -> bool:
        return any(p.truncated for p in self.paths)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.paths)

    def floor(self, measure: Callable[[RematPlan], int] | None = None) -> Floor:
        """The lowest floor of the paths (runs each to its end).

        With ``measure`` (as given to :meth:`plan`), the floor is measured: the least measured
        peak of any state of any path and of the step as given, so that ``plan(b, measure)``
        meets every ``b`` at or above it and refuses every ``b`` below (the perfect-packing floor
        may be out of reach once laid out).
        """
        best = min((p.floor() for p in self.paths), key=lambda f: f.bytes)
        if measure is None:
            return best
        least, at = self._measured_given(measure), best
        for p in self.paths:
            p.floor()  # grown to its end
            # A measured peak is never below the perfect-packing one, and those never rise along
            # the path: only the states packed below the least measured peak so far can go under
            # it, a suffix of the path. Their least measured peak is the least budget the path's
            # walk meets, so the floor is exact (a byte below it is refused).
            i = len(p.states) - 1
            while i >= 0 and p.lives[i].peak < least:
                if i not in p.measured:  # the planner's own cache, shared with its measured walk
                    p.measured[i] = int(measure(p.plan_at(i)))
                if p.measured[i] < least:
                    least, at = p.measured[i], p.floor()
                i -= 1
        return replace(at, bytes=least, live=least - self.g.always_live_bytes, measured=True)

    def _measured_given(self, measure: Callable[[RematPlan], int]) -> int:
        if self._given_measured is None:
            self._given_measured = int(measure(self.as_given(self.unbudgeted_peak)))
        return self._given_measured

    def seconds_for(self, budget: int) -> float:
        """Search seconds a fresh portfolio spends to plan ``budget``: each path grown until it fits
        (or to its end)."""
        total = 0.0
        for p in self.paths:
            i = next((i for i, lv in enumerate(p.lives) if lv.peak <= budget), None)
            total += p.seconds if i is None else p.state_seconds[i]
        return total

    def path_of(self, plan: RematPlan) -> RematPlanner:
        """The path a plan of this portfolio came from."""
        return self.paths[self.names.index(plan.report["path"])]

    def plan(self, budget: Budget | str | int,
             measure: Callable[[RematPlan], int] | None = None) -> RematPlan:
        """The cheapest of the paths' plans for ``budget`` (the first path's on a tie).

        Raises
        ------
        BudgetError
            When no path fits: the error of the path with the lowest floor (with ``measure``,
            the error naming the measured floor, :meth:`floor`).
        """
        b = resolve_budget(budget, self.unbudgeted_peak)
        if measure is not None:
            # The step as given, measured: every path's first state writes in place, which can
            # lay out worse than the step itself, so a budget the step already meets (roam's
            # own unbudgeted peak) could otherwise be refused or recomputed for.
            if self._measured_given(measure) <= b:
                given = self.as_given(b)
                given.report["measured_peak"] = self._given_measured
                return given
        best, errors = None, []
        for name, p in zip(self.names, self.paths):
            try:
                plan = p.plan(b, measure)
            except BudgetError as e:
                errors.append((p, e))
                continue
            plan.report["path"] = name
            if best is None or plan.cost < best.cost:
                best = plan
        if best is None:
            if measure is not None:  # name the floor this budget is measured against
                raise self.floor(measure).error(b)
            raise min(errors, key=lambda pe: pe[0].floor().bytes)[1]
        best.report["plan_seconds"] = self.seconds_for(b)
        return best
