"""An LP-relaxation lower bound on the recomputation overhead at a budget (cvxpy + HiGHS).

Relaxation, over the planner's own candidate set
-----------------------------------------------
In the base order (roam's unbudgeted order), a root ``r`` that
:func:`~roam_tvm.remat.moves.splittable` accepts is used at positions
``u_0 < u_1 < ... < u_m`` (``u_0`` its producer). Dropping it over the gap
``(u_i, u_{i+1})`` frees ``size(r)`` at every step strictly inside the gap,
and costs at least one run of its producer (the copy that brings it back
before ``u_{i+1}``). With ``x[r, i]`` in ``[0, 1]``::

    minimise   sum cost(producer(r)) * x[r, i]
    subject to live(p) - sum_{gaps (r, i) around p} size(r) * x[r, i] <= budget   for every step p

where ``live(p)`` is the unbudgeted profile. A producer's *private* inputs
(roots only it reads, dead before the gap: a ReLU's batch-norm output) must
exist for the copy: held across the gap (the gap frees ``size(r)`` less
their bytes) or made again (their producers' cost added); ``x[r, i]`` is
split into the segments of that convex trade-off
(:func:`~roam_tvm.remat.cross_bound.cost_segments`). A production of a
private input is charged to the one gap it ends; a later gap it serves sees
it live, as held. Every plan the planner can make
(splits and chains over the same roots, copies inserted before a late user,
the original ops in the base order) is a 0/1 point of this LP at least as
cheap as the plan, since the LP ignores what the plan must pay beside the
dropped gaps: inputs kept alive for the copies, the copies' own outputs and
workspace, and chained recomputations of dead inputs. So the LP optimum,
divided by the step's cost, is a lower bound on the overhead of any such
plan whose peak is ``<= budget``. It says nothing about other moves (other
orders, recomputing roots the planner never splits).

With in-place pairs (:mod:`roam_tvm.remat.inplace`), ``live`` is the base
order's profile with its in-place writes, and dropping ``r`` over a gap
also frees ``size(r)`` at the gap's first user when that op may write an
output into ``r`` (``r`` now dies there): the only steps of the base order
where a plan can gain an in-place write it did not have. Counting that
saving even where the op's output is taken by another input only loosens
the bound.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..graph.model import Graph
from .cross_bound import cost_segments, private_inputs
from .moves import Context, splittable
from .state import initial_state, liveness

__all__ = ["RelaxedBound"]


class RelaxedBound:
    """The LP above for one graph and order; :meth:`overhead` solves it for one budget.

    Parameters
    ----------
    g : Graph
    order : sequence of int
        The base order.
    costs : sequence of float
        Cost per op (the planner's cost model).
    """

    def __init__(self, g: Graph, order: Sequence[int], costs: Sequence[float], inplace=None):
        st = initial_state(g, list(order), inplace)
        lv = liveness(st)
        ctx = Context(st, lv)
        self.profile = np.asarray(lv.profile, dtype=np.float64)
        self.step_cost = float(sum(costs))
        updated = {g.roots[t] for op in g.ops for t in op.inplace}
        private = private_inputs(g, updated, costs)
        rows, cols, vals, cost = [], [], [], []
        for r, ps in sorted(lv.users.items()):
            if len(ps) < 2 or not splittable(ctx, r):
                continue
            p = ctx.producer[r]
            segs = cost_segments(float(st.tensors[r].size), float(costs[p]), private.get(p, []))
            for a, b in zip(ps, ps[1:]):
                lo = a if inplace and any(x == r for x, _ in inplace.candidates(st.ops[st.order[a]], st.order[a])) \
                    else a + 1
                if b - lo < 1:
                    continue  # no step the drop frees
                inside = np.arange(lo, b)
                for size, c in segs:
                    j = len(cost)
                    cost.append(c)
                    rows.append(inside)
                    cols.append(np.full(len(inside), j))
                    vals.append(np.full(len(inside), size))
        self.cost = np.asarray(cost, dtype=np.float64)
        if cost:
            from scipy.sparse import csr_matrix

            self.saving = csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                     shape=(len(self.profile), len(cost)))
        else:
            self.saving = None

    @property
    def variables(self) -> int:
        """Number of (root, gap, segment) variables."""
        return len(self.cost)

    def overhead(self, budget: int) -> float | None:
        """Least overhead (fraction of the step) the relaxation allows at ``budget``; None when infeasible."""
        import cvxpy as cp

        over = self.profile - float(budget)
        hot = np.flatnonzero(over > 0)
        if not len(hot):
            return 0.0
        if self.saving is None:
            return None
        a = self.saving[hot]
        used = np.flatnonzero(np.asarray(a.getnnz(axis=0)) > 0)  # only gaps around a step over budget help
        if not len(used):
            return None
        a = a[:, used]
        x = cp.Variable(len(used))
        prob = cp.Problem(cp.Minimize(self.cost[used] @ x), [a @ x >= over[hot], x >= 0, x <= 1])
        prob.solve(solver=cp.HIGHS)
        if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            return None
        return float(prob.value) / self.step_cost if self.step_cost else 0.0
