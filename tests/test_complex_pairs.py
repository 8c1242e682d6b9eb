"""Complex rotary embeddings (roam_tvm/frontend/complex_pairs.py): Meta-LLaMA-style ``torch.polar`` /
``view_as_complex`` / ``view_as_real`` RoPE traced as real pairs. The rotation matches PyTorch's complex
arithmetic; a tiny Meta-style attention block is planned by roam (order + layout, llvm) and one SGD step's
gradients match torch.autograd run in real complex numbers; an unhandled complex op is named."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

import numpy as np  # noqa: E402
from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend.complex_pairs import complex_as_pairs  # noqa: E402
from roam_tvm.frontend.errors import UnsupportedError  # noqa: E402


def _freqs(dim, end):
    f = torch.outer(torch.arange(end, dtype=torch.float32), 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))
    return torch.polar(torch.ones_like(f), f)


def _rope(x, freqs_cis):  # x: [B, T, H, D]
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    assert freqs_cis.shape == (x.shape[1], xc.shape[-1])
    fc = freqs_cis.view(1, x.shape[1], 1, xc.shape[-1]) * 0.5
    return torch.view_as_real(xc * fc).flatten(3).type_as(x)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.q, self.k, self.v, self.o = (nn.Linear(16, 16, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, _ = x.shape
        fc = _freqs(8, 16)[:t]
        q, k, v = (_rope(w(x).view(b, t, 2, 8), fc) if w is not self.v else w(x).view(b, t, 2, 8)
                   for w in (self.q, self.k, self.v))
        att = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", q, k) / 8 ** 0.5, -1)
        return self.o(torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, 16))


def test_rotation_matches_complex_arithmetic():
    x = torch.randn(2, 5, 3, 8)
    want = _rope(x, _freqs(8, 5))
    with complex_as_pairs():
        got = _rope(x, _freqs(8, 5))
    assert not got.is_complex() and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_planned_step_matches_complex_autograd():
    from tvm import relax

    from roam_tvm.runtime.build import build

    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(2, 6, 16, generator=g), torch.randn(2, 6, 16, generator=g)
    model = _Block()
    ts = from_torch(model, (x,), (y,), loss="mse", optimizer=SGD(lr=1.0), quiet=True)
    vm = relax.VirtualMachine(build(ts.mod, "llvm", order=True, layout=True, order_time_limit=2.0), tvm.cpu())
    state = ts.initial_values()
    before = {k: v.copy() for k, v in state.items()}
    loss = ts.run(vm, [x.numpy()], [y.numpy()], state)
    ref = nn.functional.mse_loss(model(x), y)  # PyTorch's own complex kernels and their gradients
    ref.backward()
    assert abs(float(loss) - float(ref)) <= 1e-5 * float(ref)
    grads = dict(model.named_parameters())
    for n in ts.param_names:
        want = grads[n.removeprefix("model.")].grad.double().numpy()
        np.testing.assert_allclose(before[n] - state[n], want, rtol=0, atol=1e-5 * np.abs(want).max(), err_msg=n)


def test_unhandled_complex_op_is_named():
    class Exp(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return torch.view_as_real(torch.exp(torch.view_as_complex(self.lin(x).view(2, 4, 2)))).sum()

    with pytest.raises(UnsupportedError, match="complex tensor reaches exp.*Way out"):
        from_torch(Exp(), (torch.randn(2, 8),), (), loss=lambda out: out, quiet=True)


class _HeldFreqs(_Block):
    """The frequencies made once in ``__init__``: a buffer (persistent or not) or, as in Meta's reference
    LLaMA, a plain attribute that ``forward`` moves to the input's device and assigns back."""

    def __init__(self, held: str):
        super().__init__()
        self.held = held
        if held == "attribute":
            self.freqs_cis = _freqs(8, 16)
        else:
            self.register_buffer("freqs_cis", _freqs(8, 16), persistent=held == "buffer")

    def forward(self, x):
        b, t, _ = x.shape
        if self.held == "attribute":
            self.freqs_cis = self.freqs_cis.to(x.device)
        fc = self.freqs_cis[:t]
        q, k, v = (_rope(w(x).view(b, t, 2, 8), fc) if w is not self.v else w(x).view(b, t, 2, 8)
                   for w in (self.q, self.k, self.v))
        att = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", q, k) / 8 ** 0.5, -1)
        return self.o(torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, 16))


@pytest.mark.parametrize("held", ["buffer", "non_persistent_buffer", "attribute"])
def test_complex_state_made_in_init(held):
    from test_numerics import compare_step

    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(2, 6, 16, generator=g), torch.randn(2, 6, 16, generator=g)
    model = _HeldFreqs(held)
    cls, before = type(model), model.freqs_cis
    compare_step(model, (x,), (y,), "mse", SGD(lr=1.0))
    assert type(model) is cls and model.freqs_cis is before and model.freqs_cis.is_complex()  # restored
    assert held == "attribute" or "freqs_cis" in dict(model.named_buffers())
