"""Recomputing kernels with several outputs (a q/k/v split) and views, on plain graphs (no TVM).

The graphs look like a transformer's attention: a matmul makes ``qkv``, one
kernel splits it into three outputs, each is viewed and transposed, and the
backward pass reads the transposed tensors. Before multi-output copies and
views were recomputable, the transposed q/k/v could only be traded for the
split's outputs of the same size; here the planner must go lower. The checks
are the simulator and value checks of ``test_remat`` (no planner code).
"""
from __future__ import annotations

import random

import pytest

from roam_tvm.graph.model import Graph, GraphBuilder, Op
from roam_tvm.remat import RematPlanner
from test_remat import check_plan, sim_peak


def _view(b: GraphBuilder, src: int) -> int:
    t = b.tensor(0, alias_of=src, name=f"{b.tensors[src].name}_v")
    b.ops.append(Op(len(b.ops), "view", [src], [t], 0, "view", []))
    return t


def attention_graph(layers: int, seed: int, unit: int = 1024) -> tuple[Graph, dict]:
    """A forward of ``layers`` attention blocks with a 3-output split, and its backward;
    returns the graph and in-place pairs (input gradient -> output gradient of the adds)."""
    rng = random.Random(seed)
    b = GraphBuilder(f"attn{layers}_{seed}")
    d = rng.randint(2, 4) * unit
    x, = b.op([b.tensor(d, "input", "tokens")], [d], "embed")
    saved, pairs = [], {}
    for i in range(layers):
        w = b.tensor(3 * d // 4, "param", f"w{i}")
        h, = b.op([x], [d], f"ln{i}")
        qkv, = b.op([h, w], [3 * d], f"mm{i}")
        q, k, v = b.op([qkv], [d, d, d], f"split{i}")
        views = [_view(b, t) for t in (q, k, v)]
        if rng.random() < 0.5:  # a view of a view (tuple item, then reshape)
            views[1] = _view(b, views[1])
        qt, kt, vt = (b.op([t], [d], f"tr{i}{n}")[0] for t, n in zip(views, "qkv"))
        a, = b.op([qt, kt, vt], [d], f"att{i}", workspace=rng.randint(0, 2) * unit)
        x, = b.op([x, a], [d], f"add{i}")
        saved.append((h, qt, kt, vt, x))
    gr, = b.op([x], [d], "loss_grad")
    for i in reversed(range(layers)):
        h, qt, kt, vt, _ = saved[i]
        ga, = b.op([gr, qt, kt, vt], [d], f"att_bwd{i}")
        gw = b.tensor(3 * d // 4, name=f"gw{i}", is_output=True)
        b.ops.append(Op(len(b.ops), f"wgrad{i}", [ga, h], [gw]))
        o = len(b.ops)
        gr, = b.op([gr, ga], [d], f"gadd{i}")
        pairs[o] = [(b.ops[o].inputs[1], gr)]
    b.tensors[gr].is_output = True
    return b.build(), pairs


CASES = [(layers, seed, inplace) for layers, seed in ((2, 0), (3, 1), (4, 2), (5, 3)) for inplace in (False, True)]


def _planner(layers, seed, inplace):
    g, pairs = attention_graph(layers, seed)
    return g, RematPlanner(g, list(range(len(g.ops))), inplace=pairs if inplace else None)


@pytest.mark.parametrize("layers,seed,inplace", CASES)
def test_budgets_fit_exactly_and_monotone_with_split_copies(layers, seed, inplace):
    g, planner = _planner(layers, seed, inplace)
    top, floor = planner.unbudgeted_peak, planner.floor().bytes
    costs = []
    for k in range(8):
        budget = floor + (top - floor) * k // 7
        plan = planner.plan(budget)
        if not inplace:  # the independent simulator has no in-place model
            check_plan(g, plan, budget, planner.base_order)
        costs.append(plan.cost)
    assert all(costs[k + 1] <= costs[k] for k in range(7)), costs
    copied = {g.ops[o].name.rstrip("0123456789") for o in planner.plan(floor).source.values()}
    assert "split" in copied, copied  # the floor recomputes through the 3-output kernel


@pytest.mark.parametrize("layers,seed,inplace", CASES)
def test_predicted_peak_of_every_split_candidate_matches_the_built_state(layers, seed, inplace):
    from roam_tvm.remat.delta import Frame, move_peak, plan_move
    from roam_tvm.remat.moves import Context, split
    from roam_tvm.remat.state import interval_arrays, liveness

    g, planner = _planner(layers, seed, inplace)
    planner.floor()
    checked = 0
    for st, lv in list(zip(planner.states, planner.lives))[:8]:
        ctx = Context(st, lv)
        arr = interval_arrays(st)
        fr = Frame(ctx, arr["first"], arr["last"], arr["size"], arr["alloc"], arr["ws"], lv.profile, arr["pos"])
        for r, s in planner._candidates(ctx):
            for chain in (0, 1, 2):
                mv = plan_move(ctx, r, s, chain)
                nst = split(ctx, r, s, planner.costs, chain)
                assert (mv is None) == (nst is None)
                if mv is None:
                    continue
                assert len(nst.ops) == len(st.ops) + len(mv.src)
                ref = liveness(nst).peak if inplace else sim_peak(nst.ops, nst.tensors, nst.order)
                assert move_peak(fr, mv, arr["base"])[0] == ref, (r, s, chain)
                checked += 1
    assert checked


def test_split_floor_is_below_what_single_output_copies_reach():
    # Without multi-output copies the transposed q/k/v can only be traded for the split's
    # outputs; with them, the floor keeps only the layer inputs and the norms' outputs.
    g, planner = _planner(5, 3, False)
    floor = planner.floor().bytes
    d = g.tensors[g.ops[0].outputs[0]].size
    # per layer the floor would hold h, qt, kt, vt (and x) without recomputing the split
    assert floor < planner.unbudgeted_peak - 5 * 2 * d


@pytest.mark.parametrize("layers,seed", [(3, 1), (4, 2), (5, 3), (6, 4)])
def test_one_split_copy_serves_q_k_and_v(layers, seed):
    # The copy of the split made for q leaves k and v unread; the moves for k and v read them
    # (held from that copy on, after the peak step they relieve, or over copies only) instead
    # of running the split and its matmul again.
    g, planner = _planner(layers, seed, False)
    floor = planner.floor().bytes
    names = [g.ops[o].name for o in planner.plan(floor).source.values()]
    splits = sum(n.startswith("split") for n in names)
    assert splits and sum(n.startswith("tr") for n in names) == 3 * splits
    assert sum(n.startswith("mm") for n in names) == splits
