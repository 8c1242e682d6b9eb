"""torch-level decompositions of ops that TVM 0.27's PyTorch importer has no converter for and
``torch.export``'s default table leaves alone, added to the table the frontend decomposes with
(:func:`~roam_tvm.frontend.ep_asserts.decompose_without_asserts`). Each is exact in real arithmetic
and keeps to ops that import and have gradients.

* ``aten._trilinear`` (``nn.Bilinear`` / ``F.bilinear``): one ``einsum`` over the inputs'
  dims, contracted pairwise, rather than the broadcast product of all three, which would hold a
  ``[B, out, in1, in2]`` tensor.
* ``aten.logcumsumexp``: a log-depth scan (Hillis-Steele) of ``log(exp(a) + exp(b)) = a + softplus(b - a)``
  (its backward keeps one tensor per level), padded with the dtype's most negative finite value, so no
  step meets an infinity. Shifting by the global maximum instead would round early terms far below it
  to ``-inf``.
* ``aten.cumprod`` (TVM 0.27's ``relax.cumprod`` has no gradient): the same scan of products,
  padded with ones. Its gradient is exact where inputs are zero, which ``cumsum(g * y) / x``
  would divide by.
* ``aten._cdist_forward`` (``torch.cdist`` where torch does not itself expand it into matrix
  products: a p-norm other than 2, or at most 25 points a side): the p-norm of the broadcast
  differences, whose gradient is zero where a distance is zero, as torch's ``_cdist_backward``
  makes it (``cdist(x, x)``'s diagonal; a plain ``sqrt`` would give NaN there).
* ``aten.erfinv`` (``Normal(0, 1).icdf(p)``: Gemma-3n's activation-sparsity threshold): Giles' single-
  precision approximation, refined by two Newton steps on ``erf``; its gradient is written out,
  ``sqrt(pi) / 2 * exp(y ** 2)``, rather than differentiated through the iterations.
* ``aten.linalg_solve_triangular``: for a lower ``A = D (I - N)`` (``N`` strictly lower, so
  ``N ** n = 0``), ``A^-1 B = (I + N)(I + N^2)(I + N^4) ... D^-1 B``: ``2 log2(n)`` matrix products,
  exact in real arithmetic (upper and right-hand solves by flips and transposes). Gated-DeltaNet decoders
  (Qwen3-Next, Qwen3.5, OLMo-Hybrid) solve their chunk's UT system this way when traced
  (``hf_solve_triangular.py``) instead of a ``chunk``-step substitution loop that copies the system
  at every step.
* ``aten.min.dim`` (``torch.min(x, dim)``: TimesFM's patch statistics): ``argmin``, then ``gather``.
* ``aten.lgamma`` / ``aten.digamma`` (Student-t, negative-binomial, Beta and Gamma likelihoods: the
  time-series transformers' distribution heads): the recurrence up to ``x + 8``, then Stirling's (or the
  digamma) asymptotic series (1e-11 relative in float64, float32 rounding in float32); reflection for ``x <= 0``.
* ``aten.unfold`` (``Tensor.unfold``: PatchTST's and other time-series models' sliding patches): one
  ``index_select`` of every window's positions, its gradient summing where windows overlap.
"""
from __future__ import annotations

import math
import string

import torch

__all__ = ["EXTRA_DECOMPOSITIONS", "with_extra_decompositions"]


def _trilinear(i1: torch.Tensor, i2: torch.Tensor, i3: torch.Tensor, expand1, expand2, expand3, sumdim,
               unroll_dim: int = 1) -> torch.Tensor:
    """``sum over sumdim of unsqueeze(i1, expand1) * unsqueeze(i2, expand2) * unsqueeze(i3, expand3)``."""
    rank = i1.dim() + len(expand1)
    letters = string.ascii_letters[:rank]
    absent = set(expand1) & set(expand2) & set(expand3)  # size 1 in all three

    def subscript(expand) -> str:
        return "".join(c for d, c in enumerate(letters) if d not in set(expand))

    kept = [d for d in range(rank) if d not in set(sumdim)]
    out = "".join(letters[d] for d in kept if d not in absent)
    result = torch.einsum(f"{subscript(expand1)},{subscript(expand2)},{subscript(expand3)}->{out}", i1, i2, i3)
    for pos, d in enumerate(kept):  # a dim no operand has stays, of size 1, unless summed away
        if d in absent:
            result = result.unsqueeze(pos)
    return result


