"""RoamRemat through a three-output split kernel (GPT-2's q/k/v) on Relax.

Each layer makes ``qkv = h @ w``, splits it with one ``call_tir`` returning
three tensors, and the backward pass reads activations of all three. At the
floor the planner recomputes through the split; the rewritten function must
fit the budget (re-extracted, ``Graph.peak``), pass the independent check
(``roam_tvm.remat.check``) and compute the same bits on llvm, and the check
must reject a rewrite that reads the wrong output of the recomputed split.
"""
import numpy as np
import pytest
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from roam_tvm.passes import extract_graph
from roam_tvm.remat.portfolio import RematPortfolio
from roam_tvm.remat.check import check_recompute
from roam_tvm.remat.relax_remat import RoamRemat, op_flops
from test_remat_relax import _build, _lowered, _run


@I.ir_module
class SplitLayers:
    @R.function
    def main(x: R.Tensor((256, 64), "float32"), w1: R.Tensor((64, 192), "float32"),
             w2: R.Tensor((64, 192), "float32"), w3: R.Tensor((64, 192), "float32")):
        with R.dataflow():
            s1 = R.split(R.matmul(x, w1), 3, axis=1)
            q1, k1, v1 = R.tanh(s1[0]), R.sigmoid(s1[1]), R.tanh(s1[2])
            h1 = R.add(R.multiply(q1, k1), v1)
            s2 = R.split(R.matmul(h1, w2), 3, axis=1)
            q2, k2, v2 = R.tanh(s2[0]), R.sigmoid(s2[1]), R.tanh(s2[2])
            h2 = R.add(R.multiply(q2, k2), v2)
            s3 = R.split(R.matmul(h2, w3), 3, axis=1)
            q3, k3, v3 = R.tanh(s3[0]), R.sigmoid(s3[1]), R.tanh(s3[2])
            h3 = R.add(R.multiply(q3, k3), v3)
            loss = R.sum(h3)
            g3 = R.add(R.multiply(q3, k3), v3)
            gw3 = R.matmul(R.permute_dims(h2), g3)
            g2 = R.add(R.multiply(R.multiply(g3, q2), k2), v2)
            gw2 = R.matmul(R.permute_dims(h1), g2)
            g1 = R.add(R.multiply(R.multiply(g2, q1), k1), v1)
            gw1 = R.matmul(R.permute_dims(x), g1)
            out = (loss, gw1, gw2, gw3)
            R.output(out)
        return out


def _remat_at_floor():
    mod = _lowered(SplitLayers)
    g = extract_graph(mod["main"], mod, "main").graph
    splits = [op for op in g.ops if op.kind == "compute" and len(op.outputs) == 3]
    assert len(splits) == 3  # one call_tir with three outputs per layer
    floor = RematPortfolio(g, list(range(len(g.ops))), "roofline", op_flops(mod, g)).floor().bytes
    rr = RoamRemat(floor, functions=["main"], inplace=False)
    return mod, g, rr(mod), rr.plans["main"], floor


def test_split_is_recomputed_checked_and_bit_identical():
    mod, g, new, plan, floor = _remat_at_floor()
    assert any(len(g.ops[o].outputs) == 3 for o in plan.source.values()), "the split is not recomputed"
    assert extract_graph(new["main"], new, "main").graph.peak() <= floor
    assert check_recompute(mod["main"], new["main"], new) == []
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((256, 64)).astype("float32") * 0.1] + \
        [rng.standard_normal((64, 192)).astype("float32") * 0.1 for _ in range(3)]
    want = _run(_build(mod), "main", args)
    got = _run(_build(new), "main", args)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_check_rejects_the_wrong_output_of_a_recomputed_split():
    mod, _, new, _, _ = _remat_at_floor()
    func = new["main"]
    copies = {b.var for blk in func.body.blocks for b in blk.bindings
              if b.var.name.endswith("_re") and isinstance(b.var.ty, relax.TupleType)}
    assert copies, "no recomputed split in the rewrite"
    tampered = []

    @relax.expr_functor.mutator
    class Swap(relax.expr_functor.PyExprMutator):
        def visit_tuple_getitem_(self, op):  # noqa: N802
            if op.tuple_value in copies and not tampered:
                tampered.append(op)
                return relax.TupleGetItem(op.tuple_value, (int(op.index) + 1) % 3)
            return op

    bad = Swap().visit_expr(func)
    assert tampered
    assert check_recompute(mod["main"], func, new) == []
    problems = check_recompute(mod["main"], bad, new)
    assert any("never computes" in p for p in problems), problems


@pytest.mark.slow
def test_small_gpt2_step_recomputes_its_qkv_split_bit_identically():
    # The zoo's small GPT-2 at its floor: the q/k/v split kernel is run again, the rewrite
    # passes the independent check and fits, and a training step computes the same bits.
    import copy

    from roam_tvm.cli import optimizer_from_config
    from roam_tvm.frontend import from_torch
    from roam_tvm.remat.relax_inplace import inplace_candidates
    from roam_tvm.zoo import get_model
    from test_remat_relax import _check_fits

    spec = get_model("gpt2-small", small=True)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer))
    mod = _lowered(ts.mod)
    name = ts.func_name
    rg = extract_graph(mod[name], mod, name)
    g = rg.graph
    pf = RematPortfolio(g, list(range(len(g.ops))), "roofline", op_flops(mod, g), inplace=inplace_candidates(mod, rg))
    floor = pf.floor().bytes
    rr = RoamRemat(floor, functions=[name])
    new = rr(mod)
    plan = rr.plans[name]
    assert any(len(g.ops[o].outputs) == 3 for o in plan.source.values()), "the q/k/v split is not recomputed"
    assert check_recompute(mod[name], new[name], new) == []
    _check_fits(mod, new, name, floor)
    inputs = [t.numpy() for t in spec.example_inputs]
    targets = [t.numpy() for t in spec.targets]
    results = []
    for m in (mod, new):
        state = copy.deepcopy(ts.initial_values())
        results.append((ts.run(_build(m), inputs, targets, state), state))
    (la, sa), (lb, sb) = results
    assert la == lb
    for key in sa:
        np.testing.assert_array_equal(np.asarray(sa[key]), np.asarray(sb[key]), err_msg=key)
