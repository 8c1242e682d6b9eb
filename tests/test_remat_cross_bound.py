"""The order-free lower bound on recomputation overhead (roam_tvm.remat.cross_bound).

It must never exceed what a plan reaches (here: the planner's plans, over 20
budgets on random training graphs, with and without in-place writes), and it
must be tight where the answer is known by hand.
"""
from __future__ import annotations

import pytest
from test_remat import GRAPHS, _chain
from test_remat_inplace import equal_size_pairs

from roam_tvm.remat import RematPlanner
from roam_tvm.remat.cross_bound import CrossingBound


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("i", range(len(GRAPHS)))
def test_bound_never_exceeds_a_plan(i, inplace):
    g = GRAPHS[i]()
    pairs = equal_size_pairs(g, 3) if inplace else None
    planner = RematPlanner(g, inplace=pairs)
    xb = CrossingBound(g, planner.costs, "bytes", planner.inplace)
    top, fl = planner.unbudgeted_peak, planner.floor().bytes
    positive = 0
    for k in range(20):
        b = fl + (top - fl) * k // 19
        plan = planner.plan(b)
        same, anyk = xb.overhead(b), xb.overhead(b, "any_kernel")
        assert same is not None and anyk is not None
        assert anyk <= same + 1e-12  # a producer run writes at least the bytes it makes again
        assert same <= plan.overhead + 1e-12, (k, same, plan.overhead)
        positive += same > 0
    assert positive or i >= 4  # on training graphs (not the plain DAGs) it says something below the top
    assert xb.overhead(top) == 0.0


def test_bound_is_tight_on_a_chain():
    # Budget one activation below the unbudgeted peak: some activation must be made
    # again, the cheapest is one forward op, and the planner pays exactly that.
    act, param = 4096, 1024
    g = _chain(n=6, act=act, param=param)
    planner = RematPlanner(g)
    xb = CrossingBound(g, planner.costs, "bytes")
    b = planner.unbudgeted_peak - act
    plan = planner.plan(b)
    fwd = 2 * act + param  # reads an activation and its weight, writes one activation
    assert plan.cost == fwd
    assert xb.overhead(b) == pytest.approx(fwd / sum(planner.costs))
    assert xb.overhead(b, "any_kernel") == pytest.approx(act / sum(planner.costs))


def test_bound_says_none_below_the_largest_op():
    g = _chain(n=4)
    planner = RematPlanner(g)
    xb = CrossingBound(g, planner.costs, "bytes")
    assert xb.overhead(planner.lower_bound - 1) is None
    with pytest.raises(ValueError, match="kind"):
        xb.overhead(planner.unbudgeted_peak, "fused")


def test_private_inputs_make_the_bound_tight_for_batch_norm_relu():
    # Freeing one ReLU output means running the ReLU again, and the batch-norm output it
    # reads (read by nothing else, dead by then) must be made again too: the bound counts
    # both, which is exactly what the planner pays (a lean chain: norm + relu).
    from test_remat_lean import ACT, _bn_relu

    g = _bn_relu(3)
    planner = RematPlanner(g, cost_model="roofline")
    xb = CrossingBound(g, planner.costs, "roofline")
    b = planner.unbudgeted_peak - ACT
    plan = planner.plan(b)
    names = {g.ops[o].name.rstrip("0123456789") for o in plan.source.values()}
    assert {"norm", "relu"} <= names and "conv" not in names  # (plus a rsqrt of a few bytes)
    cost = {op.name: planner.costs[op.id] for op in g.ops}
    pair = (cost["norm0"] + cost["relu0"]) / sum(planner.costs)
    assert xb.overhead(b) == pytest.approx(pair, rel=1e-3)  # (the excess is ACT less a few stat bytes)
    assert xb.overhead(b) <= plan.overhead
    assert pair <= plan.overhead < pair * 1.001
    assert xb.overhead(b) > cost["relu0"] / sum(planner.costs) * 1.5  # the ReLU alone is not enough
    # The LP over the planner's moves in its order counts the batch-norm output the same way.
    from roam_tvm.remat.lp_bound import RelaxedBound

    lp = RelaxedBound(g, planner.base_order, planner.costs).overhead(b)
    assert pair * 0.999 <= lp <= plan.overhead + 1e-12


def _lp_cost(b, cost, private, freed):
    """Least cost of freeing ``freed`` bytes: run the producer x times (x <= 1), make
    private input i again z_i <= x times, hold the rest (linprog, written here)."""
    import numpy as np
    from scipy.optimize import linprog

    n = len(private)
    c = [cost] + [ci for _, ci in private]
    # freed <= b x - sum s_i (x - z_i)  ->  -(b - sum s) x - sum s_i z_i <= -freed
    a_ub = [[-(b - sum(s for s, _ in private))] + [-s for s, _ in private]]
    b_ub = [-freed]
    for i in range(n):  # z_i <= x
        row = [0.0] * (n + 1)
        row[0], row[i + 1] = -1.0, 1.0
        a_ub.append(row)
        b_ub.append(0.0)
    res = linprog(c, A_ub=np.array(a_ub), b_ub=b_ub, bounds=[(0, 1)] * (n + 1), method="highs")
    return res.fun if res.status == 0 else None


@pytest.mark.parametrize("seed", range(30))
def test_private_input_segments_are_the_lp_envelope(seed):
    import random

    from roam_tvm.remat.cross_bound import cost_segments

    rng = random.Random(seed)
    b, cost = rng.choice([5.0, 30.0, 100.0]), rng.uniform(0.1, 5)
    private = [(rng.choice([5.0, 10.0, 40.0]), rng.uniform(0.1, 50)) for _ in range(rng.randint(0, 3))]
    segs = cost_segments(b, cost, private)
    assert sum(s for s, _ in segs) == pytest.approx(b)
    assert all(c1 / s1 <= c2 / s2 + 1e-12 for (s1, c1), (s2, c2) in zip(segs, segs[1:]))  # convex
    for k in range(1, 6):
        freed, left, acc = b * k / 5, b * k / 5, 0.0
        for s, c in segs:
            take = min(s, left)
            acc, left = acc + c * take / s, left - take
        assert acc == pytest.approx(_lp_cost(b, cost, private, freed), rel=1e-6, abs=1e-9)
