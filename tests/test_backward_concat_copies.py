"""A GRU step's twin gate-gradient concats are built per reader (backward_concat_copies.py).

Checked on the adjoint the pass changes (before: each concat is read by several bindings;
after: by one; an LSTM's single concat is left as it is), on the numerics of one training step
against PyTorch's (bidirectional, time-major, batch first), and on memory: the planned step
with the copies peaks below every order of the step without them (its best lower bound).
"""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402

from roam_tvm.frontend import Adam, autodiff, from_torch  # noqa: E402
from test_numerics import compare_step  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY = dict(BATCH=3, STEPS=4, FEATURES=5, HIDDEN=6)


def _probe(name: str, **sizes):
    """A factory of ``benchmarks/outside/rnns_layout.py`` with its sizes overridden."""
    spec = importlib.util.spec_from_file_location("rnns_layout_concat", ROOT / "benchmarks/outside/rnns_layout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in {**TINY, **sizes}.items():
        setattr(mod, k, v)
    return getattr(mod, name)()


def _adjoints(name: str, monkeypatch, **sizes) -> tuple:
    """The adjoint of the probe's step before and after ``copy_gate_concats_per_reader``."""
    seen = []
    real = autodiff.copy_gate_concats_per_reader

    def spy(func):
        out = real(func)
        seen.append((func, out))
        return out

    monkeypatch.setattr(autodiff, "copy_gate_concats_per_reader", spy)
    model, ins, tgs = _probe(name, **sizes)
    from_torch(model, ins, tgs, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    assert len(seen) == 1
    return seen[0]


_VIEWS = ("relax.reshape", "relax.squeeze", "relax.expand_dims")


def _op(value) -> str | None:
    return value.op.name if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) else None


def _concat_readers(func) -> list[int]:
    """Per backward concat: how many bindings read it, through views (independent of the pass)."""
    binds = [b for blk in func.body.blocks for b in blk.bindings]
    first = next(i for i, b in enumerate(binds) if b.var.name.endswith("_adjoint"))
    readers: dict = {}
    for b in binds:
        for v in relax.analysis.free_vars(b.value):
            readers.setdefault(v, []).append(b)
    out = []
    for b in binds[first:]:
        if _op(b.value) != "relax.concat":
            continue
        frontier, n = [b.var], 0
        while frontier:
            v = frontier.pop()
            for r in readers.get(v, []):
                if _op(r.value) in _VIEWS:
                    frontier.append(r.var)
                elif not isinstance(r.value, relax.Tuple):
                    n += 1
        out.append(n)
    return out


@pytest.mark.parametrize("name,first_steps", [("gru1_tm", 1), ("gru2_bf", 2), ("gru1_bi", 2)])
def test_gru_concats_read_once(name, first_steps, monkeypatch):
    """Before: GRU's gate-gradient concats have several readers each; after: one each, and
    there are more concats (the copies). A first step's (one per layer and direction) may keep
    its readers: it starts from ``h_0 = 0``, so no weight gradient reads its hidden-side twin
    (zero_fills.py) and there is no pair to split."""
    before, after = _adjoints(name, monkeypatch)
    b, a = _concat_readers(before), _concat_readers(after)
    assert b and max(b) >= 2, b
    assert a and sum(n > 1 for n in a) <= first_steps, a
    assert len(a) > len(b)


@pytest.mark.parametrize("name", ["lstm1_bf", "rnn2_tm"])
def test_other_rnns_unchanged(name, monkeypatch):
    """An LSTM's one concat of ``[di, df, dg, do]`` shares no piece with another: no copies."""
    before, after = _adjoints(name, monkeypatch)
    assert sorted(_concat_readers(before)) == sorted(_concat_readers(after))


def test_batch_above_hidden_unchanged(monkeypatch):
    """With ``B >= H`` no reader makes more than a step's concat (``W_hh``'s gradient is
    ``3H x H``, the concat ``B x 3H``): nothing is summed late, so no copies."""
    before, after = _adjoints("gru1_tm", monkeypatch, BATCH=8, HIDDEN=6)
    assert max(_concat_readers(before)) >= 2
    assert sorted(_concat_readers(before)) == sorted(_concat_readers(after))


@pytest.mark.parametrize("name", ["gru1_tm", "gru1_bi", "gru2_bf"])
def test_step_matches_torch(name):
    """Loss, updated parameters and Adam states match PyTorch's step (test_numerics' tolerance)."""
    model, ins, tgs = _probe(name)
    compare_step(model, ins, tgs, "cross_entropy", Adam(lr=1e-2))


def test_bf16_amp_builds():
    """Under bf16 autocast (casts between the pieces and the concats) the step still builds."""
    model, ins, tgs = _probe("gru1_tm")
    ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True,
                    precision="bf16-amp")
    tvm.compile(ts.mod, target="llvm")


def _graph(model, ins, tgs):
    from roam_tvm.passes import extract_graph
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.simulate import schedule_for

    ts = from_torch(model, ins, tgs, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    mod = schedule_for(with_param_kinds(ts))
    return extract_graph(mod[ts.func_name], mod, ts.func_name).graph


@pytest.mark.slow  # two imports, one plan and the pair/set bounds: about a minute
def test_planned_peak_below_every_order_without(monkeypatch):
    """A 2-layer GRU whose weight gradients are best summed late: the planned step with the
    copies peaks below the best lower bound (cut, pair, set) of the step without them."""
    from roam_tvm.order import plan_order
    from roam_tvm.report.simulate import lower_bounds

    model, ins, tgs = _probe("gru2_bf", BATCH=2, STEPS=5, HIDDEN=16, FEATURES=8)
    g = _graph(model, ins, tgs)
    peak = g.peak(plan_order(g, time_limit=3.0, progress=False).order)
    with monkeypatch.context() as m:
        m.setattr(autodiff, "copy_gate_concats_per_reader", lambda f: f)
        old = lower_bounds(_graph(model, ins, tgs))
    best = max(old[k] for k in ("cut", "pair", "set") if k in old)
    assert peak < best, (peak, old)