def _log_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log(exp(a) + exp(b))`` as ``a + softplus(b - a)``: stable either way round (softplus is linear
    past its threshold), and its backward keeps one tensor, ``b - a``."""
    return a + torch.nn.functional.softplus(b - a)


def _scan(x: torch.Tensor, dim: int, combine, fill) -> torch.Tensor:
    """Inclusive scan of ``x`` along ``dim`` by ``ceil(log2(n))`` steps, each combining every
    element with the one ``shift`` before it (``fill`` before the start)."""
    if x.dim() == 0:
        return x.clone()
    dim = dim % x.dim()
    n = x.shape[dim]
    out = x
    shift = 1
    while shift < n:
        pad_shape = list(x.shape)
        pad_shape[dim] = shift
        pad = torch.full(pad_shape, fill, dtype=x.dtype, device=x.device)
        out = combine(out, torch.cat([pad, out.narrow(dim, 0, n - shift)], dim=dim))
        shift *= 2
    return out


def _logcumsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``log(cumsum(exp(x), dim))``."""
    return _scan(x, dim, _log_add, torch.finfo(x.dtype).min)


def _cumprod(x: torch.Tensor, dim: int, dtype=None) -> torch.Tensor:
    """``cumprod(x, dim)``."""
    if dtype is None and not (x.is_floating_point() or x.is_complex()):
        dtype = torch.int64  # torch's cumprod of integers and booleans
    if dtype is not None:
        x = x.to(dtype)
    return _scan(x, dim, torch.mul, 1)


def _cdist(x1: torch.Tensor, x2: torch.Tensor, p: float, compute_mode=None) -> torch.Tensor:
    """``[..., P, R]`` p-norm distances between the rows of ``x1`` ``[..., P, M]`` and ``x2`` ``[..., R, M]``."""
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return (diff != 0).to(x1.dtype).sum(-1)
    if p == float("inf"):
        return diff.amax(-1)
    if p == 1:
        return diff.sum(-1)
    powered = _pow_zero_safe(diff, p).sum(-1)
    return _pow_zero_safe(powered, 1.0 / p)


def _pow_zero_safe(x: torch.Tensor, p: float) -> torch.Tensor:
    """``x ** p`` for ``x >= 0``, with gradient zero where ``x`` is zero (for ``p < 1`` the power's
    own gradient is infinite there, and a NaN once multiplied by zero)."""
    positive = x > 0
    powered = torch.where(positive, x, torch.ones_like(x)).pow(p)
    return torch.where(positive, powered, torch.zeros_like(powered))


def _unfold(x: torch.Tensor, dimension: int, size: int, step: int) -> torch.Tensor:
    """``x.unfold(dimension, size, step)``: windows along ``dimension``, each window's elements last."""
    if x.dim() == 0:
        return x.reshape(1)
    dim = dimension % x.dim()
    count = (x.shape[dim] - size) // step + 1
    starts = torch.arange(count, device=x.device) * step
    positions = (starts[:, None] + torch.arange(size, device=x.device)[None, :]).reshape(-1)
    windows = x.index_select(dim, positions).unflatten(dim, (count, size))
    return windows.movedim(dim + 1, -1)


def _erfinv_guess(x: torch.Tensor) -> torch.Tensor:
    """M. Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision."""
    w = -torch.log((1.0 - x) * (1.0 + x))
    central, tail = w - 2.5, torch.sqrt(torch.clamp(w, min=5.0)) - 3.0
    p = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p = c + p * central
    q = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        q = c + q * tail
    return torch.where(w < 5.0, p, q) * x


def _erfinv(x: torch.Tensor) -> torch.Tensor:
    """``erfinv(x)`` for ``x`` in (-1, 1) (``+-inf`` at ``+-1``, NaN outside, as torch's)."""
    y = _erfinv_guess(x.detach())
    for _ in range(2):  # Newton on erf(y) = x
        y = y - (torch.erf(y) - x.detach()) / (2.0 / math.sqrt(math.pi) * torch.exp(-y * y))
    y = torch.where(x.detach().abs() == 1.0, x.detach() * float("inf"), y)
    # value y, gradient sqrt(pi) / 2 * exp(y ** 2) (the inverse function's derivative)
    finite = torch.where(torch.isinf(y), torch.zeros_like(y), y)  # no inf * 0 at +-1
    slope = (math.sqrt(math.pi) / 2.0 * torch.exp(finite * finite)).detach()
    return y.detach() + slope * (x - x.detach())


