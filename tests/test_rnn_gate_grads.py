"""An RNN weight's gradient summed per gate and applied row block by row block
(rnn_gate_grads.py, block_updates.py).

Checked on a hand-built adjoint (the sum becomes one sum per gate, stacked; the gate concats
are no longer read; values unchanged; anything else left alone), on the row-block kernels
(each optimizer's rows match its whole-tensor update exactly), on whole steps against
PyTorch's (GRU and LSTM, bidirectional, time-major and batch-first, three optimizers) and
bf16 steps against the same step without the pass, and on memory: the planned step peaks
below every order of the step without it (its best lower bound).
"""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.relax import op as R  # noqa: E402

from roam_tvm.frontend import SGD, Adam, AdamW, from_torch, step  # noqa: E402
from roam_tvm.frontend.block_updates import block_kernel  # noqa: E402
from roam_tvm.frontend.optim import optimizer_kernel  # noqa: E402
from roam_tvm.frontend.rnn_gate_grads import weight_grads_per_gate  # noqa: E402
from test_numerics import compare_step  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY = dict(BATCH=3, STEPS=4, FEATURES=5, HIDDEN=6)
B, F, H, STEPS = 2, 3, 4, 3


def _probe(name: str, **sizes):
    """A factory of ``benchmarks/outside/rnns_layout.py`` with its sizes overridden."""
    spec = importlib.util.spec_from_file_location("rnns_layout_gates", ROOT / "benchmarks/outside/rnns_layout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in {**TINY, **sizes}.items():
        setattr(mod, k, v)
    return getattr(mod, name)()


# ------------------------------------------------------------------------------------------
# the pass on a hand-built adjoint


def _adjoint(plain_step: int | None = None) -> relax.Function:
    """``((loss,), (grad,))`` with ``grad = (sum_t h_t^T @ reshape(concat(g_t0, g_t1, g_t2)))^T``,
    as ``Gradient`` writes a weight's; step ``plain_step`` reads a plain tensor instead."""
    hs = [relax.Var(f"h{t}", relax.TensorType((B, F), "float32")) for t in range(STEPS)]
    gs = [[relax.Var(f"g{t}{k}", relax.TensorType((1, B, H), "float32")) for k in range(3)]
          for t in range(STEPS)]
    plain = relax.Var("plain", relax.TensorType((B, 3 * H), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", hs + [v for g in gs for v in g] + [plain]):
        with bb.dataflow():
            total = None
            for t in range(STEPS):
                cat = plain if t == plain_step else bb.emit(R.reshape(bb.emit(R.concat(gs[t], axis=2)), (B, 3 * H)))
                term = bb.emit(R.matmul(bb.emit(R.permute_dims(hs[t], [1, 0])), cat))
                total = term if total is None else bb.emit(R.add(total, term))
            grad = bb.emit(R.permute_dims(total, [1, 0]))
            loss = bb.emit(R.sum(hs[0]))
            out = bb.emit_output(relax.Tuple([relax.Tuple([loss]), relax.Tuple([grad])]))
        bb.emit_func_output(out)
    return bb.get()["f"]


def _ops(func) -> list[str]:
    return [b.value.op.name for blk in func.body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)]


def _run(func, args):
    mod = tvm.IRModule({"f": func})
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["f"](*[tvm.runtime.tensor(a) for a in args])
    return out[1][0].numpy()


def test_sum_per_gate():
    """The gradient is stacked from three per-gate sums of ``H`` rows; no gate concat is read;
    the values are those of the whole sum."""
    before = _adjoint()
    after = weight_grads_per_gate(before)
    concats = [b.value for blk in after.body.blocks for b in blk.bindings
               if isinstance(b.value, relax.Call) and b.value.op.name == "relax.concat"]
    assert _ops(before).count("relax.concat") == STEPS
    assert len(concats) == 1 and int(concats[0].attrs.axis) == 0  # the stack only
    assert [tuple(int(d) for d in f.ty.shape.values) for f in concats[0].args[0].fields] == [(H, F)] * 3
    assert _ops(after).count("relax.matmul") == 3 * STEPS
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(tuple(int(d) for d in p.ty.shape.values)).astype("float32")
            for p in before.params]
    hs, gs = args[:STEPS], args[STEPS:-1]
    want = sum(h.T @ np.concatenate(gs[3 * t:3 * t + 3], axis=2).reshape(B, 3 * H)
               for t, h in enumerate(hs)).T
    np.testing.assert_allclose(_run(after, args), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(before, args), want, rtol=1e-5, atol=1e-5)


def test_other_sums_unchanged():
    """A sum with one step that is not read from a gate concat is left whole."""
    before = _adjoint(plain_step=1)
    assert weight_grads_per_gate(before).same_as(before)


# ------------------------------------------------------------------------------------------
# the row-block kernels


def _kernel_run(name_func, arrays: list, hypers: list):
    exe = tvm.compile(tvm.IRModule({"main": name_func[1].with_attr("global_symbol", "main")}), target="llvm")
    ts = [tvm.runtime.tensor(a) for a in arrays] + [tvm.runtime.tensor(np.array(h, "float32")) for h in hypers]
    exe["main"](*ts)
    return [t.numpy() for t in ts[:len(arrays)]]


@pytest.mark.parametrize("opt", [Adam(lr=1e-2, weight_decay=0.1), AdamW(lr=1e-2),
                                 SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)])
