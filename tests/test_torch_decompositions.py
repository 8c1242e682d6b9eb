"""``nn.Bilinear`` (``aten._trilinear``), ``torch.logcumsumexp``, ``torch.cdist`` (``aten._cdist_forward``),
``Tensor.unfold``, ``torch.erfinv``, ``torch.linalg.solve_triangular``, ``torch.min(x, dim)``, ``torch.lgamma``,
``torch.digamma`` and ``torch.cumprod``: TVM 0.27 has no converter for the first nine and no gradient for
``relax.cumprod``;
each is decomposed at the torch level (``frontend/torch_decompositions.py``). The decompositions against
torch's ops (values, gradients, zeros in a product, a range of 500 in a log-sum, zero distances), and
whole steps against PyTorch's."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from roam_tvm.frontend.torch_decompositions import (_cdist, _cumprod, _digamma, _erfinv, _lgamma,  # noqa: E402
                                                     _logcumsumexp, _min_dim, _solve_triangular, _trilinear,
                                                     _unfold)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_matches_torch_over_a_wide_range(dim):
    x = torch.randn(3, 9, 4, dtype=torch.float64) * 50
    x[0, 0, 0] = -500.0  # exp underflows against the maximum: a global shift would give -inf
    x.requires_grad_()
    assert torch.allclose(_logcumsumexp(x, dim), torch.logcumsumexp(x, dim))
    assert torch.autograd.gradcheck(lambda t: _logcumsumexp(t, dim), (x,))


def test_cumprod_gradient_with_zeros():
    x = torch.randn(3, 9, dtype=torch.float64)
    x[1, 3] = x[2, 2] = x[2, 5] = 0.0
    x.requires_grad_()
    g = torch.randn(3, 9, dtype=torch.float64)
    ours = torch.autograd.grad((_cumprod(x, 1) * g).sum(), x)[0]
    theirs = torch.autograd.grad((torch.cumprod(x, 1) * g).sum(), x)[0]
    assert torch.allclose(_cumprod(x, 1), torch.cumprod(x, 1))
    assert torch.allclose(ours, theirs)
    ints = torch.arange(1, 7, dtype=torch.int32)
    assert _cumprod(ints, 0).dtype == torch.cumprod(ints, 0).dtype
    assert torch.equal(_cumprod(ints, 0), torch.cumprod(ints, 0))


@pytest.mark.parametrize("shapes, e1, e2, e3, sumdim", [
    ([(5, 4), (3, 4, 6), (5, 6)], [1, 3], [0], [1, 2], [2, 3]),  # F.bilinear's call
    ([(2, 3)] * 3, [], [], [], [1]),
    ([(3, 4), (2, 4), (2, 3)], [0], [1], [2], []),
])
def test_trilinear_matches_aten(shapes, e1, e2, e3, sumdim):
    i1, i2, i3 = (torch.randn(*s) for s in shapes)
    theirs = torch.ops.aten._trilinear(i1, i2, i3, e1, e2, e3, sumdim)
    ours = _trilinear(i1, i2, i3, e1, e2, e3, sumdim)
    assert ours.shape == theirs.shape and torch.allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, 3.0, float("inf")])
def test_cdist_matches_torch_with_zero_distances(p):
    a = torch.randn(2, 5, 3, dtype=torch.float64)
    b = torch.randn(2, 4, 3, dtype=torch.float64)
    b[:, 0] = a[:, 1]  # a zero distance
    b[:, 2, 0] = a[:, 3, 0]  # a zero difference in one coordinate
    a.requires_grad_()
    b.requires_grad_()
    theirs = torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")
    ours = _cdist(a, b, p)
    assert torch.allclose(ours, theirs)
    g = torch.randn_like(theirs)
    for x, y in zip(torch.autograd.grad((ours * g).sum(), (a, b)), torch.autograd.grad((theirs * g).sum(), (a, b))):
        assert torch.allclose(x, y) and not x.isnan().any()


@pytest.mark.parametrize("shape, dim, size, step", [((2, 10, 3), 1, 4, 2), ((2, 10, 3), -2, 3, 3),
                                                    ((5,), 0, 2, 1), ((4, 6), 0, 2, 3)])
def test_unfold_matches_torch(shape, dim, size, step):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    theirs, ours = x.unfold(dim, size, step), _unfold(x, dim, size, step)
    assert ours.shape == theirs.shape and torch.equal(ours, theirs)
    g = torch.randn_like(theirs)  # overlapping windows: the gradient sums
    assert torch.allclose(torch.autograd.grad((ours * g).sum(), x)[0], torch.autograd.grad((theirs * g).sum(), x)[0])


@pytest.mark.parametrize("n", [1, 2, 7, 64])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular_matches_torch(n, upper, left, unitriangular):
    a = torch.randn(2, n, n, dtype=torch.float64) * 0.3 + 2 * torch.eye(n, dtype=torch.float64)
    a = (a.triu() if upper else a.tril()).requires_grad_()
    b = torch.randn(2, n, 3, dtype=torch.float64) if left else torch.randn(2, 3, n, dtype=torch.float64)
    kw = dict(upper=upper, left=left, unitriangular=unitriangular)
    theirs, ours = torch.linalg.solve_triangular(a, b, **kw), _solve_triangular(a, b, **kw)
    assert torch.allclose(ours, theirs, atol=1e-9)
    if n == 1 and unitriangular:
        return  # the solve reads nothing of a
    g = torch.randn_like(theirs)
    mask = torch.ones(n, n, dtype=torch.float64).triu() if upper else torch.ones(n, n, dtype=torch.float64).tril()
    if unitriangular:
        mask = mask - torch.eye(n, dtype=torch.float64)
    ga, gb = (torch.autograd.grad((t * g).sum(), a)[0] * mask for t in (ours, theirs))  # the read triangle
    assert torch.allclose(ga, gb, atol=1e-8)


def test_erfinv_matches_torch():
    x = torch.linspace(-0.999999, 0.999999, 20001)
    assert (torch.erfinv(x) - _erfinv(x)).abs().max() < 1e-6
    edges = torch.tensor([1.0, -1.0, 0.0, 1.5])
    assert torch.equal(_erfinv(edges).isnan(), torch.erfinv(edges).isnan())
    assert torch.equal(_erfinv(edges)[:3], torch.erfinv(edges)[:3])
    x64 = torch.linspace(-0.99, 0.99, 11, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(_erfinv, (x64,))


def _gamma_points(dtype) -> torch.Tensor:
    """Positive arguments from near 0 to 1e4, negative ones between the poles, the integers 1-3."""
    x = torch.cat([torch.linspace(1e-3, 60, 4001), torch.linspace(-7.9, -0.05, 2001),
                   torch.tensor([1.0, 2.0, 3.0, 0.5, 1e-6, 1e4])]).to(dtype)
    return x[((x - x.round()).abs() > 1e-3) | (x > 0)]


@pytest.mark.parametrize("ours, theirs", [(_lgamma, torch.lgamma), (_digamma, torch.digamma)])
def test_lgamma_digamma_match_torch(ours, theirs):
    x = _gamma_points(torch.float64)
    exact = theirs(x)
    assert ((ours(x) - exact).abs() / (exact.abs() + 1)).max() < 1e-9
    x32 = x.float()  # float32: within a few rounding steps of the float64 value
    assert ((ours(x32).double() - theirs(x32.double())).abs() / (exact.abs() + 1)).max() < 2e-5
    poles = torch.tensor([0.0, -1.0, -3.0])
    assert torch.equal(_lgamma(poles), torch.lgamma(poles))  # +inf at the poles


def test_lgamma_gradient_is_digamma():
    x = _gamma_points(torch.float64)[::50].clone().requires_grad_()
    grad = torch.autograd.grad(_lgamma(x).sum(), x)[0]
    assert torch.allclose(grad, torch.digamma(x.detach()), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("keepdim", [False, True])
def test_min_dim_picks_the_first_minimum_and_routes_its_gradient(keepdim):
    x = torch.tensor([[3.0, 1.0, 1.0], [0.0, 5.0, -1.0]], requires_grad=True)  # a tie in row 0
    value, index = _min_dim(x, 1, keepdim)
    ref_value, ref_index = torch.min(x, 1, keepdim)
    assert torch.equal(value, ref_value) and torch.equal(index, ref_index)
    g = torch.tensor([[2.0], [3.0]]) if keepdim else torch.tensor([2.0, 3.0])
    ours = torch.autograd.grad((value * g).sum(), x)[0]
    theirs = torch.autograd.grad((ref_value * g).sum(), x)[0]
    assert torch.equal(ours, theirs)  # all of it to the first of the tied minima


class _StudentHead(nn.Module):
    """A time-series distribution head: Student-t parameters from a linear layer; its NLL (lgamma of the
    degrees of freedom) is the loss."""

    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x):
        df, loc, scale = self.head(torch.tanh(self.body(x))).unbind(-1)
        return torch.stack([2.0 + nn.functional.softplus(df), loc, nn.functional.softplus(scale) + 1e-3], -1)


def _student_nll(params, y):
    df, loc, scale = params.unbind(-1)
    return -torch.distributions.StudentT(df, loc, scale).log_prob(y).mean()


class _MinPool(nn.Module):
    """TimesFM-style: a per-patch minimum (``torch.min(x, dim)``) and its index's embedding."""

    def __init__(self):
        super().__init__()
        self.proj, self.where, self.out = nn.Linear(4, 6), nn.Embedding(6, 6), nn.Linear(6, 2)

    def forward(self, x):
        low, at = torch.min(self.proj(x), dim=-1)
        return self.out(torch.relu(low.unsqueeze(-1) + self.where(at))).mean(1)


