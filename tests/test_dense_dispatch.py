"""Value-sized selections traced dense (roam_tvm/frontend/dense_dispatch.py).

MoE layers written the usual ways (``torch.where(idx == e)`` + ``index_add_``, ``out[tok] += ...``,
boolean masks, ``nonzero().squeeze``, ``scatter_add_``) import, and one step matches PyTorch's
(test_numerics.compare_step); uses the mode cannot trace are refused before TVM's importer.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import test_numerics  # noqa: E402
from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from roam_tvm.frontend.dense_dispatch import dense_dispatch  # noqa: E402
from roam_tvm.frontend.errors import UnsupportedError  # noqa: E402


class _MoE(nn.Module):
    """Top-k routing; ``dispatch`` says how tokens reach the experts and come back."""

    def __init__(self, dispatch: str, d=16, experts=4, k=2, classes=5):
        super().__init__()
        self.dispatch, self.k = dispatch, k
        self.inp = nn.Linear(8, d)
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 24), nn.SiLU(), nn.Linear(24, d))
                                     for _ in range(experts))
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        h = self.inp(x)
        b, t, d = h.shape
        flat = h.reshape(-1, d)
        w, idx = torch.topk(F.softmax(self.gate(flat), -1), self.k)
        w = w / w.sum(-1, keepdim=True)
        moe = torch.zeros_like(flat)
        if self.dispatch == "loop_over_hit":  # transformers 4.x Mixtral: only the experts some token picked
            picked = F.one_hot(idx, len(self.experts)).permute(2, 1, 0)  # [expert, slot, token]
            for e in torch.greater(picked.sum(dim=(-1, -2)), 0).nonzero():
                slot, tok = torch.where(picked[e].squeeze(0))
                moe.index_add_(0, tok, self.experts[int(e)](flat[None, tok].reshape(-1, d)) * w[tok, slot, None])
        else:
            for e, expert in enumerate(self.experts):
                moe = getattr(self, "_" + self.dispatch)(moe, flat, w, idx, e, expert)
        return self.out((flat + moe).reshape(b, t, d).mean(1))

    @staticmethod
    def _where_index_add(out, x, w, idx, e, expert):  # mistral-src / Mixtral's eager loop
        tok, slot = torch.where(idx == e)
        return out.index_add(0, tok, expert(x[tok]) * w[tok, slot, None])

    @staticmethod
    def _where_setitem(out, x, w, idx, e, expert):
        tok, slot = torch.where(idx == e)
        out[tok] += w[tok, slot, None] * expert(x[tok])
        return out

    @staticmethod
    def _bool_mask(out, x, w, idx, e, expert):
        routed = idx == e
        mask = routed.any(-1)
        gate = (w * routed).sum(-1, keepdim=True)
        out[mask] += expert(x[mask]) * gate[mask, :]
        return out

    @staticmethod
    def _nonzero_scatter(out, x, w, idx, e, expert):
        tok = (idx == e).any(-1).nonzero().squeeze(-1)
        gate = (w * (idx == e)).sum(-1)
        y = expert(x.index_select(0, tok)) * gate[tok].unsqueeze(-1)
        return out.scatter_add(0, tok[:, None].expand(-1, x.shape[1]), y)


DISPATCHES = ["where_index_add", "where_setitem", "bool_mask", "nonzero_scatter", "loop_over_hit"]
SLOW_DISPATCHES = {"where_setitem", "bool_mask", "loop_over_hit"}  # CI keeps one index_add and one scatter


def _made(dispatch):
    torch.manual_seed(0)
    return _MoE(dispatch), (torch.randn(2, 6, 8),), (torch.randint(0, 5, (2,)),)


@pytest.mark.parametrize("dispatch", [pytest.param(d, marks=pytest.mark.slow) if d in SLOW_DISPATCHES else d
                                      for d in DISPATCHES])
def test_moe_dispatch_matches_pytorch(dispatch):
    model, inputs, targets = _made(dispatch)
    opt = Adam(lr=1e-3)
    with pytest.warns(RuntimeWarning, match="planned dense"):
        ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=opt, quiet=True)
    test_numerics.compare_step(model, inputs, targets, "cross_entropy", opt, ts=ts)


@pytest.mark.parametrize("dispatch, selections", [("where_index_add", 4), ("loop_over_hit", 5)])
def test_dense_eager_equals_sparse(dispatch, selections):
    """The mode itself, eagerly: same output, every selection dense, every write-back masked."""
    model, (x,), _ = _made(dispatch)
    with torch.no_grad():
        ref = model(x)
        with dense_dispatch() as record:
            dense = model(x)
    # top-2 of 4 experts: idx == e (or Mixtral's one-hot expert mask) is true at most once per token, so
    # one row per token (12), not per (token, slot); the loop's own nonzero() has a row per expert (4)
    assert record.selections == selections and record.sinks == 4
    assert record.rows == [12] * 4 if dispatch == "where_index_add" else record.rows == [4] + [12] * 4
    torch.testing.assert_close(dense, ref)


def test_mask_true_twice_per_row_keeps_every_slot():
    """A mask that may be true twice along a dim (not a top-k's) keeps one row per entry."""
    pick = torch.tensor([[True, True], [False, True], [False, False]])
    x = torch.arange(6.0).reshape(3, 2)
    want = torch.zeros(3).index_add(0, torch.where(pick)[0], x[torch.where(pick)])
    with dense_dispatch() as record:
        tok, slot = torch.where(pick)
        got = torch.zeros(3).index_add(0, tok, x[tok, slot])
    assert record.rows == [6]
    torch.testing.assert_close(got, want)


def test_single_hot_follows_top_k_through_one_hot_and_permute():
    from roam_tvm.frontend.single_hot import SingleHot

    single = SingleHot()
    x = torch.randn(5, 4)
    idx = torch.topk(x, 2, dim=-1).indices
    single.observe(torch.topk, (x, 2), {"dim": -1}, (None, idx))
    hot = torch.nn.functional.one_hot(idx, 4)                       # [5, 2, 4]
    single.observe(torch.nn.functional.one_hot, (idx, 4), {}, hot)
    assert single.dims(hot) == {1, 2}
    perm = hot.permute(2, 1, 0)                                     # [4, 2, 5]
    single.observe(torch.Tensor.permute, (hot, 2, 1, 0), {}, perm)
    assert single.dims(perm) == {1, 0}
    row = perm[3]                                                   # [2, 5]
    single.observe(torch.Tensor.__getitem__, (perm, 3), {}, row)
    assert single.dims(row) == {0}
    eq = idx == 1
    single.observe(torch.Tensor.__eq__, (idx, 1), {}, eq)
    assert single.dims(eq) == {1}
    assert single.dims(x + 1) == frozenset()


def test_unselected_rows_cannot_leak_nan():
    """An expert that overflows on a row it was not given must not poison the sum."""
    x = torch.tensor([[1.0], [1e30]])
    pick = torch.tensor([True, False])
    with dense_dispatch():
        tok, = torch.where(pick)
        out = torch.zeros(2, 1).index_add(0, tok, x[tok] * x[tok] * 1e30)  # inf on row 1
    assert torch.isfinite(out).all() and out[1, 0] == 0


class _MeanOfSelected(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 5)

    def forward(self, x):
        y = self.lin(x)
        return y[y[:, 0] > 0].mean(0, keepdim=True).expand(x.shape[0], -1)  # a reduction over selected rows


class _CoordsArithmetic(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 5)

    def forward(self, x):
        y = self.lin(x)
        rows, = torch.where(y[:, 0] > 0)
        return torch.zeros_like(y).index_add(0, (rows + 1) % y.shape[0], y[rows])


@pytest.mark.parametrize("model, match", [(_MeanOfSelected, "changes the output"),
                                          (_CoordsArithmetic, r"reach add \(File \".*test_dense_dispatch.py\", line \d+\)")])
def test_untraceable_selections_are_refused(model, match):
    torch.manual_seed(0)
    m, x, t = model(), torch.randn(6, 8), torch.randint(0, 5, (6,))
    with pytest.raises(UnsupportedError, match=match):
        from_torch(m, (x,), (t,), loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)


def test_boolean_mask_rows_are_a_copy():
    """``out[m] += v`` reads ``out[m]``, adds in place and writes back: the rows read must be a copy
    (as boolean indexing gives), or the add lands on the unselected rows too."""
    x = torch.arange(12.0).reshape(6, 2)
    m = torch.tensor([True, False, True, False, False, True])
    want = torch.zeros(6, 2)
    want[m] += x[m] * 2 + 1
    with dense_dispatch() as record:
        got = torch.zeros(6, 2)
        got[m] += x[m] * 2 + 1  # the unselected rows' values are not zero
    assert record.selections == 2 and record.sinks == 1
    torch.testing.assert_close(got, want)
