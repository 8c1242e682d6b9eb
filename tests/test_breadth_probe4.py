"""Fourth breadth probe (issue 13): embeddings and indexing a user's model brings, each at a
tiny size in float64 against PyTorch's step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from test_numerics import compare_step  # noqa: E402


class PaddedBag(torch.nn.Module):
    """``Embedding(padding_idx=k)`` then a mean over the sequence and a classifier."""

    def __init__(self, pad=2):
        super().__init__()
        self.e = torch.nn.Embedding(6, 3, padding_idx=pad)
        self.l = torch.nn.Linear(3, 2)
        with torch.no_grad():  # a nonzero padding row: an update of it would show
            self.e.weight[pad] = torch.tensor([0.5, -1.0, 2.0])

    def forward(self, x):
        return self.l(self.e(x).mean(1))


@pytest.mark.parametrize("opt", [SGD(lr=1.0), Adam(lr=0.1)], ids=["sgd", "adam"])
def test_embedding_padding_row_gets_no_gradient_float64(opt):
    torch.manual_seed(0)
    m = PaddedBag().double()
    x = torch.tensor([[2, 1, 0], [3, 2, 2]])  # the padding index appears in both rows
    y = torch.tensor([0, 1])
    ts = from_torch(m, (x,), (y,), loss="cross_entropy", optimizer=opt, quiet=True)
    stats = compare_step(m, (x,), (y,), "cross_entropy", opt, dtype="float64", ts=ts)
    assert stats["zero_grad"].get("e.weight", 0) >= 3  # the padding row, untouched


class PackedLSTM(torch.nn.Module):
    """The usual variable-length recipe: pack, run the RNN, unpack."""

    def __init__(self, cell=torch.nn.LSTM):
        super().__init__()
        self.rnn = cell(3, 4, batch_first=True)
        self.l = torch.nn.Linear(4, 2)

    def forward(self, x, lengths):
        p = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                    enforce_sorted=False)
        out, _ = self.rnn(p)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return self.l(out[:, 0])


@pytest.mark.parametrize("cell", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
def test_packed_sequence_trains_and_the_patch_is_scoped(cell):
    """Packed sequences trace (tests/test_packed_rnn.py checks the numerics); afterwards
    packing works in eager PyTorch as before."""
    args = (torch.randn(2, 5, 3), torch.tensor([5, 3]))
    from_torch(PackedLSTM(cell), args, (torch.tensor([0, 1]),), quiet=True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(*args, batch_first=True, enforce_sorted=False)
    assert type(packed) is torch.nn.utils.rnn.PackedSequence and packed.data.shape == (8, 3)
    out, _ = cell(3, 4, batch_first=True)(packed)
    assert type(out) is torch.nn.utils.rnn.PackedSequence


class Gathers(torch.nn.Module):
    """Advanced indexing of an activation with two index tensors (or one after a slice)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.l1 = torch.nn.Linear(3, 4)
        self.l2 = torch.nn.Linear(4, 2)

    def forward(self, x, i, j):
        h = self.l1(x)
        g = {"I,J": lambda: h[i, j], ":,I": lambda: h[:, i], ":,I,J": lambda: h[:, i, j],
             "I,:,J": lambda: h[i, :, j]}[self.kind]()
        return self.l2(g.reshape(g.shape[0], -1, 4).sum(1))


_CASES = {  # x shape, I, J: with negative entries (PyTorch counts them from the end)
    "I,J": ((3, 5, 3), [[0, 1], [2, -1]], [[4, 0], [-1, -5]]),  # (batch, position) pairs
    ":,I": ((3, 5, 3), [0, -1, 4], [0]),
    ":,I,J": ((3, 5, 6, 3), [0, 4, -1, 1], [5, 0, -1, 2]),  # zipped, not an outer product
    "I,:,J": ((3, 5, 6, 3), [0, 2, -1], [5, 0, -1]),  # index dims first, then the slice
}


@pytest.mark.parametrize("kind", list(_CASES))
def test_advanced_indexing_with_negative_indices_float64(kind):
    torch.manual_seed(0)
    shape, i, j = _CASES[kind]
    m = Gathers(kind).double()
    args = (torch.randn(*shape, dtype=torch.float64), torch.tensor(i), torch.tensor(j))
    y = torch.zeros(m(*args).shape[0], dtype=torch.long)
    compare_step(m, args, (y,), "cross_entropy", SGD(lr=1.0), dtype="float64")