class _AutoCorrelation(nn.Module):
    """Autoformer's period attention: ``irfft(rfft(q) * conj(rfft(k)))`` over time, scaled by 1 / T."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.out = nn.Linear(3, 4), nn.Linear(3, 4), nn.Linear(4, 1)

    def forward(self, x):  # [B, T, C]
        t = x.shape[1]
        q, k = torch.fft.rfft(self.q(x), dim=1), torch.fft.rfft(self.k(x), dim=1)
        corr = torch.fft.irfft(q * torch.conj(k) / t, n=t, dim=1)
        return self.out(torch.tanh(corr) * self.q(x)).squeeze(-1)


class _Probit(nn.Module):
    """Gemma-3n's sparsity threshold (``Normal(0, 1).icdf`` of a constant) and erfinv on activations."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(5, 6), nn.Linear(6, 2)

    def forward(self, x):
        h = self.a(x)
        cut = torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(0.8))
        return self.b(torch.relu(h - cut * h.std(-1, keepdim=True)) + torch.erfinv(0.9 * torch.tanh(h)))


class _Patches(nn.Module):
    """PatchTST-style: overlapping patches of a series, embedded and pooled."""

    def __init__(self):
        super().__init__()
        self.embed, self.head = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):  # [B, T, C]
        patches = x.unfold(1, 4, 2)  # [B, n, C, 4]
        return self.head(torch.relu(self.embed(patches)).mean((1, 2)))


