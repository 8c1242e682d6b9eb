"""ResNet-18 (small) training steps with lean chains and hoisted copies: same loss and parameters, bit for bit (llvm).

The plans recompute batch-norm outputs while holding their variance (a lean
chain), and move a conv output's copy up to feed a ReLU recomputed from it
(hoisting); the independent checker accepts each rewrite and the budgeted
step computes what the unbudgeted one does.
"""
import copy

import numpy as np
import pytest

from roam_tvm.frontend import SGD, from_torch
from roam_tvm.passes import RoamOrder, extract_graph
from roam_tvm.remat import RematPlanner
from roam_tvm.remat.check import check_recompute
from roam_tvm.remat.relax_remat import RoamRemat, op_flops
from test_remat_relax import LLVM, _build, _lowered


def _held_variance(g, plan) -> bool:
    """Batch-norm outputs are recomputed, reading the original variance (its op is not copied)."""
    copied = {g.ops[o].name for o in plan.source.values()}
    return any(n.startswith("fused_expand_dims_subtract") for n in copied) and \
        not any(n.startswith("variance") for n in copied)


@pytest.mark.slow  # minutes: three llvm builds of ResNet-18's step
def test_resnet18_step_with_lean_chains_and_hoisted_copies_is_bit_identical():
    from roam_tvm.zoo import get_model

    spec = get_model("resnet18", small=True)  # conv/BN/ReLU blocks with residual adds
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=SGD(lr=0.1, momentum=0.9), quiet=True)
    xs = [t.numpy() for t in spec.example_inputs]
    ys = [t.numpy() for t in spec.targets]
    f = ts.func_name
    with LLVM:  # roam's order: the running-statistics updates follow their batch norm
        mod = RoamOrder(functions=[f], time_limit=1.0)(_lowered(ts.mod))
    g = extract_graph(mod[f], mod, f).graph
    flops = op_flops(mod, g)
    planner = RematPlanner(g, list(range(len(g.ops))), "roofline", flops)
    top, fl = planner.unbudgeted_peak, planner.floor().bytes
    budgets = [fl + (top - fl) * k // 19 for k in range(20)]
    held = [b for b in budgets if _held_variance(g, planner.plan(b))]
    assert held  # some budget recomputes a batch-norm output with its variance held
    hoisted = [b for b in budgets if planner.plan(b).report["hoists"]]
    assert hoisted  # and some moves an earlier conv copy up for a ReLU recomputed from it
    reference = _run(ts, _build(mod), xs, ys)
    for budget in sorted({held[0], hoisted[-1]}):
        rr = RoamRemat(budget, functions=[f], paths=((True, True),))  # the path the budgets were picked on
        new = rr.rewrite(mod)
        assert rr.plans[f].source
        assert check_recompute(mod[f], new[f], new) == []
        assert extract_graph(new[f], new, f).graph.peak() <= budget
        (la, sa), (lb, sb) = reference, _run(ts, _build(new), xs, ys)
        assert la == lb
        for key in sa:
            np.testing.assert_array_equal(np.asarray(sa[key]), np.asarray(sb[key]), err_msg=key)


def _run(ts, exe, xs, ys):
    """Losses of two steps and the state after them."""
    state = copy.deepcopy(ts.initial_values())
    return [ts.run(exe, xs, ys, state) for _ in range(2)], state
