"""``Tensor.scatter_reduce`` (``aten.scatter_reduce.two``, scatter_reduce.py) and its gradients
(grad_index.py): every ``reduce`` x ``include_self`` on 2-D and 3-D tensors with ``dim != 0``
and duplicate indices, ties among maxima, exact zeros in a product, and TAPAS's integer segment
minimum. Each is a whole step against torch autograd (float64 with SGD(lr=1): the update is
minus the gradient)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402

N, D = 4, 12
REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _idx(*v):
    return torch.tensor(v, dtype=torch.int64)


def _flat(h, inc):
    # 2-D, dim=1: positions 0, 2, 5 receive duplicates, 1, 3, 4 nothing
    idx = _idx(0, 2, 2, 5, 2, 0).expand(N, 6)
    return [h[:, :6].scatter_reduce(1, idx, h[:, 6:] * 1.5, r, include_self=inc) for r in REDUCES]


def _cube(h, inc):
    # 3-D, dim=1 and dim=2 (torch's backward needs src of the index's shape)
    x = h.reshape(N, 3, 4)
    i1 = _idx(2, 0, 2, 2).reshape(1, 1, 4).expand(N, 2, 4)
    i2 = _idx(3, 3, 1).reshape(1, 1, 3).expand(N, 3, 3)
    return [x.scatter_reduce(1, i1, x.flip(2)[:, 1:] * 0.7, r, include_self=inc) for r in REDUCES] + [
        x.scatter_reduce(2, i2, x[..., 1:] * -1.3, r, include_self=inc) for r in REDUCES]


class _Net(torch.nn.Module):
    """``l1`` -> each scatter_reduce of the hidden state -> ``l2``; ``z`` is exactly 0."""

    def __init__(self, ops):
        super().__init__()
        self.l1 = torch.nn.Linear(D, D)
        self.z = torch.nn.Parameter(torch.zeros(2))
        self.ops = ops
        self.l2 = torch.nn.LazyLinear(3)

    def forward(self, x):
        h = self.l1(x) + 0.0 * self.z.sum()
        outs = [o for op in self.ops for o in op(self, h)]
        return self.l2(torch.cat([o.reshape(N, -1) for o in outs], 1))


def _ties(m, h):
    # amax / amin ties: src repeats itself and, with include_self, self's own value
    src = torch.cat([h[:, :3], h[:, :3]], 1)
    idx = _idx(0, 1, 1, 0, 1, 1).expand(N, 6)
    return [h[:, :2].scatter_reduce(1, idx, src, r, include_self=True) for r in ("amax", "amin")] + [
        h[:, 6:8].scatter_reduce(1, idx, src, r, include_self=False) for r in ("amax", "amin")]


def _zeros(m, h):
    # products with exact zeros that still get a gradient (z): one zero at a position, two,
    # and a zero self
    z = m.z.expand(N, 2)
    src = torch.cat([h[:, :3], z], 1)
    idx = _idx(0, 1, 1, 0, 2).expand(N, 5)
    base = torch.cat([z[:, :1], h[:, 5:7]], 1)
    return [base.scatter_reduce(1, idx, src, "prod", include_self=inc) for inc in (True, False)]


def _step(ops):
    torch.manual_seed(0)
    m = _Net(ops).double()
    x = torch.randn(N, D, dtype=torch.float64)
    m(x)  # materialise the lazy layer
    compare_step(m, (x,), (torch.randint(0, 3, (N,)),), "cross_entropy", SGD(lr=1.0),
                 dtype="float64")


@pytest.mark.parametrize("include_self", [True, False])
def test_every_reduce_2d_and_3d(include_self):
    _step([lambda m, h: _flat(h, include_self), lambda m, h: _cube(h, include_self)])


def test_ties_and_zeros():
    _step([_ties, _zeros])


class _SegmentMin(torch.nn.Module):
    """TAPAS: each token's offset from its segment's first position, an integer
    ``scatter_reduce('amin', include_self=False)`` (no gradient), then embedded."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(8, 6)
        self.pos = torch.nn.Embedding(8, 6)
        self.head = torch.nn.Linear(6, 5)

    def forward(self, ids, seg):
        pos = torch.arange(8).expand(2, 8)
        first = torch.full((2, 4), 99, dtype=torch.int64).scatter_reduce(
            1, seg, pos, "amin", include_self=False)
        e = self.emb(ids)
        mean = torch.zeros(2, 4, 6, dtype=e.dtype).scatter_reduce(
            1, seg[..., None].expand(2, 8, 6), e, "mean", include_self=True)
        return self.head(self.pos(pos - first.gather(1, seg)) + mean.gather(
            1, seg[..., None].expand(2, 8, 6)))


def test_integer_segment_min_float32():
    torch.manual_seed(0)
    seg = torch.tensor([[0, 0, 1, 1, 1, 3, 3, 3], [0, 1, 1, 1, 2, 2, 3, 3]])
    ids = torch.randint(0, 8, (2, 8))
    compare_step(_SegmentMin(), (ids, seg), (torch.randn(2, 8, 5),), "mse", SGD(lr=0.05))



class _ExcludedTie(torch.nn.Module):
    """``include_self=False`` where the excluded self equals the result. PyTorch's backward still
    counts it among the ties (grad_index.py's docstring); the reference is the same function
    written with ``include_self=True`` on a self of -inf / +inf, whose backward PyTorch gets
    right."""

    def __init__(self, reference: bool):
        super().__init__()
        self.l1 = torch.nn.Linear(D, D)
        self.l2 = torch.nn.Linear(4, 3)
        self.reference = reference

    def forward(self, x):
        h = self.l1(x)
        src = torch.cat([h[:, :3], h[:, :3]], 1)
        idx = _idx(0, 1, 1, 0, 1, 1).expand(N, 6)
        outs = []
        for r, edge in (("amax", float("-inf")), ("amin", float("inf"))):
            if self.reference:
                outs.append(torch.full_like(h[:, :2], edge).scatter_reduce(1, idx, src, r))
            else:
                outs.append(h[:, :2].scatter_reduce(1, idx, src, r, include_self=False))
        return self.l2(torch.cat(outs, 1))


def test_excluded_self_tie_is_not_counted():
    from roam_tvm.frontend import from_torch

    torch.manual_seed(0)
    m = _ExcludedTie(False).double()
    x = torch.randn(N, D, dtype=torch.float64)
    ins, tgs = (x,), (torch.randint(0, 3, (N,)),)
    ts = from_torch(m, ins, tgs, loss="cross_entropy", optimizer=SGD(lr=1.0))
    m.reference = True
    compare_step(m, ins, tgs, "cross_entropy", SGD(lr=1.0), dtype="float64", ts=ts)