class _Cumulative(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.gate, self.out = nn.Linear(5, 6), nn.Linear(6, 6), nn.Linear(12, 1)

    def forward(self, x):
        h = self.inp(x)
        decay = torch.sigmoid(self.gate(h)).cumprod(dim=1)
        return self.out(torch.cat([decay * h, torch.logcumsumexp(h * 3, dim=1)], -1)).squeeze(-1)


class _Bilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.bil, self.out = nn.Linear(5, 4), nn.Bilinear(4, 3, 6), nn.Linear(6, 2)

    def forward(self, x, y):
        return self.out(torch.tanh(self.bil(self.a(x), y)))


class _Distances(nn.Module):
    """A contrastive-style loss on ``cdist(e, e)`` (zero diagonal) and a VQ's L1 codebook distances."""

    def __init__(self):
        super().__init__()
        self.enc, self.codes = nn.Linear(5, 4), nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        e = self.enc(x)
        return torch.cat([torch.cdist(e, e), torch.cdist(e, self.codes, p=1.0)], -1)


@pytest.mark.parametrize("case", ["cumulative", "bilinear", "distances", "patches", "probit", "student_t",
                                  "min_dim", "autocorrelation"])
def test_steps_match_pytorch(case):
    pytest.importorskip("tvm")
    from roam_tvm.frontend import Adam
    from test_numerics import compare_step

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    if case == "cumulative":
        model, inputs = _Cumulative(), (torch.randn(2, 7, 5, generator=g),)
        targets = (torch.randn(2, 7, generator=g),)
    elif case == "bilinear":
        model, inputs = _Bilinear(), (torch.randn(6, 5, generator=g), torch.randn(6, 3, generator=g))
        targets = (torch.randint(0, 2, (6,), generator=g),)
    elif case == "distances":
        model, inputs = _Distances(), (torch.randn(7, 5, generator=g),)
        targets = (torch.randn(7, 13, generator=g),)
    elif case == "patches":
        model, inputs = _Patches(), (torch.randn(3, 11, 2, generator=g),)
        targets = (torch.randint(0, 2, (3,), generator=g),)
    elif case == "student_t":
        model, inputs = _StudentHead(), (torch.randn(6, 5, generator=g),)
        targets = (torch.randn(6, generator=g) * 2,)
    elif case == "min_dim":
        model, inputs = _MinPool(), (torch.randn(3, 5, 4, generator=g),)
        targets = (torch.randint(0, 2, (3,), generator=g),)
    elif case == "autocorrelation":
        model, inputs = _AutoCorrelation(), (torch.randn(2, 8, 3, generator=g),)
        targets = (torch.randn(2, 8, generator=g),)
    else:
        model, inputs = _Probit(), (torch.randn(6, 5, generator=g),)
        targets = (torch.randint(0, 2, (6,), generator=g),)
    loss = {"student_t": _student_nll}.get(case, "mse" if case in ("cumulative", "distances", "autocorrelation")
                                           else "cross_entropy")
    compare_step(model, inputs, targets, loss, Adam(lr=0.01))
