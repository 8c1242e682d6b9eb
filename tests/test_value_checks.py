"""Value checks in a forward (``frontend/value_checks.py``): ``assert`` / ``if ...: raise`` on tensor values,
as in F.gaussian_nll_loss (``var < 0``) and Hugging Face's CTC heads (labels against the vocabulary), are
decided on the example eagerly and left out of the traced step. A branch between two computations on a
value is still refused, and so is a check the example fails."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from roam_tvm.frontend.errors import FrontendError  # noqa: E402

from test_numerics import compare_step  # noqa: E402

F = nn.functional


class _Checked(nn.Module):
    """An assert, an ``if ...: raise`` spread over two lines, and F.gaussian_nll_loss's own check; a
    batch norm whose running statistics the eager recording run must not move."""

    def __init__(self):
        super().__init__()
        self.norm, self.body = nn.BatchNorm1d(6), nn.Linear(6, 2)

    def forward(self, x):
        assert torch.isfinite(x).all(), "non-finite input"
        h = self.norm(x)
        if (h.abs() > 1e6).any() or \
                torch.isnan(h).any():
            raise ValueError("activations blew up")
        mu, raw = self.body(h).unbind(-1)
        return torch.stack([mu, F.softplus(raw) + 1e-3], -1)


def _gaussian_nll(out, y):
    return F.gaussian_nll_loss(out[:, 0], y, out[:, 1])


def _data(n=8):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(n, 6, generator=g),), (torch.randn(n, generator=g),)


def test_checks_are_left_out_and_the_step_matches_pytorch():
    torch.manual_seed(0)
    model = _Checked()
    inputs, targets = _data()
    before = model.norm.running_mean.clone(), model.norm.num_batches_tracked.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ts = from_torch(model, inputs, targets, loss=_gaussian_nll, optimizer=Adam(lr=0.01))
    said = " ".join(str(w.message) for w in caught)
    assert "checks tensor values in Python" in said and "functional.py" in said
    # the recording run restored the buffers it moved
    assert torch.equal(model.norm.running_mean, before[0]) and torch.equal(model.norm.num_batches_tracked, before[1])
    compare_step(model, inputs, targets, _gaussian_nll, Adam(lr=0.01), ts=ts)


class _Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 2), nn.Linear(6, 2)

    def forward(self, x):
        if x.sum() > 0:  # two computations: specialising to the example would be wrong
            return self.a(x)
        return self.b(x)


def test_a_value_branch_is_still_refused():
    inputs, _ = _data()
    with pytest.raises(FrontendError, match="data-dependent|tensor values"):
        from_torch(_Branch(), inputs, (torch.randn(8, 2),), loss="mse")


class _Failing(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 2)

    def forward(self, x):
        if (x > 0).all():
            raise ValueError("expected some negative inputs")
        return self.lin(x)


def test_a_check_the_example_fails_is_an_error():
    with pytest.raises(FrontendError, match="expected some negative inputs"):
        from_torch(_Failing(), (torch.rand(8, 6),), (torch.randn(8, 2),), loss="mse")


class _ClampsData(nn.Module):
    """Gemma3n's AltUp: a parameter clipped through ``.data`` inside the forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 2, bias=False)

    def forward(self, x):
        if self.training:
            self.lin.weight.data.clamp_(-10.0, 10.0)
        return self.lin(x)


def test_a_parameter_written_through_data_names_the_way_out():
    from roam_tvm.frontend.errors import TraceError

    with pytest.raises(TraceError, match=r"writes a parameter through \.data.*after the\s+optimizer step"):
        from_torch(_ClampsData(), (torch.randn(4, 6),), (torch.randn(4, 2),), loss="mse")
