"""RoamRemat on Relax: recomputed steps fit the budget and compute the same bits on llvm.

A hand-written forward/backward chain (fast, default suite) and the zoo's small
``mlp`` and ``cnn`` training steps (slow: torch import and two llvm builds each).
The budget check re-extracts the rewritten function and uses ``Graph.peak``,
not the planner's own count.
"""
import copy

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from roam_tvm.passes import extract_graph
from roam_tvm.remat import BudgetError, RematPlanner
from roam_tvm.remat.portfolio import RematPortfolio
from roam_tvm.remat.relax_inplace import inplace_candidates
from roam_tvm.remat.relax_remat import RoamRemat
from roam_tvm.runtime.pipeline import (dataflow_lower_passes, finalize_passes, legalize_passes,
                                       library_dispatch_passes)

LLVM = tvm.target.Target("llvm")


@I.ir_module
class Chain:
    @R.function
    def main(x: R.Tensor((256, 64), "float32"), w1: R.Tensor((64, 64), "float32"),
             w2: R.Tensor((64, 64), "float32"), w3: R.Tensor((64, 64), "float32")):
        with R.dataflow():
            a1 = R.tanh(R.matmul(x, w1))
            a2 = R.tanh(R.matmul(a1, w2))
            a3 = R.tanh(R.matmul(a2, w3))
            loss = R.sum(a3)
            g3 = R.subtract(R.const(1.0, "float32"), R.multiply(a3, a3))
            gw3 = R.matmul(R.permute_dims(a2), g3)
            d2 = R.matmul(g3, R.permute_dims(w3))
            g2 = R.multiply(d2, R.subtract(R.const(1.0, "float32"), R.multiply(a2, a2)))
            gw2 = R.matmul(R.permute_dims(a1), g2)
            d1 = R.matmul(g2, R.permute_dims(w2))
            g1 = R.multiply(d1, R.subtract(R.const(1.0, "float32"), R.multiply(a1, a1)))
            gw1 = R.matmul(R.permute_dims(x), g1)
            out = (loss, gw1, gw2, gw3)
            R.output(out)
        return out


def _lowered(mod):
    with LLVM:
        return tvm.transform.Sequential(library_dispatch_passes(LLVM) + legalize_passes(LLVM))(mod)


def _build(mod):
    @tvm.transform.module_pass(opt_level=0, name="Rest")
    def rest(m, _ctx):
        with LLVM:
            return tvm.transform.Sequential(dataflow_lower_passes(LLVM) + finalize_passes(LLVM, layout=False))(m)

    return tvm.compile(mod, LLVM, relax_pipeline=rest)


def _run(exe, func, args):
    vm = relax.VirtualMachine(exe, tvm.cpu())
    out = vm[func](*[tvm.runtime.tensor(np.array(a, copy=True)) for a in args])
    return [o.numpy() for o in out]


def assert_same_step(ts, mod, new, inputs, targets) -> None:
    """One training step of ``ts`` built from ``mod`` and from ``new`` (llvm), from the same
    initial state: the same loss and updated parameters and optimizer state, bit for bit."""
    inputs = [t.numpy() if hasattr(t, "numpy") else t for t in inputs]
    targets = [t.numpy() if hasattr(t, "numpy") else t for t in targets]
    results = []
    for m in (mod, new):
        state = copy.deepcopy(ts.initial_values())
        loss = ts.run(_build(m), inputs, targets, state)
        results.append((loss, state))
    (la, sa), (lb, sb) = results
    assert np.array_equal(la, lb, equal_nan=True), (la, lb)
    assert sorted(sa) == sorted(sb)
    for key in sa:
        np.testing.assert_array_equal(np.asarray(sa[key]), np.asarray(sb[key]), err_msg=key)


def _check_fits(mod, new, func, budget):
    g = extract_graph(new[func], new, func).graph
    assert g.peak() <= budget
    assert g.peak() < extract_graph(mod[func], mod, func).graph.peak()


