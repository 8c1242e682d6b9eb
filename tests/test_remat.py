"""Recomputation under a byte budget (roam_tvm.remat), checked by a simulator written here.

The checks below share no code with the planner: peak, dependencies and the
values every op reads are recomputed from the plan's raw ops and tensors.
"""
from __future__ import annotations

import pytest

from roam_tvm.graph.model import GraphBuilder
from roam_tvm.graph.random import random_dag, random_training_graph
from roam_tvm.remat import BudgetError, RematPlanner, plan_remat

ALWAYS = ("input", "param", "state", "const")


# ----------------------------------------------------------- independent checks
def _storage(tensors, t):
    while tensors[t].alias_of is not None:
        t = tensors[t].alias_of
    return t


def sim_peak(ops, tensors, order):
    """Peak bytes: every allocated storage is live from its first to its last touching step."""
    touch = {}
    for step, o in enumerate(order):
        for t in list(ops[o].inputs) + list(ops[o].outputs):
            s = _storage(tensors, t)
            if tensors[s].kind == "intermediate":
                touch.setdefault(s, set()).add(step)
    returned = {_storage(tensors, t.id) for t in tensors if t.is_output}
    base = sum(t.size for t in tensors if t.alias_of is None and t.kind in ALWAYS)
    peak = base
    for step, o in enumerate(order):
        live = base + ops[o].workspace
        for s, steps in touch.items():
            end = len(order) - 1 if s in returned else max(steps)
            if min(steps) <= step <= end:
                live += tensors[s].size
        peak = max(peak, live)
    return peak


def check_runs(ops, tensors, order):
    """Every read is of a value already made; an in-place write comes after every read of the old value."""
    made = {t.id for t in tensors if t.kind in ALWAYS and t.alias_of is None}
    step_of = {o: i for i, o in enumerate(order)}
    assert sorted(order) == list(range(len(ops)))
    for o in order:
        for t in ops[o].inputs:
            assert t in made, f"op {ops[o].name} reads {tensors[t].name} before it exists"
        made.update(ops[o].outputs)
    for u in ops:
        for x in u.inplace:
            for r in ops:
                if r.id != u.id and x in r.inputs:
                    assert step_of[r.id] < step_of[u.id], f"{r.name} reads {tensors[x].name} after {u.name} overwrote it"


def values(ops, tensors, order, source, intern):
    """Symbolic value of each tensor: (original op, output index, values read); copies as their source."""
    val = {}
    for t in tensors:
        if t.kind in ALWAYS and t.alias_of is None:
            val[t.id] = intern.setdefault(("leaf", t.name), len(intern))
    for o in order:
        op = ops[o]
        key_in = tuple(val[t] for t in op.inputs)
        for k, t in enumerate(op.outputs):
            val[t] = intern.setdefault((source.get(o, o), k, key_in), len(intern))
    return val


def check_plan(g, plan, budget, base_order):
    ops, tensors, order = plan.graph.ops, plan.graph.tensors, plan.order
    check_runs(ops, tensors, order)
    peak = sim_peak(ops, tensors, order)
    assert peak == plan.peak
    assert peak <= budget
    # Same values: every original tensor holds what it holds in the unbudgeted step,
    # and every copy's output equals the output of the op it recomputes.
    intern = {}
    v0 = values(g.ops, g.tensors, list(range(len(g.ops))), {}, intern)
    v1 = values(ops, tensors, order, plan.source, intern)
    for t in g.tensors:
        if t.id in v0:
            assert v1[t.id] == v0[t.id], f"{t.name} changed"
    for c, o in plan.source.items():
        assert ops[c].name == g.ops[o].name
        for k, t in enumerate(ops[c].outputs):
            assert v1[t] == v0[g.ops[o].outputs[k]]
    # Originals keep their relative order.
    assert [o for o in order if o < len(g.ops)] == list(base_order)


