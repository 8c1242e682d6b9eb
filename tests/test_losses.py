"""PyTorch's loss conventions: ``cross_entropy`` reads the classes from dimension 1 (``F.cross_entropy``),
language-model logits ``[B, T, V]`` with ``[B, T]`` targets from the last one; ambiguous shapes are refused.

The references are written here with explicit permutes, not with ``roam_tvm.frontend.losses``.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")
F = torch.nn.functional

from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from roam_tvm.frontend.losses import LossShapeError, class_dim, make_loss_fn  # noqa: E402
from roam_tvm.zoo.spec import compute_loss  # noqa: E402
from test_numerics import compare_step  # noqa: E402 (tests/ is on sys.path under pytest)


def _ref_ce_dim1(out, t):
    """Cross-entropy with classes in dim 1, computed on rows: move dim 1 last, flatten."""
    c = out.shape[1]
    rows = out.movedim(1, -1).reshape(-1, c)
    if t.is_floating_point():
        return -(torch.log_softmax(rows, -1) * t.movedim(1, -1).reshape(-1, c)).sum(-1).mean()
    return -torch.log_softmax(rows, -1).gather(1, t.reshape(-1, 1)).mean()


def _ref_ce_last(out, t):
    rows = out.reshape(-1, out.shape[-1])
    return -torch.log_softmax(rows, -1).gather(1, t.reshape(-1, 1)).mean()


# ---------------------------------------------------------------- the rule, on shapes
@pytest.mark.parametrize("out, tgt, ints, dim", [
    ((4, 10), (4,), True, 1),                # classification
    ((2, 5, 6, 7), (2, 6, 7), True, 1),      # segmentation
    ((2, 5, 9), (2, 9), True, 1),            # [B, C, L] sequence labelling, as F.cross_entropy
    ((2, 9, 50), (2, 9), True, 2),           # language model
    ((2, 5, 6, 7), (2, 5, 6, 7), False, 1),  # probabilities
    ((10,), (), True, 0),                    # unbatched
])
def test_class_dim(out, tgt, ints, dim):
    assert class_dim(out, tgt, ints) == dim


@pytest.mark.parametrize("out, tgt, ints, words", [
    ((2, 8, 8), (2, 8), True, ["ambiguous", "callable"]),
    ((2, 4, 4, 4), (2, 4, 4), True, ["ambiguous", "callable"]),
    ((2, 5, 6, 7), (2, 6), True, ["[2, 6, 7]", "callable"]),
    ((4, 10), (4, 1), True, ["[4]", "callable"]),
    ((2, 5, 6, 7), (2, 6, 7), False, ["probability", "callable"]),
    ((), (), True, ["scalar"]),
])
def test_class_dim_refuses(out, tgt, ints, words):
    with pytest.raises(LossShapeError) as e:
        class_dim(out, tgt, ints)
    assert all(w in str(e.value) for w in words), str(e.value)


# ---------------------------------------------------------------- the torch functions
@pytest.mark.parametrize("case", ["segmentation", "lm", "probabilities", "classification"])
def test_torch_loss_matches_reference(case):
    g = torch.Generator().manual_seed(0)
    if case == "segmentation":
        out, t, ref = torch.randn(2, 5, 6, 7, generator=g), torch.randint(0, 5, (2, 6, 7), generator=g), _ref_ce_dim1
    elif case == "lm":
        out, t, ref = torch.randn(2, 9, 50, generator=g), torch.randint(0, 50, (2, 9), generator=g), _ref_ce_last
    elif case == "probabilities":
        out = torch.randn(2, 5, 6, 7, generator=g)
        t, ref = torch.softmax(torch.randn(2, 5, 6, 7, generator=g), 1), _ref_ce_dim1
    else:
        out, t, ref = torch.randn(4, 10, generator=g), torch.randint(0, 10, (4,), generator=g), _ref_ce_dim1
    want = float(ref(out.double(), t.double() if t.is_floating_point() else t))
    assert abs(float(make_loss_fn("cross_entropy")(out, t)) - want) < 1e-5
    assert abs(float(compute_loss("cross_entropy", out, t)) - want) < 1e-5  # the zoo's (PyTorch baseline's)


def test_mse_shape_mismatch_refused():
    with pytest.raises(LossShapeError, match="broadcast|differs"):
        make_loss_fn("mse")(torch.randn(4, 1), torch.randn(4))


# ---------------------------------------------------------------- through the training step
class Seg(torch.nn.Module):
    """A tiny segmentation net: [B, 3, H, W] -> [B, C, H, W] logits."""

    def __init__(self, classes=4):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.c2 = torch.nn.Conv2d(6, classes, 1)

    def forward(self, x):
        return self.c2(torch.relu(self.c1(x)))


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=23, width=12):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.mix = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, ids):
        return self.head(torch.tanh(self.mix(self.emb(ids))))


def test_segmentation_step_matches_torch():
    torch.manual_seed(0)
    m, x, y = Seg(), torch.randn(2, 3, 5, 6), torch.randint(0, 4, (2, 5, 6))
    ts = from_torch(m, (x,), (y,), loss="cross_entropy", optimizer=SGD(lr=0.1, momentum=0.9))
    compare_step(m, (x,), (y,), _ref_ce_dim1, SGD(lr=0.1, momentum=0.9), ts=ts)


def test_segmentation_probability_targets_step_matches_torch():
    torch.manual_seed(1)
    m, x = Seg(), torch.randn(2, 3, 4, 5)
    y = torch.softmax(torch.randn(2, 4, 4, 5), 1)
    ts = from_torch(m, (x,), (y,), loss="cross_entropy", optimizer=SGD(lr=0.1))
    compare_step(m, (x,), (y,), _ref_ce_dim1, SGD(lr=0.1), ts=ts)


def test_language_model_step_matches_torch():
    torch.manual_seed(0)
    m, ids = TinyLM(), torch.randint(0, 23, (2, 7))
    y = torch.randint(0, 23, (2, 7))
    ts = from_torch(m, (ids,), (y,), loss="cross_entropy", optimizer=Adam(lr=1e-2))
    compare_step(m, (ids,), (y,), _ref_ce_last, Adam(lr=1e-2), ts=ts)


def test_ambiguous_shapes_refused_before_tvm():
    m = TinyLM(vocab=7)  # logits [2, 7, 7] with [2, 7] targets: dim 1 and the last dim both fit
    with pytest.raises(LossShapeError, match="ambiguous.*callable"):
        from_torch(m, (torch.randint(0, 7, (2, 7)),), (torch.randint(0, 7, (2, 7)),))


def test_loss_callable_resolves_ambiguity():
    torch.manual_seed(0)
    m, ids, y = TinyLM(vocab=7), torch.randint(0, 7, (2, 7)), torch.randint(0, 7, (2, 7))

    def lm_loss(out, t):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))

    ts = from_torch(m, (ids,), (y,), loss=lm_loss, optimizer=SGD(lr=0.1))
    compare_step(m, (ids,), (y,), _ref_ce_last, SGD(lr=0.1), ts=ts)