def test_chain_recomputed_fits_and_is_bit_identical():
    mod = _lowered(Chain)
    g = extract_graph(mod["main"], mod, "main").graph
    planner = RematPlanner(g, list(range(len(g.ops))))
    floor, top = planner.floor().bytes, planner.unbudgeted_peak
    assert floor < top
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") * 0.1 for s in [(256, 64)] + [(64, 64)] * 3]
    want = _run(_build(mod), "main", args)
    for budget in (floor, (floor + top) // 2):
        rr = RoamRemat(budget, functions=["main"])
        new = rr(mod)
        plan = rr.plans["main"]
        assert plan.source  # something is recomputed
        assert plan.cost_model == "roofline" and 0 < plan.overhead < 1
        assert set(plan.report["overheads"]) == {"bytes", "flops", "roofline"}
        _check_fits(mod, new, "main", budget)
        got = _run(_build(new), "main", args)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)


def test_pass_errors_before_rewriting():
    mod = _lowered(Chain)
    with pytest.raises((BudgetError, RuntimeError), match="no plan can avoid"):  # TVM's FFI may rewrap
        RoamRemat(1, functions=["main"])(mod)
    with pytest.raises(ValueError, match="no function"):
        RoamRemat("0.9")(mod)  # default function train_step is not there


@I.ir_module
class Nested:
    @R.function
    def main(x: R.Tensor((64, 64), "float32"), w: R.Tensor((64, 64), "float32")):
        @R.function
        def inner(y: R.Tensor((64, 64), "float32")) -> R.Tensor((64, 64), "float32"):
            return R.tanh(y)

        a = R.tanh(R.matmul(x, w))
        b = R.tanh(R.matmul(a, w))
        out = (R.sum(R.add(a, b)), inner)
        return out


def test_a_function_it_cannot_analyse_is_left_as_it_is_with_a_warning():
    # a nested function (the extraction cannot model it): no recomputation, a warning, the
    # function unchanged, the reason kept for the report; never a crash
    mod = _lowered(Nested)
    rr = RoamRemat(0.5, functions=["main"])
    with pytest.warns(UserWarning, match="no recomputation.*nested function"):
        new = rr.rewrite(mod)
    assert new["main"].same_as(mod["main"])
    assert "nested function" in rr.skipped["main"] and "main" not in rr.plans


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt2-small"])  # gpt2: exp written over the logits
def test_zoo_step_recomputed_is_bit_identical(name):
    from roam_tvm.cli import optimizer_from_config
    from roam_tvm.frontend import from_torch
    from roam_tvm.zoo import get_model

    spec = get_model(name, small=True)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer))
    mod = _lowered(ts.mod)
    rg = extract_graph(mod[ts.func_name], mod, ts.func_name)
    g = rg.graph
    # between the floor and the least peak in-place writes reach alone (on any path's order)
    pf = RematPortfolio(g, list(range(len(g.ops))), inplace=inplace_candidates(mod, rg))
    budget = (pf.floor().bytes + pf.initial_peak) // 2
    rr = RoamRemat(budget, functions=[ts.func_name])
    new = rr(mod)
    assert rr.plans[ts.func_name].source
    if name == "gpt2-small":  # the cross-entropy's exp(x - max) written over the logits
        assert any("exp_inplace" in gv.name_hint for gv in new.functions), sorted(
            gv.name_hint for gv in new.functions if "inplace" in gv.name_hint)
    from roam_tvm.remat.check import check_recompute

    assert check_recompute(mod[ts.func_name], new[ts.func_name], new) == []
    _check_fits(mod, new, ts.func_name, budget)
    assert_same_step(ts, mod, new, spec.example_inputs, spec.targets)


def _arena_peak(mod, func):
    from roam_tvm.passes import RoamLayout

    with LLVM:
        lowered = tvm.transform.Sequential(dataflow_lower_passes(LLVM))(mod)
        planned = RoamLayout()(lowered)
    return extract_graph(planned[func], planned, func, planned=True).graph.peak()