class Bag(torch.nn.Module):
    """``nn.EmbeddingBag`` then a classifier (fastText's shape)."""

    def __init__(self, mode, pad=None, last=False):
        super().__init__()
        self.e = torch.nn.EmbeddingBag(7, 3, mode=mode, padding_idx=pad, include_last_offset=last)
        self.l = torch.nn.Linear(3, 2)
        with torch.no_grad():  # row 4 holds every column's smallest value
            self.e.weight[4] = -5.0

    def forward(self, x, offsets=None, weights=None):
        return self.l(self.e(x, offsets, per_sample_weights=weights))


_IDX = [1, 2, 3, 2, 0, 5, 5, 6]
_BAGS = {  # name: (mode, padding_idx, include_last_offset, inputs)
    "sum_empty_bag": ("sum", None, False, (_IDX, [0, 3, 3, 5])),
    "sum_last_offset": ("sum", None, True, (_IDX, [0, 3, 5, 8])),
    "sum_weighted": ("sum", None, False, (_IDX, [0, 3, 5], "w")),
    "mean_padding": ("mean", 2, False, (_IDX, [0, 3, 4, 5])),
    "mean_2d_padding_only_bag": ("mean", 2, False, ([[1, 2, 2], [2, 2, 2]],)),
    "max_2d_ties": ("max", None, False, ([[1, 2, 2], [0, 5, 6]],)),
    "max_padding": ("max", 2, False, (_IDX, [0, 3, 4, 5])),
    # a bag whose one valid entry is the smallest value, after padding
    "max_padding_then_min": ("max", 2, False, ([2, 4, 1, 3, 2], [0, 2])),
}


@pytest.mark.parametrize("name", list(_BAGS))
@pytest.mark.parametrize("opt", [SGD(lr=1.0), Adam(lr=0.1)], ids=["sgd", "adam"])
def test_embedding_bag_float64(name, opt):
    mode, pad, last, raw = _BAGS[name]
    torch.manual_seed(0)
    m = Bag(mode, pad, last).double()
    args = tuple(torch.rand(len(_IDX), dtype=torch.float64) if a == "w" else torch.tensor(a)
                 for a in raw)
    y = torch.zeros(m(*args).shape[0], dtype=torch.long)
    compare_step(m, args, (y,), "cross_entropy", opt, dtype="float64")


class Recommender(torch.nn.Module):
    """Every construct above in one model: padded embedding, max bag, a (batch, slot) gather."""

    def __init__(self):
        super().__init__()
        self.item = torch.nn.Embedding(50, 8, padding_idx=0)
        self.tags = torch.nn.EmbeddingBag(20, 8, mode="max")
        self.l = torch.nn.Linear(16, 3)

    def forward(self, history, slot, tags, offsets):
        h = self.item(history)                                   # (B, H, 8)
        picked = h[torch.arange(h.shape[0]), slot]               # (B, 8)
        return self.l(torch.cat([picked, self.tags(tags, offsets)], -1))


