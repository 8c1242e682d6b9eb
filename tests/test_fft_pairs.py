"""Fourier transforms traced as real matrix products on (re, im) pairs (fft_pairs.py, through
complex_pairs.py): FNet-style token mixing imports, and one SGD step matches PyTorch's (which runs
a real FFT) in float64, also where ``n`` / ``s`` zero-pads or trims the signal first."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import SGD  # noqa: E402
from test_numerics import compare_step  # noqa: E402

B, T, D = 2, 5, 6


class Mixer(torch.nn.Module):
    def __init__(self, n=None):
        super().__init__()
        self.lin, self.head, self.n = torch.nn.Linear(D, D), torch.nn.Linear(D, 3), n
        self.filter = torch.nn.Parameter(torch.randn(T, D // 2 + 1, 2))  # a global filter (GFNet)

    def forward(self, x):
        h = self.lin(x)
        if self.n is not None:
            return self.head(torch.fft.fft(h, n=self.n, dim=1).real.mean(1))
        mixed = torch.fft.fftn(h, dim=(1, 2)).real  # FNet
        mixed = mixed + torch.fft.fft(h, dim=1, norm="ortho").imag + torch.fft.fft2(h, norm="forward").real
        mixed = mixed + torch.fft.fft(torch.fft.fft(h, dim=-1), dim=1).imag  # a transform of a transform
        spec = torch.fft.rfft2(h, dim=(1, 2), norm="ortho") * torch.view_as_complex(self.filter)
        mixed = mixed + torch.fft.irfft2(spec, s=(T, D), dim=(1, 2), norm="ortho")  # GFNet's filter
        mixed = mixed + torch.fft.ifft(torch.fft.rfft(h, dim=1), dim=2).real.sum(1, keepdim=True)
        return self.head(torch.tanh(mixed).mean(1))


def test_fft_mixing_step_matches_torch():
    torch.manual_seed(0)
    m = Mixer().double()
    x = torch.randn(B, T, D, dtype=torch.float64)
    compare_step(m, (x,), (torch.randint(0, 3, (B,)),), "cross_entropy", SGD(lr=1.0), dtype="float64")


@pytest.mark.parametrize("n", [8, 3])
def test_padded_and_trimmed_signals_step_matches_torch(n):
    # fft(h, n) zero-pads (8 > T) or trims (3 < T) along time first; Autoformer's rfft(q, n=T) of a
    # shorter q, times conj(rfft(k)), back through irfft
    class Resized(Mixer):
        def forward(self, x):
            h = self.lin(x)
            out = torch.fft.fft(h, n=self.n, dim=1).real.mean(1)
            out = out + torch.fft.fft2(h, s=(self.n, 4)).imag.mean((1, 2))[:, None]
            q, k = torch.fft.rfft(h[:, :3], n=T, dim=1), torch.fft.rfft(h, n=T, dim=1)
            corr = torch.fft.irfft(q * torch.conj(k), n=T, dim=1)
            return self.head(out + corr.mean(1))

    torch.manual_seed(0)
    m = Resized(n=n).double()
    x = torch.randn(B, T, D, dtype=torch.float64)
    compare_step(m, (x,), (torch.randint(0, 3, (B,)),), "cross_entropy", SGD(lr=1.0), dtype="float64")