GRAPHS = [
    lambda: random_training_graph(40, 1),
    lambda: random_training_graph(60, 2, updates=False),
    lambda: random_training_graph(70, 5, skip_prob=0.4),
    lambda: random_training_graph(50, 7, program="updates_last"),
    lambda: random_dag(50, 3),
    lambda: random_dag(40, 11, max_inputs=2),
]


@pytest.mark.parametrize("make", GRAPHS, ids=range(len(GRAPHS)))
def test_twenty_budgets_fit_exactly_and_monotone(make):
    g = make()
    planner = RematPlanner(g)
    top, floor = planner.unbudgeted_peak, planner.floor().bytes
    assert sim_peak(g.ops, g.tensors, planner.base_order) == top
    assert floor <= top
    budgets = [floor + (top - floor) * k // 19 for k in range(20)]
    costs = []
    for b in budgets:
        plan = planner.plan(b)
        check_plan(g, plan, b, planner.base_order)
        costs.append(plan.cost)
    assert all(costs[k + 1] <= costs[k] for k in range(19)), costs
    assert costs[-1] == 0  # the unbudgeted peak needs no recomputation


@pytest.mark.parametrize("make", GRAPHS, ids=range(len(GRAPHS)))
def test_predicted_peak_of_every_candidate_matches_the_built_state(make):
    # The planner weighs candidates by an incremental peak; here every candidate
    # of the first states on the path is built and simulated from scratch.
    from roam_tvm.remat.delta import Frame, move_peak, plan_move
    from roam_tvm.remat.moves import Context, split
    from roam_tvm.remat.state import interval_arrays

    planner = RematPlanner(make())
    planner.floor()
    checked = 0
    for st, lv in list(zip(planner.states, planner.lives))[:6]:
        ctx = Context(st, lv)
        arr = interval_arrays(st)
        fr = Frame(ctx, arr["first"], arr["last"], arr["size"], arr["alloc"], arr["ws"], lv.profile)
        for r, s in planner._candidates(ctx):
            for chain in (0, 1, 2):  # plain, chained, lean-chained
                mv = plan_move(ctx, r, s, chain)
                nst = split(ctx, r, s, planner.costs, chain)
                assert (mv is None) == (nst is None)
                if mv is None:
                    continue
                assert len(nst.ops) == len(st.ops) + len(mv.src)
                ref = sim_peak(nst.ops, nst.tensors, nst.order)
                assert move_peak(fr, mv, arr["base"])[0] == ref, (r, s, chain)
                checked += 1
    assert checked


def test_recomputation_lowers_the_peak_on_training_graphs():
    for seed in range(4):
        g = random_training_graph(60, seed, updates=seed % 2 == 0)
        planner = RematPlanner(g)
        assert planner.floor().bytes < planner.unbudgeted_peak, seed


def test_fresh_planners_agree_with_a_shared_one():
    g = random_training_graph(60, 3)
    shared = RematPlanner(g)
    floor, top = shared.floor().bytes, shared.unbudgeted_peak
    for b in (floor, (floor + top) // 2, top - 1):
        a = shared.plan(b)
        fresh = plan_remat(g, b)
        assert (a.cost, a.peak, a.order) == (fresh.cost, fresh.peak, fresh.order)


def test_fraction_budget_is_a_share_of_the_unbudgeted_peak():
    g = random_training_graph(60, 2, updates=False)
    planner = RematPlanner(g)
    top = planner.unbudgeted_peak
    assert planner.plan("1").cost == 0
    frac = max(planner.floor().bytes / top, 0.5) + 0.01
    plan = planner.plan(f"{frac:.4f}")
    assert plan.peak <= int(float(f"{frac:.4f}") * top)


def _chain(n=6, act=4096, param=1024):
    """x -> f1 .. fn (each with a weight) -> loss; backward reads every activation; Adam updates."""
    b = GraphBuilder("chain")
    x = b.tensor(act, "input", "x")
    ws = [b.tensor(param, "param", f"w{i}") for i in range(n)]
    ms = [b.tensor(2 * param, "state", f"mv{i}") for i in range(n)]
    acts = [x]
    for i in range(n):
        acts += b.op([acts[-1], ws[i]], [act], name=f"fwd{i}")
    (loss,) = b.op([acts[-1]], [8], name="loss")
    b.tensors[loss].is_output = True
    (grad,) = b.op([loss, acts[-1]], [act], name="loss_grad")
    for i in reversed(range(n)):
        grad, gw = b.op([grad, acts[i], ws[i]], [act, param], name=f"bwd{i}")
        b.op([ws[i], gw, ms[i]], [], name=f"adam{i}", kind="update", inplace=[ws[i], ms[i]],
             workspace=param)
    return b.build()


def test_floor_error_names_the_floor_and_its_parts():
    g = _chain()
    planner = RematPlanner(g)
    fl = planner.floor()
    assert fl.parts["param"] == 6 * 1024 and fl.parts["state"] == 12 * 1024 and fl.parts["input"] == 4096
    assert fl.lower_bound <= fl.bytes < planner.unbudgeted_peak
    planner.plan(fl.bytes)
    with pytest.raises(BudgetError) as e:
        planner.plan(fl.bytes - 1)
    msg = str(e.value)
    assert str(fl.bytes) in msg and "parameters" in msg and "optimizer state" in msg and "inputs" in msg
    with pytest.raises(BudgetError, match="no plan can avoid"):
        RematPlanner(g).plan(fl.lower_bound - 1)


def test_chain_keeps_some_activations_and_recomputes_others():
    g = _chain(n=8)
    planner = RematPlanner(g)
    top, fl = planner.unbudgeted_peak, planner.floor().bytes
    plan = planner.plan((top + fl) // 2)
    assert 0 < len(plan.source) and plan.peak <= (top + fl) // 2
    assert all(g.ops[o].name.startswith("fwd") for o in plan.source.values())
    check_plan(g, plan, (top + fl) // 2, planner.base_order)


def test_roofline_cost_needs_flops():
    g = _chain(n=3)
    with pytest.raises(ValueError, match="FLOPs"):
        RematPlanner(g, cost_model="roofline")
    g.meta["flops"] = [1e9 if op.name.startswith("fwd") else 1e6 for op in g.ops]
    planner = RematPlanner(g, cost_model="roofline")
    plan = planner.plan(planner.floor().bytes)
    assert plan.cost > 0 and 0 < plan.overhead < 1


def test_no_copy_reads_a_weight_after_its_in_place_update():
    # a = f(x, w) is read early and late; w is updated in place in between, so
    # recomputing a late would read the new w. The only way down is to refuse that move.
    b = GraphBuilder("inplace")
    x = b.tensor(64, "input", "x")
    w = b.tensor(64, "param", "w")
    (a,) = b.op([x, w], [4096], name="f")
    (gw,) = b.op([a], [64], name="grad_w")
    b.op([w, gw], [], name="update", kind="update", inplace=[w])
    (big,) = b.op([x], [8192], name="big")
    (y,) = b.op([big], [64], name="shrink")
    (out,) = b.op([a, y], [64], name="late")
    b.tensors[out].is_output = True
    g = b.build()
    planner = RematPlanner(g, order=list(range(len(g.ops))))
    fl = planner.floor()
    assert fl.bytes == planner.unbudgeted_peak  # nothing may be recomputed
    with pytest.raises(BudgetError):
        planner.plan(fl.bytes - 1)
    # Without the update, recomputing f late is allowed and lowers the peak.
    b.ops[2].inplace = []
    b.ops[2].inputs = [gw]
    b.tensors[w].kind = "param"
    g2 = GraphBuilder("plain")
    g2.tensors, g2.ops = b.tensors[:], b.ops[:]
    free = RematPlanner(g2.build(), order=list(range(len(g.ops))))
    plan = free.plan(free.floor().bytes)
    assert plan.peak < planner.unbudgeted_peak and plan.source


@pytest.mark.parametrize("n", [4, 8, 16])
def test_chain_floor_reaches_full_recomputation(n):
    # Recomputing whole segments from the input (chained copies) leaves, at the
    # worst op, only what that op touches plus the returned 8-byte loss.
    g = _chain(n)
    planner = RematPlanner(g)
    fl = planner.floor()
    assert fl.bytes <= fl.lower_bound + 8
    plan = planner.plan(fl.bytes)
    check_plan(g, plan, fl.bytes, planner.base_order)


def test_measured_peak_fits_and_stays_monotone():
    # A measure above perfect packing (as an arena with alignment is) that is not
    # monotone along the path: plans must fit it and still never cost more at a larger budget.
    g = random_training_graph(60, 4)
    planner = RematPlanner(g)
    unit = 1 << 16

    def measure(plan):
        return plan.peak + (len(plan.source) % 3) * unit

    top, floor = planner.unbudgeted_peak, planner.floor().bytes
    budgets = [floor + 2 * unit + (top - floor) * k // 19 for k in range(20)]
    costs = []
    for b in budgets:
        try:
            plan = planner.plan(b, measure)
        except BudgetError as e:
            assert "measured" in str(e)
            costs.append(float("inf"))
            continue
        assert measure(plan) <= b and plan.report["measured_peak"] == measure(plan)
        check_plan(g, plan, b, planner.base_order)
        costs.append(plan.cost)
    assert costs[-1] < float("inf")
    assert all(costs[k + 1] <= costs[k] for k in range(19)), costs


def test_time_limit_truncates_the_path_but_keeps_plans_valid_and_monotone():
    g = _chain(16)
    full = RematPlanner(g).floor().bytes
    planner = RematPlanner(g, time_limit=1e-9)
    fl = planner.floor()
    assert fl.truncated and fl.bytes > full
    with pytest.raises(BudgetError, match="time limit"):
        planner.plan(fl.bytes - 1)
    top = planner.unbudgeted_peak
    costs = []
    for k in range(5):
        b = fl.bytes + (top - fl.bytes) * k // 4
        plan = planner.plan(b)
        check_plan(g, plan, b, planner.base_order)
        costs.append(plan.cost)
    assert all(costs[k + 1] <= costs[k] for k in range(4))
    with pytest.raises(ValueError, match="time_limit"):
        RematPlanner(g, time_limit=0)


def test_fewer_candidates_still_fit():
    g = random_training_graph(60, 6)
    planner = RematPlanner(g, max_candidates=1)
    fl, top = planner.floor().bytes, planner.unbudgeted_peak
    for b in (fl, (fl + top) // 2):
        check_plan(g, planner.plan(b), b, planner.base_order)


def test_the_core_does_not_import_tvm():
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys; from roam_tvm.remat import RematPlanner, plan_remat; import roam_tvm.remat.planner; "
            "print('tvm' in sys.modules, 'torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=root), cwd=root)
    assert p.stdout.split() == ["False", "False"], p.stdout + p.stderr


@pytest.mark.parametrize("make", GRAPHS[:4], ids=range(4))
def test_lp_bound_is_below_every_plan_and_zero_at_the_top(make):
    from roam_tvm.remat.lp_bound import RelaxedBound

    g = make()
    planner = RematPlanner(g)
    bound = RelaxedBound(g, planner.base_order, planner.costs)
    top, floor = planner.unbudgeted_peak, planner.floor().bytes
    assert bound.overhead(top) == 0.0
    lows = []
    for b in [floor + (top - floor) * k // 5 for k in range(5)]:
        plan = planner.plan(b)
        low = bound.overhead(b)
        assert low is not None and low <= plan.overhead + 1e-9, (b, low, plan.overhead)
        lows.append(low)
    assert lows[0] > 0  # the floor is below the unbudgeted peak: something must be recomputed
    assert all(lows[k + 1] <= lows[k] + 1e-12 for k in range(4))  # a larger budget never needs more