def test_embeddings_and_gathers_plan_validly_at_the_bound():
    """The lowered step (splat fills included) plans: roam valid, at or below tvm-default, and
    within 2% of the best lower bound (``cut``, or ``pair`` where it is higher). At batch 64:
    at batch 4 the 64-byte alignment of a few hundred-byte tensors is what separates them."""
    from roam_tvm.report.compare import compare_step as plan_step

    torch.manual_seed(0)
    b = 64
    args = (torch.randint(0, 50, (b, 6)), torch.tensor([0, 5, -1, 2] * (b // 4)),
            torch.randint(0, 20, (3 * b,)), torch.arange(0, 3 * b, 3))
    ts = from_torch(Recommender(), args, (torch.randint(0, 3, (b,)),), optimizer=Adam(lr=1e-3),
                    quiet=True)
    report = plan_step(ts, ["tvm-default", "roam"], target="llvm", progress=False)
    roam, default = report["planners"]["roam"], report["planners"]["tvm-default"]
    assert roam["valid"] and default["valid"]
    assert roam["peak_bytes"] <= default["peak_bytes"]
    bounds = report["lower_bounds"]
    assert roam["peak_bytes"] <= 1.02 * max(bounds["cut"], bounds.get("pair", 0)), bounds


class Puts(torch.nn.Module):
    """Writes into an activation at index tensors (some negative), then reads it all."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.l1 = torch.nn.Linear(3, 4)
        self.l2 = torch.nn.Linear(4, 2)

    def forward(self, x, i, j):
        h = self.l1(x)  # (B, T, S, 4)
        z = torch.zeros_like(h)
        if self.kind == "I=":
            z = z.index_put((i,), h[:2] * 2.0, accumulate=True)
            z[i] = h[1:3]
        elif self.kind == ":,I,J=":
            z[:, i, j] = h[:, 0, :3] * 3.0
        else:  # "I,:,J=" (index dims first in the value's shape)
            z[i, :, j] = h[:2, :, 0] - 1.0
        return self.l2((z * h).sum((1, 2)))


@pytest.mark.parametrize("kind", ["I=", ":,I,J=", "I,:,J="])
def test_index_put_with_negative_indices_and_slices_float64(kind):
    torch.manual_seed(0)
    m = Puts(kind).double()
    i, j = {"I=": ([0, -1], [0]), ":,I,J=": ([0, -1, 1], [4, -2, 0]),
            "I,:,J=": ([1, -1], [0, -3])}[kind]
    args = (torch.randn(3, 4, 5, 3, dtype=torch.float64), torch.tensor(i), torch.tensor(j))
    compare_step(m, args, (torch.tensor([0, 1, 1]),), "cross_entropy", SGD(lr=1.0),
                 dtype="float64")


@pytest.mark.parametrize("cls", [torch.nn.Embedding, torch.nn.EmbeddingBag])
def test_embedding_max_norm_is_refused_with_the_way_out(cls):
    from roam_tvm.frontend.errors import UnsupportedError

    m = torch.nn.Sequential(cls(7, 4, max_norm=1.0), torch.nn.Flatten(), torch.nn.LazyLinear(2))
    x = torch.tensor([[0, 1, 3], [3, 0, 6]])
    m(x)
    with pytest.raises(UnsupportedError) as info:
        from_torch(m, (x,), (torch.tensor([0, 1]),), quiet=True)
    assert "max_norm" in str(info.value) and "Way out" in str(info.value)


class DynamicBatch(torch.nn.Module):
    """An embedding (padded or not) then a (batch, position) gather, traced with a dynamic batch."""

    def __init__(self, pad):
        super().__init__()
        self.e = torch.nn.Embedding(7, 4, padding_idx=pad)
        self.l = torch.nn.Linear(4, 2)

    def forward(self, x, i):
        h = self.e(x)
        return self.l(h[torch.arange(h.shape[0]), i])


@pytest.mark.parametrize("pad", [None, 0], ids=["plain", "padded"])
def test_embedding_and_gather_with_a_dynamic_batch_float64(pad):
    from torch.export import Dim

    torch.manual_seed(0)
    m = DynamicBatch(pad).double()
    x = torch.tensor([[0, 1, 3], [3, 0, 6], [1, 0, 2], [5, 4, 0]])
    i, y = torch.tensor([0, 2, 1, 1]), torch.tensor([0, 1, 1, 0])
    b = Dim("b", max=4)
    ts = from_torch(m, (x, i), (y,), optimizer=SGD(lr=1.0), quiet=True,
                    dynamic_shapes=({0: b}, {0: b}, {0: b}))
    assert ts.dynamic_bounds == {"b": 4}
    compare_step(m, (x, i), (y,), "cross_entropy", SGD(lr=1.0), dtype="float64", ts=ts)


def test_embedding_bag_with_a_dynamic_batch_is_refused_with_the_way_out():
    from torch.export import Dim
    from roam_tvm.frontend.errors import UnsupportedError

    m = Bag("mean")
    with pytest.raises(UnsupportedError) as info:
        from_torch(m, (torch.tensor([[1, 2], [3, 4]]),), (torch.tensor([0, 1]),), quiet=True,
                   dynamic_shapes=({0: Dim("b", max=8)}, {0: Dim("b", max=8)}))
    assert "EmbeddingBag" in str(info.value) and "way out" in str(info.value)