def _solve_triangular(a: torch.Tensor, b: torch.Tensor, *, upper: bool, left: bool = True,
                      unitriangular: bool = False) -> torch.Tensor:
    """``X`` with ``a @ X = b`` (``X @ a = b`` when not ``left``) for a triangular ``a``."""
    if not left:  # X a = b  <=>  a^T X^T = b^T
        return _solve_triangular(a.transpose(-1, -2), b.transpose(-1, -2), upper=not upper,
                                 unitriangular=unitriangular).transpose(-1, -2)
    if upper:  # reversing rows and columns makes it lower
        return _solve_triangular(a.flip(-2, -1), b.flip(-2), upper=False, unitriangular=unitriangular).flip(-2)
    n = a.shape[-1]
    strict = a.tril(-1)
    if not unitriangular:
        diag = a.diagonal(dim1=-2, dim2=-1).unsqueeze(-1)
        strict, b = strict / diag, b / diag
    power, x = -strict, b
    reach = 1  # x = (I + N + ... + N^(reach - 1)) b
    while reach < n:
        x = x + power @ x
        reach *= 2
        if reach < n:
            power = power @ power
    return x


def _min_dim(x: torch.Tensor, dim: int, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.min(x, dim)``: the first minimum's index, its value read back by ``gather`` so the
    gradient reaches that one element, as torch's ``min.dim`` backward sends it."""
    index = x.argmin(dim, keepdim=True)
    value = x.gather(dim, index)
    return (value, index) if keepdim else (value.squeeze(dim), index.squeeze(dim))


_SHIFT = 8  # lgamma / digamma: recur up to z = x + 8, where the asymptotic series is within 1e-11 relative


def _shifted(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For x > 0: ``(z, x)`` with ``z = x + _SHIFT``; for x <= 0 the reflected ``1 - x`` is shifted (the
    caller reflects the result). Both branches stay finite, so ``where`` passes no NaN gradient."""
    positive = x > 0
    base = torch.where(positive, x, 1.0 - x)
    return base + _SHIFT, base


def _lgamma(x: torch.Tensor) -> torch.Tensor:
    """``log|Gamma(x)|``: Stirling's series at ``z = x + 8``, less ``sum log(x + i)`` for the recurrence;
    for ``x <= 0`` the reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` (``inf`` at the poles, as torch).
    Its gradient is the same expression's, i.e. digamma to the series' accuracy."""
    z, base = _shifted(x)
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)))
    stirling = (z - 0.5) * torch.log(z) - z + 0.5 * math.log(2 * math.pi) + series
    falling = sum(torch.log(base + i) for i in range(_SHIFT))
    positive_value = stirling - falling
    # |sin(pi x)| = |sin(pi (x - round(x)))|: exact zero at the poles, no fp32 loss for large |x|
    near = torch.where(x > 0, torch.full_like(x, 0.5), x - torch.round(x))
    reflected = math.log(math.pi) - torch.log(torch.abs(torch.sin(math.pi * near))) - positive_value
    return torch.where(x > 0, positive_value, reflected)


def _digamma(x: torch.Tensor) -> torch.Tensor:
    """``digamma(x)``: the asymptotic series at ``z = x + 8`` less ``sum 1 / (x + i)``; for ``x <= 0`` the
    reflection ``digamma(1 - x) - pi / tan(pi x)``."""
    z, base = _shifted(x)
    inv = 1.0 / z
    inv2 = inv * inv
    series = torch.log(z) - 0.5 * inv - inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 / 252))
    positive_value = series - sum(1.0 / (base + i) for i in range(_SHIFT))
    angle = math.pi * torch.where(x > 0, torch.full_like(x, 0.5), x - torch.round(x))  # tan has period pi
    reflected = positive_value - math.pi * torch.cos(angle) / torch.sin(angle)
    return torch.where(x > 0, positive_value, reflected)


EXTRA_DECOMPOSITIONS = {torch.ops.aten.min.dim: _min_dim,
                        torch.ops.aten.lgamma.default: _lgamma,
                        torch.ops.aten.digamma.default: _digamma,
torch.ops.aten.linalg_solve_triangular.default: _solve_triangular,
                        torch.ops.aten.erfinv.default: _erfinv,
                        torch.ops.aten.unfold.default: _unfold,
                        torch.ops.aten._cdist_forward.default: _cdist,
                        torch.ops.aten._trilinear.default: _trilinear,
                        torch.ops.aten.logcumsumexp.default: _logcumsumexp,
                        torch.ops.aten.cumprod.default: _cumprod}


def with_extra_decompositions(table: dict) -> dict:
    """``table`` (a decomposition table) with :data:`EXTRA_DECOMPOSITIONS` added."""
    table.update(EXTRA_DECOMPOSITIONS)
    return table
