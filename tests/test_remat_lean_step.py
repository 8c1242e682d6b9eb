"""A conv/batch-norm/ReLU training step with lean chains: same loss and parameters, bit for bit (llvm).

The plan recomputes batch-norm outputs while holding their variance (a lean
chain); the independent checker accepts the rewrite and the budgeted step
computes what the unbudgeted one does.
"""
import copy

import numpy as np
import torch

from roam_tvm.frontend import SGD, from_torch
from roam_tvm.passes import RoamOrder, extract_graph
from roam_tvm.remat import RematPlanner
from roam_tvm.remat.check import check_recompute
from roam_tvm.remat.relax_remat import RoamRemat, op_flops
from test_remat_relax import LLVM, _build, _lowered


def _model():
    torch.manual_seed(0)
    layers = []
    for cin, cout in ((3, 8), (8, 8), (8, 8)):
        layers += [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 4))


def _held_variance(g, plan) -> bool:
    """Batch-norm outputs are recomputed, reading the original variance (its op is not copied)."""
    copied = {g.ops[o].name for o in plan.source.values()}
    return any(n.startswith("fused_expand_dims_subtract") for n in copied) and \
        not any(n.startswith("variance") for n in copied)


def test_conv_bn_relu_step_with_lean_chains_is_bit_identical():
    model = _model()
    x, y = torch.randn(16, 3, 8, 8), torch.randn(16, 4)
    ts = from_torch(model, [x], [y], loss=torch.nn.MSELoss(), optimizer=SGD(lr=0.1, momentum=0.9), quiet=True)
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
    budget = held[0]
    rr = RoamRemat(budget, functions=[f])
    new = rr.rewrite(mod)
    assert rr.plans[f].source
    assert check_recompute(mod[f], new[f], new) == []
    assert extract_graph(new[f], new, f).graph.peak() <= budget
    results = []
    for m in (mod, new):
        state = copy.deepcopy(ts.initial_values())
        losses = [ts.run(_build(m), [x.numpy()], [y.numpy()], state) for _ in range(2)]
        results.append((losses, state))
    (la, sa), (lb, sb) = results
    assert la == lb
    for key in sa:
        np.testing.assert_array_equal(np.asarray(sa[key]), np.asarray(sb[key]), err_msg=key)