def test_row_blocks_match_whole_update(opt):
    """Three row-block updates (rows 0-3, 4-7, 8-11) give exactly the whole-tensor update."""
    rng = np.random.default_rng(1)
    rows, cols = 12, 5
    p, g = rng.standard_normal((2, rows, cols)).astype("float32")
    states = [np.abs(rng.standard_normal((rows, cols))).astype("float32") for _ in opt.state_suffixes]
    hypers = list(opt.hyper_values(3).values())
    whole = _kernel_run(optimizer_kernel(opt, 2, "float32"), [p.copy(), g] + [s.copy() for s in states], hypers)
    cur = [p.copy()] + [s.copy() for s in states]
    for off in (0, 4, 8):
        out = _kernel_run(block_kernel(opt, "float32", off, (rows, cols), (4, cols)),
                          [cur[0], g[off:off + 4].copy()] + cur[1:], hypers)
        cur = [out[0]] + out[2:]
    for a, b in zip([whole[0]] + whole[2:], cur):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------
# whole steps


def _row_updates(ts) -> int:
    return sum("_rows" in gv.name_hint for gv in ts.mod.functions)


@pytest.mark.parametrize("name,opt", [("gru1_bi", Adam(lr=1e-2)), ("lstm2_bf", AdamW(lr=1e-2)),
                                      ("gru1_tm", SGD(lr=0.1, momentum=0.9))])
def test_step_matches_torch(name, opt):
    """Loss, parameters and optimizer states after one step match PyTorch's; the weights are
    updated by row blocks."""
    model, ins, tgs = _probe(name)
    ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=opt, quiet=True)
    assert _row_updates(ts) >= 2
    compare_step(model, ins, tgs, "cross_entropy", opt, ts=ts)


def _bf16_step(model, ins, tgs):
    ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=Adam(lr=1e-2), quiet=True)
    vm = relax.VirtualMachine(tvm.compile(ts.mod, target="llvm"), tvm.cpu())
    state = ts.initial_values()
    loss = ts.run(vm, list(ins), list(tgs), state)
    return ts, loss, state


def test_bf16_step_as_without(monkeypatch):
    """A bf16 GRU (cast products) is updated by row blocks, with the values of the step
    without the pass."""
    model, ins, tgs = _probe("gru1_tm")
    model = model.to(torch.bfloat16)
    ins = tuple(x.to(torch.bfloat16) for x in ins)
    ts, loss, state = _bf16_step(model, ins, tgs)
    assert _row_updates(ts) >= 2
    monkeypatch.setattr(step, "weight_grads_per_gate", lambda f: f)
    ts0, loss0, state0 = _bf16_step(model, ins, tgs)
    assert _row_updates(ts0) == 0
    assert loss == loss0
    for k in state0:
        np.testing.assert_allclose(np.asarray(state[k], "float32"), np.asarray(state0[k], "float32"),
                                   rtol=1e-2, atol=1e-3, err_msg=k)


# ------------------------------------------------------------------------------------------
# memory


def _graph(model, ins, tgs):
    from roam_tvm.passes import extract_graph
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.simulate import schedule_for

    ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    mod = schedule_for(with_param_kinds(ts))
    return extract_graph(mod[ts.func_name], mod, ts.func_name).graph


@pytest.mark.slow  # two imports, one plan and the pair/set bounds per model: a minute or two
@pytest.mark.parametrize("name", ["gru2_bf", "lstm2_bf"])
def test_planned_peak_below_every_order_without(name, monkeypatch):
    """2-layer GRU / LSTM whose weight gradients are best summed late: the planned step peaks
    below the best lower bound (cut, pair, set) of every order of the step without the pass."""
    from roam_tvm.order import plan_order
    from roam_tvm.report.simulate import lower_bounds

    model, ins, tgs = _probe(name, BATCH=2, STEPS=5, HIDDEN=16, FEATURES=8)
    g = _graph(model, ins, tgs)
    peak = g.peak(plan_order(g, time_limit=3.0, progress=False).order)
    with monkeypatch.context() as m:
        m.setattr(step, "weight_grads_per_gate", lambda f: f)
        old = lower_bounds(_graph(model, ins, tgs))
    best = max(old[k] for k in ("cut", "pair", "set") if k in old)
    assert peak < best, (peak, old)
