"""per_consumer_terms: a cheap broadcast term read by several fusing ops is bound once per
reader (roam_tvm/frontend/per_consumer_terms.py), so each copy fuses into its reader and the
norms' backward stores no full-size intermediate between its reductions."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend.per_consumer_terms import merge_identical_bindings, per_consumer_terms


@R.function
def norm_like(dy: R.Tensor((2, 4, 8), "float32"), x: R.Tensor((2, 4, 8), "float32"),
              gamma: R.Tensor((4, 1), "float32"), w: R.Tensor((8, 8), "float32")):
    with R.dataflow():
        g = R.multiply(dy, gamma)               # read by a sum, a subtract and a multiply
        s1 = R.sum(g, axis=[2], keepdims=True)
        t = R.subtract(g, s1)
        u = R.multiply(g, x)
        s2 = R.sum(u, axis=[2], keepdims=True)
        h = R.multiply(x, gamma)                # read by a matmul too: stays one tensor
        m = R.matmul(h, w)
        k = R.add(h, t)
        out = R.add(R.add(k, m), s2)
        R.output(out)
    return out


def test_term_read_by_fusing_ops_is_bound_once_per_reader():
    after = per_consumer_terms(norm_like)
    text = after.script()
    assert text.count("R.multiply(dy, gamma)") == 3
    assert text.count("R.multiply(x, gamma)") == 1
    relax.analysis.well_formed(tvm.IRModule({"norm_like": after}))  # raises if not


def test_merge_then_split_is_exact_on_llvm():
    after = per_consumer_terms(merge_identical_bindings(norm_like))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in ((2, 4, 8), (2, 4, 8), (4, 1), (8, 8))]
    outs = []
    for func in (norm_like, after):
        exe = tvm.compile(tvm.IRModule({"norm_like": func}), target="llvm")
        vm = relax.VirtualMachine(exe, tvm.cpu())
        outs.append(vm["norm_like"](*[tvm.runtime.tensor(a) for a in args]).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


class _ThreeNorms:
    """InstanceNorm, GroupNorm and LayerNorm over [C, H, W] after convolutions, as CNNs use them."""

    @staticmethod
    def build(torch):
        nn = torch.nn

        class Net(nn.Module):
            def __init__(self, c=16):
                super().__init__()
                self.c1, self.n1 = nn.Conv2d(3, c, 3, padding=1), nn.InstanceNorm2d(c, affine=True)
                self.c2, self.n2 = nn.Conv2d(c, c, 3, 2, 1), nn.GroupNorm(4, c)
                self.c3, self.n3 = nn.Conv2d(c, c, 3, 2, 1), nn.LayerNorm([c, 8, 8])
                self.fc = nn.Linear(4 * c, 10)

            def forward(self, x):
                x = torch.relu(self.n1(self.c1(x)))
                x = torch.relu(self.n2(self.c2(x)))
                x = torch.relu(self.n3(self.c3(x)))
                return self.fc(torch.nn.functional.adaptive_avg_pool2d(x, 2).flatten(1))
        return Net()


def test_norm_backwards_need_less_in_any_order_with_the_split(monkeypatch):
    # With the terms stored, two of the instance norm's backward kernels each want the other
    # to run first (the pair bound is 18% above cut); bound once per reader, neither is stored.
    torch = pytest.importorskip("torch")
    import roam_tvm.frontend.autodiff as autodiff
    from roam_tvm.frontend import Adam, from_torch
    from roam_tvm.graph.bounds import cut_profile
    from roam_tvm.graph.pair_bound import pair_cut_bound
    from roam_tvm.passes import extract_graph
    from roam_tvm.report.simulate import schedule_for

    def least_peak(split: bool) -> int:
        if not split:
            monkeypatch.setattr(autodiff, "per_consumer_terms", lambda f, after=None: f)
        torch.manual_seed(0)
        ts = from_torch(_ThreeNorms.build(torch), (torch.randn(2, 3, 32, 32),), (torch.tensor([0, 2]),),
                        optimizer=Adam(), quiet=True)
        mod = schedule_for(ts.mod, "llvm")
        g = extract_graph(mod[ts.func_name], mod, ts.func_name).graph
        return pair_cut_bound(g, cut_profile(g))

    with_split = least_peak(True)
    assert with_split < 0.9 * least_peak(False)


def test_terms_bound_before_the_loss_are_left_alone():
    # the forward's `x * gamma` stays one binding: splitting it would compute it once per reader
    loss_like = next(b.var for b in norm_like.body.blocks[0].bindings if b.var.name == "s1")
    after = per_consumer_terms(norm_like, after=loss_like)
    assert after.script().count("R.multiply(dy, gamma)") == 1
