"""Discrete Fourier transforms (``torch.fft``: ``fft``, ``ifft``, ``rfft``, ``irfft`` and their ``2`` /
``n`` forms) as real matrix products on (re, im) pairs, for :mod:`.complex_pairs`.

TVM's importer has neither complex dtypes nor an FFT (FNet's token mixing, ``torch.fft.fftn(x,
dim=(1, 2)).real``, stopped with "Unsupported function types ['_fft_c2c.default', ...]"). Along one
dim of length ``n`` the transform is ``Y = (C -/+ iS) X`` with ``C[j, k] = cos(2 pi j k / n)`` and
``S[j, k] = sin(2 pi j k / n)`` (minus forward, plus inverse); on pairs ``X = a + ib`` the forward one is
``Re Y = C a + S b``, ``Im Y = C b - S a``. ``rfft`` keeps the first ``n // 2 + 1`` rows; ``irfft`` of
``m`` coefficients to ``n`` real values is ``C' a - S' b``, each coefficient but the first (and the
Nyquist one for even ``n``) counted twice for its conjugate twin. These are dense products per
transformed dim (an FFT's ``n log n`` does not matter to the memory plan; their gradients are matmul
gradients). ``norm`` scales as PyTorch does; ``n`` / ``s`` other than a signal's length trim or zero-pad
it first, as PyTorch does (Autoformer's ``rfft(q, n=T)`` of a shorter ``q``).
"""
from __future__ import annotations

import math

import numpy as np

from .errors import UnsupportedError

__all__ = ["dft", "FFT_NAMES"]

FFT_NAMES = ("fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn",
             "irfftn")


def _scale(norm, n: int, inverse: bool) -> float:
    if norm not in (None, "backward", "ortho", "forward"):
        raise UnsupportedError(f"torch.fft norm={norm!r}: expected 'backward', 'ortho' or 'forward'")
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    divides = (norm == "forward") != inverse  # backward: the inverse divides; forward: the transform
    return 1.0 / n if divides else 1.0


def _arg(args: tuple, kwargs: dict, pos: int, name: str, default=None):
    return kwargs[name] if name in kwargs else (args[pos] if len(args) > pos else default)


def _parse(name: str, ndim: int, args: tuple, kwargs: dict):
    """``(dims, sizes, norm)`` as ``torch.fft.<name>(x, n|s, dim, norm)`` reads them."""
    one = not name.endswith(("2", "n"))
    size = _arg(args, kwargs, 1, "n" if one else "s")
    dim = _arg(args, kwargs, 2, "dim", -1 if one else None)
    if dim is None:
        dim = (-2, -1) if name.endswith("2") else tuple(range(ndim))
    dims = [d % ndim for d in ((dim,) if isinstance(dim, int) else dim)]
    sizes = [size] if one and size is not None else (list(size) if size is not None else [None] * len(dims))
    return dims, sizes, _arg(args, kwargs, 3, "norm")


def _torch_const(m, like):
    import torch

    return torch.tensor(m, dtype=like.dtype)  # numpy-built: a constant in the exported step


def _mix(m, t, d: int):
    """The matrix ``m`` applied along dim ``d`` of ``t``."""
    import torch

    return torch.movedim(torch.matmul(m, torch.movedim(t, d, -2)), -2, d)


def _angles(rows: int, cols: int, n: int) -> np.ndarray:
    j, k = np.arange(rows), np.arange(cols)
    return 2.0 * np.pi * (np.outer(j, k) % n) / n  # exact angles for large j * k


def _complex_along(a, b, d: int, inverse: bool, rows: int, scale: float, n: int):
    """Length-``n`` (I)DFT along ``d`` of ``a + ib`` (``b`` None: real), keeping the first ``rows`` outputs.
    A signal longer than ``n`` is trimmed; a shorter one is zero-padded by the matrix having only its
    columns (as ``_irfft_along`` takes fewer coefficients), so no padded copy is made."""
    if int(a.shape[d]) > n:
        a, b = a.narrow(d, 0, n), (None if b is None else b.narrow(d, 0, n))
    ang = _angles(rows, int(a.shape[d]), n)
    c, s = _torch_const(np.cos(ang) * scale, a), _torch_const(np.sin(ang) * scale, a)
    sign = 1.0 if inverse else -1.0  # Y = (C + sign * iS) X
    if b is None:
        return _mix(c, a, d), sign * _mix(s, a, d)
    return _mix(c, a, d) - sign * _mix(s, b, d), _mix(c, b, d) + sign * _mix(s, a, d)


def _irfft_along(a, b, d: int, n: int, norm):
    """``n`` real values from the half spectrum ``a + ib`` along ``d``."""
    m = min(int(a.shape[d]), n // 2 + 1)
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0 and m == n // 2 + 1:
        w[-1] = 1.0  # the Nyquist coefficient has no twin
    ang = _angles(n, m, n)
    scale = _scale(norm, n, True)
    c, s = _torch_const(np.cos(ang) * w * scale, a), _torch_const(np.sin(ang) * w * scale, a)
    if int(a.shape[d]) > m:  # coefficients beyond n // 2 are ignored, as PyTorch does
        a, b = a.narrow(d, 0, m), b.narrow(d, 0, m)
    return _mix(c, a, d) - _mix(s, b, d)


def _lengths(dims, sizes, shape) -> dict[int, int]:
    """Each transformed dim's length: ``n`` / ``s`` where given (the signal trimmed or zero-padded to it, as
    PyTorch does), else the signal's."""
    lengths = {d: int(shape[d]) if sz in (None, -1) else int(sz) for d, sz in zip(dims, sizes)}
    for d, n in lengths.items():
        if n < 1:
            raise UnsupportedError(f"torch.fft signal length {n} on dim {d}: expected a positive length")
    return lengths


def dft(name: str, x, is_pair: bool, args: tuple, kwargs: dict):
    """``torch.fft.<name>(x, ...)``: a pair tensor ``[..., 2]`` (a real tensor for ``irfft*``);
    ``x`` a real tensor or a pair one."""
    import torch

    shape = tuple(x.shape[:-1]) if is_pair else tuple(x.shape)
    dims, sizes, norm = _parse(name, len(shape), args, kwargs)
    a, b = (x[..., 0], x[..., 1]) if is_pair else (x, None)
    base = name.rstrip("2n") if name not in ("fft", "ifft", "rfft", "irfft") else name
    lengths = _lengths(dims, sizes, shape)
    if base == "irfft":  # its last length is the output's (2 * (m - 1) by default)
        b = torch.zeros_like(a) if b is None else b
        for d in dims[:-1]:
            a, b = _complex_along(a, b, d, True, lengths[d], _scale(norm, lengths[d], True), lengths[d])
        last = sizes[-1] if sizes[-1] not in (None, -1) else 2 * (int(a.shape[dims[-1]]) - 1)
        return _irfft_along(a, b, dims[-1], int(last), norm)
    inverse = base == "ifft"
    order = dims[::-1] if base == "rfft" else dims  # rfft halves the last dim first
    for i, d in enumerate(order):
        n = lengths[d]
        rows = n // 2 + 1 if base == "rfft" and i == 0 else n
        a, b = _complex_along(a, b, d, inverse, rows, _scale(norm, n, inverse), n)
    return torch.stack([a, b], -1)
