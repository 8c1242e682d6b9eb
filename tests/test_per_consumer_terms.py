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


def test_instance_norm_backward_plans_smaller_with_the_split(monkeypatch):
    torch = pytest.importorskip("torch")
    import roam_tvm.frontend.autodiff as autodiff
    from roam_tvm.frontend import SGD, from_torch
    from roam_tvm.passes import extract_graph
    from roam_tvm.report.simulate import schedule_for

    def peak(split: bool) -> int:
        if not split:
            monkeypatch.setattr(autodiff, "per_consumer_terms", lambda f: f)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.InstanceNorm2d(8, affine=True),
                                    torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 3))
        ts = from_torch(model, (torch.randn(2, 3, 16, 16),), (torch.tensor([0, 2]),), optimizer=SGD(lr=0.1),
                        quiet=True)
        mod = schedule_for(ts.mod, "llvm")
        return extract_graph(mod[ts.func_name], mod, ts.func_name).graph.peak()

    with_split = peak(True)
    assert with_split < peak(False)
