"""A budgeted training step with in-place calls: same loss and updated parameters, bit for bit (llvm)."""
import torch

from roam_tvm.frontend import SGD, from_torch
from roam_tvm.passes import extract_graph
from roam_tvm.remat import RematPlanner
from roam_tvm.remat.check import check_recompute
from roam_tvm.remat.relax_inplace import inplace_candidates
from roam_tvm.remat.relax_remat import RoamRemat
from test_remat_relax import _lowered, assert_same_step


def test_tiny_training_step_with_inplace_and_recomputation_is_bit_identical():
    torch.manual_seed(0)
    # widths where recomputation still lowers the peak once the activations are written in place
    model = torch.nn.Sequential(torch.nn.Linear(16, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 128), torch.nn.Sigmoid(), torch.nn.Linear(128, 4))
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    ts = from_torch(model, [x], [y], loss=torch.nn.MSELoss(), optimizer=SGD(lr=0.1, momentum=0.9), quiet=True)
    f = ts.func_name
    mod = _lowered(ts.mod)
    rg = extract_graph(mod[f], mod, f)
    g = rg.graph
    # the floor of the readers-first path (the one without in-place writes is met by them alone)
    floor = RematPlanner(g, list(range(len(g.ops))), inplace=inplace_candidates(mod, rg),
                         readers_first=True).floor().bytes
    rr = RoamRemat(floor, functions=[f])
    new = rr.rewrite(mod)
    assert rr.plans[f].source and rr.plans[f].inplace
    n_inplace = sum(1 for blk in new[f].body.blocks for b in blk.bindings
                    if getattr(b.value, "op", None) is not None and getattr(b.value.op, "name", "")
                    == "relax.call_tir_inplace") - sum(
        1 for blk in mod[f].body.blocks for b in blk.bindings
        if getattr(getattr(b.value, "op", None), "name", "") == "relax.call_tir_inplace")
    assert n_inplace > 0  # activations written in place, beside the optimizer's own in-place updates
    assert check_recompute(mod[f], new[f], new) == []
    assert extract_graph(new[f], new, f).graph.peak() <= floor
    assert_same_step(ts, mod, new, [x], [y])
