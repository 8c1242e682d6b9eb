"""RoamOrder: Before/Expected structure, plus properties of the reordered functions.

Structure: a small dataflow function whose program order interleaves two
branches (both big intermediates live together); the optimal order is unique
and written out in TVMScript. Properties: dependencies hold (well-formed), the
simulated peak never rises, results are bit-identical when built and run on
llvm, in-place updates stay after every reader of the old value, functions that
cannot be extracted are left untouched with a warning, bad options are clear
errors. Real training steps (the frontend's demo MLP, the zoo's small configs)
reach the ``cut`` bound within 1%.
"""
import warnings

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from roam_tvm.graph.bounds import cut_bound
from roam_tvm.passes import RoamOrder, extract_graph, latest_order

LLVM = tvm.target.Target("llvm")


def assert_well_formed(mod):
    # relax.analysis.well_formed returns a bool in some TVM versions, None (or raises) in 0.27
    assert relax.analysis.well_formed(mod) is not False


def graph_of(mod, name="main"):
    return extract_graph(mod[name], mod, name).graph


def run_llvm(mod, func, *args, order: bool):
    """Build with the roam pipeline (StaticPlanBlockMemory, RoamOrder on or off) and run."""
    from roam_tvm.runtime.pipeline import pipeline

    ex = tvm.compile(mod, target=LLVM, relax_pipeline=pipeline(LLVM, order=order, layout=False))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm[func](*[tvm.runtime.tensor(np.array(a, copy=True)) for a in args])
    return _numpy(out)


def _numpy(out):
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [x for o in out for x in _numpy(o)]


# ------------------------------------------------------------------ Before/Expected
@I.ir_module
class Interleaved:
    @R.function
    def main(x: R.Tensor((64, 64), "float32"), y: R.Tensor((32, 64), "float32")):
        with R.dataflow():
            a1 = R.exp(x)                   # 16 KiB
            b1 = R.exp(y)                   # 8 KiB, while a1 is live: 24 KiB
            a2 = R.sum(a1)                  # 4 B
            b2 = R.sum(b1, axis=[1])        # 128 B
            out = R.add(a2, b2)
            R.output(out)
        return out


@I.ir_module
class InterleavedExpected:
    # Branch a (the bigger one, with the smaller result) first, then branch b:
    # peak 16 KiB + 4 B. Running b first peaks at 16 KiB + 132 B; any
    # interleaving keeps a1 and b1 live together.
    @R.function
    def main(x: R.Tensor((64, 64), "float32"), y: R.Tensor((32, 64), "float32")):
        with R.dataflow():
            a1 = R.exp(x)
            a2 = R.sum(a1)
            b1 = R.exp(y)
            b2 = R.sum(b1, axis=[1])
            out = R.add(a2, b2)
            R.output(out)
        return out


def test_before_expected_interleaved_branches():
    after = RoamOrder(jobs=1)(Interleaved)
    tvm.ir.assert_structural_equal(after, InterleavedExpected)
    rec = latest_order("main")
    assert rec.status == "reordered"
    assert rec.peak_after < rec.peak_before
    # the record counts tensors at their arena-aligned sizes (RoamOrder orders for the layout)
    assert rec.peak_after == graph_of(InterleavedExpected).aligned(64).peak()


def test_optimal_order_is_unique():
    from roam_tvm.order import exact_order
    from test_bounds import all_orders

    g = graph_of(Interleaved)
    peaks = sorted((g.peak(o), o) for o in all_orders(g))
    assert peaks[0][0] < peaks[1][0]  # unique optimum
    assert exact_order(g)[1] == peaks[0][0] == graph_of(InterleavedExpected).peak()


def test_already_optimal_is_unchanged():
    after = RoamOrder(jobs=1)(InterleavedExpected)
    tvm.ir.assert_structural_equal(after, InterleavedExpected)


def test_interleaved_bit_identical_and_well_formed():
    after = RoamOrder(jobs=1)(Interleaved)
    assert_well_formed(after)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64)).astype("float32")
    y = rng.standard_normal((32, 64)).astype("float32")
    a = run_llvm(Interleaved, "main", x, y, order=False)
    b = run_llvm(Interleaved, "main", x, y, order=True)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


