"""Discrete Fourier transforms (``torch.fft.fft`` / ``fft2`` / ``fftn``) as real matrix products on
(re, im) pairs, for :mod:`.complex_pairs`.

TVM's importer has neither complex dtypes nor an FFT (FNet's token mixing, ``torch.fft.fftn(x,
dim=(1, 2)).real``, stopped with "Unsupported function types ['_fft_c2c.default', ...]"). Along one
dim of length ``n`` the transform is ``Y = (C - iS) X`` with ``C[j, k] = cos(2 pi j k / n)`` and
``S[j, k] = sin(2 pi j k / n)``; on pairs ``X = a + ib``: ``Re Y = C a + S b``, ``Im Y = C b - S a``.
These are ``n x n`` products per transformed dim (an FFT's ``n log n`` is not needed for the
memory plan, and their gradients are matmul gradients). ``norm`` scales as PyTorch does.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import UnsupportedError

__all__ = ["dft", "FFT_NAMES"]

FFT_NAMES = ("fft", "fft2", "fftn")
_SCALE = {None: lambda n: 1.0, "backward": lambda n: 1.0, "ortho": lambda n: 1.0 / math.sqrt(n),
          "forward": lambda n: 1.0 / n}


def _dims(name: str, ndim: int, kwargs: dict, rest: tuple) -> list[int]:
    """The transformed dims of the complex tensor, as ``torch.fft.<name>`` reads its arguments."""
    if name == "fft":
        dim = kwargs.get("dim", rest[1] if len(rest) > 1 else -1)
        return [dim % ndim]
    dim = kwargs.get("dim", rest[1] if len(rest) > 1 else None)
    if dim is None:
        dim = (-2, -1) if name == "fft2" else tuple(range(ndim))
    return [d % ndim for d in ((dim,) if isinstance(dim, int) else dim)]


def _along(a, b, d: int, scale: float):
    """One dim's transform of the pair ``(a, b)`` (``b`` None for a real input)."""
    import torch

    n = int(a.shape[d])
    k = np.arange(n)
    ang = 2.0 * np.pi * (np.outer(k, k) % n) / n  # exact angles for large j * k
    # numpy-built: constants in the exported step, not ops computing them
    c = torch.tensor(np.cos(ang) * scale, dtype=a.dtype)
    s = torch.tensor(np.sin(ang) * scale, dtype=a.dtype)

    def mix(m, t):  # m applied along dim d of t
        return torch.movedim(torch.matmul(m, torch.movedim(t, d, -2)), -2, d)

    if b is None:
        return mix(c, a), -mix(s, a)
    return mix(c, a) + mix(s, b), mix(c, b) - mix(s, a)


def dft(name: str, x, is_pair: bool, args: tuple, kwargs: dict):
    """``torch.fft.<name>(x, ...)`` as a pair tensor ``[..., 2]``; ``x`` a real tensor or a pair one."""
    import torch

    rest = args[1:]
    size = kwargs.get("n", kwargs.get("s", rest[0] if rest else None))
    if size is not None:
        raise UnsupportedError(f"torch.fft.{name} with a signal length (n / s = {size}) is not traced by "
                               "roam-tvm (only the full-length transform); pad or trim the tensor first")
    norm = kwargs.get("norm", rest[2] if len(rest) > 2 else None)
    if norm not in _SCALE:
        raise UnsupportedError(f"torch.fft.{name} with norm={norm!r}: expected backward, ortho or forward")
    ndim = x.dim() - 1 if is_pair else x.dim()
    a, b = (x[..., 0], x[..., 1]) if is_pair else (x, None)
    for d in _dims(name, ndim, kwargs, rest):
        a, b = _along(a, b, d, _SCALE[norm](a.shape[d]))
    return torch.stack([a, b], -1)
