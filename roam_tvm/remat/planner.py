"""Fit a training step under a byte budget by recomputing forward activations (no TVM).

Method: one greedy path, cut by the budget
-------------------------------------------
Start from the unbudgeted step (``g`` in roam's order, no copies). At each
step, every root live across a peak step but not used there is a candidate
for :func:`~roam_tvm.remat.moves.split` (recompute it for its users after that
step), once plainly, once *chained* (inputs dead at the insertion point are
recomputed too, which is what lets the path reach full recomputation of a
chain) and once *lean-chained* (only the large dead inputs are recomputed;
small ones such as a batch norm's statistics are held until the copy). A
chained move whose dead input an earlier move already recomputes later is
also tried *hoisting* that copy up to serve both (re-ordering after
recomputation), its peak counted on the built state. Each candidate is simulated exactly; a candidate *improves* when it
lowers ``(peak, number of steps at the peak)`` lexicographically. Among the
improving ones, the one lowering the peak most per unit of added cost is
taken; when none lowers the peak, the cheapest one that removes a peak step.
The path ends when nothing improves: its last peak is the *floor*.

The path does not depend on the budget. The plan for budget ``B`` is the
first state on the path whose peak is ``<= B``. A larger budget is met at the
same state or an earlier one, and costs only grow along the path, so **a
larger budget never costs more recomputation**, whatever the budgets asked
and in whatever order. Peaks never rise along the path either.

Exactness: the returned plan is rebuilt as a :class:`~roam_tvm.graph.model.Graph`
whose ``check_order`` and ``peak`` (the project's simulator) must agree with
the planner's own count, and the peak is ``<= budget`` by construction.

In place: with ``inplace`` pairs (an op's output may be written into an
input, proven on its kernel), every state writes an output into an input
that dies at that op (:mod:`roam_tvm.remat.inplace`). That is free (no
recomputation) and is already in the path's first state; the moves see it
(an input that a move makes die earlier may then be overwritten).

Order: the copies are inserted into the base order (roam's unbudgeted
order; with ``readers_first``, a reader of an input that an op may overwrite
runs before that op when it can: :mod:`roam_tvm.remat.inplace_order`), each just before its first
reader; the other ops keep their order.

Arena: ``plan(budget, measure)`` walks on from that first state to the first
one whose *measured* peak (e.g. the arena a layout planner gives) fits; still
monotone. ``time_limit`` truncates the path (see :class:`RematPlanner`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..graph.model import Graph, GraphError
from .budget import Budget, format_bytes, resolve_budget
from .cost import op_costs, overheads
from .floor import BudgetError, Floor, always_live_parts, lower_bound, parts_text
from .delta import Frame, move_peak, plan_move
from .inplace import InplaceModel
from .group_moves import group_options
from .inplace_order import readers_first as first_readers
from .moves import CHAIN_MODES, LEAN, Context, split, splittable
from .state import State, initial_state, interval_arrays, liveness, peak_count

__all__ = ["RematPlan", "RematPlanner", "plan_remat"]

SIBLINGS = -1  # the chain-mode slot of a sibling move in the planner's keys


@dataclass
class RematPlan:
    """A step that fits a budget.

    Attributes
    ----------
    graph : Graph
        The original ops and tensors plus the copies (op ids past the original ones).
    order : list of int
        Execution order over ``graph.ops``.
    peak : int
        ``graph.peak(order)``, always-live bytes included.
    budget : int
    source : dict of int to int
        Copy op id -> the original op it recomputes.
    cost, step_cost : float
        Cost of the copies, and of the original step, in the cost model's unit.
    overhead : float
        ``cost / step_cost`` (0.05 is 5%).
    cost_model : str
    inplace : list of (int, int, int)
        (op, x, y): the op writes its output ``y`` into its input ``x``
        (``graph`` has ``y`` aliasing ``x``).
    report : dict
        ``overheads`` (recomputed share under every cost model that can be
        evaluated: ``bytes``, and ``flops``/``roofline`` when FLOPs are known),
        the unbudgeted peak, the path position, ``hoists`` (moves that moved
        an earlier copy up) and planning seconds.
    """

    graph: Graph
    order: list[int]
    peak: int
    budget: int
    source: dict[int, int]
    cost: float
    step_cost: float
    overhead: float
    cost_model: str
    report: dict = field(default_factory=dict)
    inplace: list = field(default_factory=list)


class RematPlanner:
    """Plans for any number of budgets on one graph; the greedy path is shared and grown lazily.

    Parameters
    ----------
    g : Graph
        The training step.
    order : sequence of int, optional
        Roam's unbudgeted order; default: the best ordering heuristic.
    cost_model : str
        ``"bytes"``, ``"flops"`` or ``"roofline"`` (:mod:`roam_tvm.remat.cost`).
    flops : sequence of float, optional
        FLOPs per op for the roofline model.
    max_candidates : int, optional
        Simulate at most this many candidates per step (the largest roots
        first); default all.
    time_limit : float, optional
        Seconds the path may grow in total. When they run out the path ends
        where it is (``truncated``): plans already on it are unchanged, so
        monotonicity holds, but the floor is then only the lowest peak reached
        and may depend on the machine's speed.
    inplace : mapping of int to list of (int, int), optional
        Op id -> (input tensor, output tensor) pairs its kernel may write in
        place (see :mod:`roam_tvm.remat.inplace`); default none.
    lean, hoist : bool
        Offer lean-chained moves, and moves that move an earlier copy up
        (both on by default; :class:`~roam_tvm.remat.portfolio.RematPortfolio`
        also grows paths without them).
    readers_first : bool
        With ``inplace``, start from ``order`` with the late readers of inputs
        that an op may overwrite moved up (:mod:`roam_tvm.remat.inplace_order`);
        off by default: a greedy path from that order may end higher, so
        :class:`~roam_tvm.remat.portfolio.RematPortfolio` grows it beside the others.
    siblings : bool
        Also offer sibling moves (:mod:`roam_tvm.remat.group_moves`): every
        root made from one input dead at the peak, recomputed at once.
    """

    def __init__(self, g: Graph, order: Sequence[int] | None = None, cost_model: str = "bytes",
                 flops: Sequence[float] | None = None, max_candidates: int | None = None,
                 time_limit: float | None = None, inplace: dict | None = None,
                 lean: bool = True, hoist: bool = True, readers_first: bool = False,
                 siblings: bool = False):
        self.chain_modes = CHAIN_MODES if lean else tuple(m for m in CHAIN_MODES if m != LEAN)
        self.hoist, self.siblings = hoist, siblings
        if time_limit is not None and not time_limit > 0:
            raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
        self.time_limit = time_limit
        self.truncated = False
        self.g = g
        self.flops = flops
        self.costs = op_costs(g, cost_model, flops)
        self.cost_model = cost_model
        if order is None:
            from ..order.heuristics import best_heuristic

            order = best_heuristic(g)[0]
        g.check_order(list(order))
        self.max_candidates = max_candidates
        self.inplace = InplaceModel(g, inplace) if inplace else None
        # an in-place writer must be its input's last reader: small late readers move up
        self.scheduler_order = list(order)
        moved = readers_first and self.inplace
        self.base_order = first_readers(g, order, self.inplace) if moved else list(order)
        st = initial_state(g, self.base_order, self.inplace)
        self.states: list[State] = [st]
        self.lives = [liveness(st)]
        self.hoists = [0]  # per path state: moves so far that moved an earlier copy up
        self._unbudgeted = g.peak(list(order)) if self.inplace else self.lives[0].peak
        self.done = False
        self.seconds = 0.0
        self.state_seconds = [0.0]  # search seconds spent when each path state was reached
        self.lower_bound = lower_bound(g, self.inplace)
        self.measured: dict[int, int] = {}  # path index -> measured peak (see ``plan``)

    @property
    def unbudgeted_peak(self) -> int:
        """Peak of the base order with no recomputation and nothing in place (roam's own peak)."""
        return self._unbudgeted

    # ------------------------------------------------------------------ path
    def _step(self) -> bool:
        """Add the next state to the path; False when nothing improves."""
        t0 = time.perf_counter()
        grew = self._step_once()
        if grew:
            self.state_seconds.append(self.state_seconds[-1] + time.perf_counter() - t0)
        return grew

    def _step_once(self) -> bool:
        st, lv = self.states[-1], self.lives[-1]
        ctx = Context(st, lv)
        arr = interval_arrays(st)
        fr = Frame(ctx, arr["first"], arr["last"], arr["size"], arr["alloc"], arr["ws"], lv.profile, arr["pos"])
        best_key, best = None, None
        n_peak = len(lv.at_peak)
        full = None  # the chained move of the current candidate (a lean one equal to it is skipped)
        cands = self._candidates(ctx)
        built: dict = {}  # sibling move index -> its state (built to be counted)
        for (r, s), chain in ((c, ch) for c in cands for ch in self.chain_modes):
            mv = plan_move(ctx, r, s, chain)
            if chain == 1:
                full = None if mv is None else mv.src
            if mv is None or (chain and len(mv.src) == 1) or (chain == LEAN and mv.src == full):
                continue  # a chain that copies one op is the plain move again; a lean one, the chain
            options = [(False, *move_peak(fr, mv, arr["base"]),
                        sum(self.costs[st.origin_op[o]] for o in mv.src))]
            if mv.hoistable and self.hoist:  # re-ordering: counted on the built state (few such moves)
                hst = split(ctx, r, s, self.costs, chain, hoist=True)
                if hst is not None:
                    options.append((True, *peak_count(hst, st), hst.cost - st.cost))
            for hoist, pk, cnt, added in options:
                key = _move_key(lv.peak, n_peak, pk, cnt, added, (r, s, chain, hoist))
                if key is not None and (best_key is None or key < best_key):
                    best_key, best = key, (r, s, chain, hoist, pk, cnt)
        for gi, (s, roots, gst) in enumerate(group_options(ctx, cands, self.costs) if self.siblings else ()):
            (pk, cnt), built[gi] = peak_count(gst, st), gst  # a sibling move's slot after chain: its index
            key = _move_key(lv.peak, n_peak, pk, cnt, gst.cost - st.cost, (roots[0], s, SIBLINGS, gi))
            if key is not None and (best_key is None or key < best_key):
                best_key, best = key, (roots[0], s, SIBLINGS, gi, pk, cnt)
        if best is None:
            return False
        r, s, chain, hoist, pk, cnt = best
        nst = built[hoist] if chain == SIBLINGS else split(ctx, r, s, self.costs, chain, hoist)
        nlv = None if nst is None else liveness(nst, st)
        if nlv is None or (nlv.peak, len(nlv.at_peak)) != (pk, cnt):
            raise RuntimeError(f"remat planner: predicted peak {(pk, cnt)} of moving root {r} at step {s} "
                               f"(chain={chain}, hoist={hoist}) disagrees with the rebuilt state's "
                               f"{None if nlv is None else (nlv.peak, len(nlv.at_peak))}")
        self.states.append(nst)
        self.lives.append(nlv)
        self.hoists.append(self.hoists[-1] + (hoist is True))
        return True

    def _candidates(self, ctx: Context) -> list[tuple[int, int]]:
        """(root, position) pairs: live across a peak step, not used there, splittable."""
        st, lv = ctx.st, ctx.lv
        seen: dict[tuple[int, int], tuple[int, int]] = {}
        ok: dict[int, bool] = {}
        for s in lv.at_peak:
            for r, ps in lv.users.items():
                if ps[0] >= s or ps[-1] <= s or s in ps:
                    continue
                if r not in ok:
                    ok[r] = splittable(ctx, r)
                if not ok[r]:
                    continue
                gap = max(i for i in ps if i < s)
                seen.setdefault((r, gap), (r, s))
        out = sorted(seen.values(), key=lambda rs: (-st.tensors[rs[0]].size, rs))
        return out if self.max_candidates is None else out[:self.max_candidates]

    def _extend_until(self, budget: int) -> int | None:
        """Index of the first state with peak <= budget, growing the path as needed."""
        for i, lv in enumerate(self.lives):
            if lv.peak <= budget:
                return i
        t0 = time.perf_counter()
        try:
            while not self.done:
                if not self._step() or self._out_of_time(t0):
                    self.done = True
                    break
                if self.lives[-1].peak <= budget:
                    return len(self.lives) - 1
        finally:
            self.seconds += time.perf_counter() - t0
        return None

    # ---------------------------------------------------------------- public
    def floor(self) -> Floor:
        """The lowest peak on the path (runs the path to its end) and what it is made of."""
        self._extend_until(-1)
        st, lv = self.states[-1], self.lives[-1]
        s = lv.at_peak[0]
        return Floor(lv.peak, always_live_parts(self.g), lv.peak - self.g.always_live_bytes,
                     st.ops[st.order[s]].name, self.lower_bound, self.truncated)

    def plan(self, budget: Budget | str | int,
             measure: Callable[[RematPlan], int] | None = None) -> RematPlan:
        """The least-recomputation plan on the path that fits ``budget``.

        Parameters
        ----------
        budget : Budget, str or int
            Bytes, or a fraction of :attr:`unbudgeted_peak` (see :mod:`roam_tvm.remat.budget`).
        measure : callable, optional
            The peak that must fit, when it is not the perfect-packing one: for
            example the arena a layout planner gives the plan. The plan is then
            the first state on the path, from the first whose perfect-packing
            peak fits, whose measured peak fits too; still monotone, since both
            "first" indices can only move later as the budget shrinks.
            Measurements are cached per path state.

        Raises
        ------
        BudgetError
            When the budget is below the floor (or below the lower bound,
            checked first), or when no state's measured peak fits.
        """
        b = resolve_budget(budget, self.unbudgeted_peak)
        if b < self.lower_bound:
            raise BudgetError(
                f"budget {format_bytes(b)} is below {format_bytes(self.lower_bound)}, the bytes no plan "
                f"can avoid: always-live ({format_bytes(self.g.always_live_bytes)}: "
                f"{parts_text(always_live_parts(self.g))}) + the largest op's inputs, outputs and "
                f"workspace{' (less the outputs it may write into its inputs)' if self.inplace else ''}. Use a budget of at least {self.floor().bytes} bytes (this planner's floor).")
        i = self._extend_until(b)
        if i is None:
            raise self.floor().error(b)
        if measure is None:
            return self._make_plan(i, b)
        least = None
        while True:
            plan = self._make_plan(i, b)
            if i not in self.measured:
                self.measured[i] = int(measure(plan))
            m = self.measured[i]
            plan.report["measured_peak"] = m
            if m <= b:
                return plan
            least = m if least is None else min(least, m)
            i += 1
            if i == len(self.states) and (self.done or not self._grow()):
                raise BudgetError(
                    f"budget {format_bytes(b)} fits with perfect packing but not once measured (laid out): "
                    f"the least measured peak of the plans tried (every one on the recomputation path from "
                    f"the first that fits with perfect packing) is {format_bytes(least)}. Use a budget of "
                    f"at least {least} bytes.")

    def plan_at(self, i: int) -> RematPlan:
        """The plan of state ``i`` of the path grown so far (its own peak as the budget)."""
        return self._make_plan(i, self.lives[i].peak)

    def _grow(self) -> bool:
        t0 = time.perf_counter()
        grew = self._step()
        self.done = not grew or self._out_of_time(t0)
        self.seconds += time.perf_counter() - t0
        return grew

    def _out_of_time(self, t0: float) -> bool:
        """The growth budget is spent (``seconds`` so far plus this call's)."""
        if self.time_limit is None or self.seconds + time.perf_counter() - t0 <= self.time_limit:
            return False
        self.truncated = True
        return True

    def _make_plan(self, i: int, budget: int) -> RematPlan:
        st, lv = self.states[i], self.lives[i]
        g2 = st.graph(f"{self.g.name}+remat", list(lv.inplace))
        try:
            g2.check_order(st.order)
        except GraphError as e:  # the planner broke a dependency: a bug, not bad input
            raise RuntimeError(f"remat planner produced an invalid order: {e}") from e
        peak = g2.peak(st.order)
        if peak != lv.peak or peak > budget:
            raise RuntimeError(f"remat planner disagrees with Graph.peak: {lv.peak} vs {peak} "
                               f"(budget {budget})")
        n0 = len(self.g.ops)
        source = {o: st.origin_op[o] for o in range(n0, len(st.ops))}
        step_cost = sum(self.costs)
        return RematPlan(g2, list(st.order), peak, budget, source, st.cost, step_cost,
                         st.cost / step_cost if step_cost else 0.0, self.cost_model,
                         {"path_index": i, "path_length": len(self.states), "done": self.done,
                          "truncated": self.truncated,
                          "unbudgeted_peak": self.unbudgeted_peak, "seconds": self.seconds,
                          "overheads": self._overheads(source), "inplace_ops": len(lv.inplace),
                          "hoists": self.hoists[i], "plan_seconds": self.state_seconds[i],
                          "inplace_bytes": sum(st.tensors[y].size for _, _, y in lv.inplace)},
                         list(lv.inplace))

    def _overheads(self, source: dict[int, int]) -> dict[str, float]:
        """Recomputed share of the step under every cost model that can be evaluated."""
        return overheads(self.g, source.values(), self.flops)


def _move_key(peak: int, n_peak: int, pk: int, cnt: int, added: float, move: tuple) -> tuple | None:
    """Sort key of a move (smaller is better), None when it does not improve (peak, count):
    the peak lowered most per unit of cost, else the cheapest that removes a peak step."""
    if (pk, cnt) >= (peak, n_peak):
        return None
    return (0, -(peak - pk) / max(added, 1e-30), added, *move) if pk < peak else (1, added, cnt, *move)


def plan_remat(g: Graph, budget: Budget | str | int, order: Sequence[int] | None = None,
               cost_model: str = "bytes", flops: Sequence[float] | None = None,
               inplace: dict | None = None) -> RematPlan:
    """Plan one budget (see :class:`RematPlanner` to plan many on one graph)."""
    return RematPlanner(g, order, cost_model, flops, inplace=inplace).plan(budget)