def test_budget_holds_for_the_laid_out_arena():
    mod = _lowered(Chain)
    top = _arena_peak(mod, "main")
    g = extract_graph(mod["main"], mod, "main").graph
    floor = RematPlanner(g, list(range(len(g.ops)))).floor().bytes
    costs = []
    for budget in np.linspace(floor + (top - floor) // 4, top, 5).astype(int):
        rr = RoamRemat(int(budget), functions=["main"], layout={})
        with LLVM:
            new = rr(mod)
        assert _arena_peak(new, "main") <= budget
        costs.append(rr.plans["main"].cost)
    assert costs[0] > 0 and costs[-1] == 0
    assert all(costs[k + 1] <= costs[k] for k in range(len(costs) - 1)), costs


def test_independent_check_accepts_the_rewrite_and_catches_a_wrong_one():
    from roam_tvm.remat.check import check_recompute, recomputed_calls

    mod = _lowered(Chain)
    g = extract_graph(mod["main"], mod, "main").graph
    floor = RematPlanner(g, list(range(len(g.ops)))).floor().bytes
    new = RoamRemat(floor, functions=["main"]).rewrite(mod)
    ref, got = mod["main"], new["main"]
    assert check_recompute(ref, got, new) == []
    assert recomputed_calls(ref, got) > 0
    # Break the rewrite: the first copy reads the wrong weight.
    block = got.body.blocks[0]
    names = [b.var.name for b in block.bindings]
    i = next(k for k, n in enumerate(names) if n.endswith("_re"))
    b = block.bindings[i]
    call = b.value
    args = list(call.args[1].fields)
    w = [p for p in got.params if p.name.startswith("w") and all(not p.same_as(a) for a in args)][0]
    args[-1] = w
    bad_call = relax.Call(call.op, [call.args[0], relax.Tuple(args)], call.attrs, call.ty_args)
    bindings = list(block.bindings)
    bindings[i] = relax.VarBinding(b.var, bad_call)
    bad = relax.Function(got.params, relax.SeqExpr([relax.DataflowBlock(bindings)], got.body.body),
                         got.ret_ty, got.is_pure, got.attrs)
    problems = check_recompute(ref, bad, new)
    assert any("never computes" in p for p in problems), problems


@pytest.mark.slow
def test_compare_with_a_budget_reports_it(tmp_path):
    import json

    from roam_tvm.cli import main

    out = tmp_path / "cmp.json"
    # 0.9: the budgeted step counts the kernels' scratch as roam's peak does (lifted into the
    # arena), so its floor is about 0.89 of that peak; above about 0.97 in-place writes alone fit
    assert main(["compare", "--model", "cnn", "--small", "--target", "llvm", "--budget", "0.9", "--no-cut",
                 "--planners", "tvm-default", "roam", "--quiet", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    roam, budgeted = r["planners"]["roam"], r["planners"]["roam-budget"]
    assert r["budget_bytes"] == int(0.9 * roam["peak_bytes"])
    assert r["floor_bytes"] <= r["budget_bytes"]
    assert budgeted["fits"] and budgeted["valid"] and budgeted["peak_bytes"] <= r["budget_bytes"]
    assert budgeted["recomputed_ops"] > 0 and 0 < budgeted["overhead_time"] < 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vgg11", "vit-tiny", "bert-base", "gpt2-small"])
def test_zoo_rewrite_at_the_floor_passes_the_independent_check(name):
    # The most recomputation the planner makes (its floor), on more model families
    # (attention, layer norm, embeddings, AdamW in place): no build, the checker only.
    from roam_tvm.cli import optimizer_from_config
    from roam_tvm.frontend import from_torch
    from roam_tvm.remat.check import check_recompute, recomputed_calls
    from roam_tvm.zoo import get_model

    spec = get_model(name, small=True)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(spec.optimizer), quiet=True)
    mod = _lowered(ts.mod)
    f = ts.func_name
    g = extract_graph(mod[f], mod, f).graph
    floor = RematPlanner(g, list(range(len(g.ops)))).floor().bytes
    new = RoamRemat(floor, functions=[f]).rewrite(mod)
    assert extract_graph(new[f], new, f).graph.peak() <= floor < g.peak()
    assert recomputed_calls(mod[f], new[f]) > 0
    assert check_recompute(mod[f], new[f], new) == []


def test_a_budget_below_the_floor_keeps_the_report(tmp_path, capsys):
    """The budget is refused (exit 2, the floor named), but the other planners' table and JSON, minutes of
    work, are still printed and written."""
    import json

    from roam_tvm.cli import main

    out = tmp_path / "cmp.json"
    assert main(["compare", "--model", "mlp", "--small", "--target", "llvm", "--budget", "1000", "--no-cut",
                 "--planners", "tvm-default", "roam", "--quiet", "--json", str(out)]) == 2
    captured = capsys.readouterr()
    assert "roam-budget" in captured.out and "refused" in captured.out
    assert "--budget" in captured.err and "floor" in captured.err
    r = json.loads(out.read_text())
    assert r["planners"]["roam"]["peak_bytes"] > 0 and "floor" in r["planners"]["roam-budget"]["error"]