# --------------------------------------------------------------- in-place updates
@I.ir_module
class InplaceAfterReader:
    @T.prim_func(private=True, s_tir=True)
    def big(x: T.Buffer((256,), "float32"), out: T.Buffer((256, 64), "float32")):
        for i, j in T.grid(256, 64):
            with T.sblock("big"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = x[vi] * T.float32(2)

    @T.prim_func(private=True, s_tir=True)
    def read_w(w: T.Buffer((256,), "float32"), out: T.Buffer((256, 64), "float32")):
        for i, j in T.grid(256, 64):
            with T.sblock("read"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = w[vi] + T.float32(1)

    @T.prim_func(private=True, s_tir=True)
    def update(w: T.Buffer((256,), "float32"), g: T.Buffer((256, 64), "float32")):
        for i in range(256):
            with T.sblock("upd"):
                vi = T.axis.spatial(256, i)
                w[vi] = w[vi] - g[vi, 0] * T.float32(0.5)

    @T.prim_func(private=True, s_tir=True)
    def reduce(r: T.Buffer((256, 64), "float32"), out: T.Buffer((256,), "float32")):
        for i in range(256):
            with T.sblock("red"):
                vi = T.axis.spatial(256, i)
                out[vi] = r[vi, 0] + r[vi, 63]

    @R.function
    def main(x: R.Tensor((256,), "float32"), w: R.Tensor((256,), "float32")):
        cls = InplaceAfterReader
        with R.dataflow():
            # g is big and only the update reads it: running the update before the
            # reader of the old w would free g early -- and be wrong.
            g = R.call_tir(cls.big, (x,), out_ty=R.Tensor((256, 64), "float32"))
            r = R.call_tir(cls.read_w, (w,), out_ty=R.Tensor((256, 64), "float32"))
            w1 = R.call_tir_inplace(cls.update, (w, g), 0, out_ty=R.Tensor((256,), "float32"))
            s = R.call_tir(cls.reduce, (r,), out_ty=R.Tensor((256,), "float32"))
            out = (s, w1)
            R.output(out)
        return out


def _position(func, name):
    names = [b.var.name for blk in func.body.blocks for b in blk.bindings]
    return names.index(name)


def test_inplace_update_stays_after_reader():
    g = graph_of(InplaceAfterReader)
    upd = next(o for o in g.ops if o.kind == "update")
    reader = next(o for o in g.ops if o.name == "read_w")
    assert reader.id in g.predecessors[upd.id]  # the write-after-read edge
    after = RoamOrder(jobs=1)(InplaceAfterReader)
    f = after["main"]
    assert _position(f, "r") < _position(f, "w1")
    assert_well_formed(after)
    # and the reordered program computes the same thing
    rng = np.random.default_rng(1)
    x = rng.standard_normal(256).astype("float32")
    w = rng.standard_normal(256).astype("float32")
    a = run_llvm(InplaceAfterReader, "main", x, w, order=False)
    b = run_llvm(InplaceAfterReader, "main", x, w, order=True)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


# ---------------------------------------------------------------- left untouched
@I.ir_module
class Unbounded:
    @R.function
    def main(x: R.Tensor(("n", 64), "float32")):
        n = T.int64()
        with R.dataflow():
            a = R.exp(x)
            b = R.exp(x)
            c = R.add(a, b)
            R.output(c)
        return c


def test_unextractable_function_left_untouched_with_warning():
    with pytest.warns(UserWarning, match="left in program order"):
        after = RoamOrder(jobs=1)(Unbounded)
    tvm.ir.assert_structural_equal(after, Unbounded)
    assert latest_order("main").status.startswith("skipped")


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="time_limit"):
        RoamOrder(time_limit=0)
    with pytest.raises(ValueError, match="time_limit"):
        RoamOrder(time_limit=-1)
    with pytest.raises(ValueError, match="node_budget"):
        RoamOrder(node_budget=1)


# ----------------------------------------------------------- real training steps
def _check_step(ts, target="llvm", tol=0.01):
    """RoamOrder on a scheduled training step: peak within ``tol`` of cut, never above program."""
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.simulate import schedule_for

    scheduled = schedule_for(with_param_kinds(ts), target)
    func = ts.func_name
    before = extract_graph(scheduled[func], scheduled, func).graph
    with tvm.target.Target(target):
        after = RoamOrder(functions=[func], jobs=1)(scheduled)
    assert_well_formed(after)
    g = extract_graph(after[func], after, func).graph
    lb = cut_bound(before)
    assert g.peak() <= before.peak()
    assert g.peak() <= (1 + tol) * lb, (g.peak(), lb, before.peak())
    return before, g, after


def test_demo_mlp_step_near_cut_bound_and_bit_identical():
    from roam_tvm.frontend._demo import demo_mlp

    ts, _model, (x,), (y,) = demo_mlp()
    before, g, _ = _check_step(ts)
    # one real step on llvm, program order vs RoamOrder: bit-identical loss and state
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.runtime.pipeline import pipeline

    mod = with_param_kinds(ts)
    results = []
    for order in (False, True):
        ex = tvm.compile(mod, target=LLVM, relax_pipeline=pipeline(LLVM, order=order, layout=False))
        state = ts.initial_values()
        loss = ts.run(ex, [x.numpy()], [y.numpy()], state)
        results.append((loss, {k: v for k, v in state.items() if k != "@step"}))
    (la, sa), (lb_, sb) = results
    assert la == lb_
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k])


ZOO_FAST = ["mlp"]
ZOO_SLOW = ["cnn", "resnet18", "vgg11", "mobilenet_v2", "vit-tiny", "bert-base", "gpt2-small"]


def _zoo_step(name):
    from roam_tvm import zoo
    from roam_tvm.cli import optimizer_from_config
    from roam_tvm.frontend import from_torch

    spec = zoo.get_model(name, small=True)
    return from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                      optimizer=optimizer_from_config(spec.optimizer), quiet=True)


@pytest.mark.parametrize("name", ZOO_FAST)
def test_zoo_small_near_cut_bound(name):
    _check_step(_zoo_step(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO_SLOW)
def test_zoo_small_near_cut_bound_slow(name):
    try:
        ts = _zoo_step(name)
    except Exception as e:  # noqa: BLE001 -- the frontend is being finished in parallel
        pytest.xfail(f"frontend cannot import {name} yet: {type(e).__name__}: {str(e)[:200]}")
    _check_step(ts)
