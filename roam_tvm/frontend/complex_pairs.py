"""Complex rotary embeddings traced as real (re, im) pairs.

LLaMA's reference code, DeepSeek-V2 and many user models rotate q/k with complex numbers:
``torch.polar(ones, freqs)``, ``torch.view_as_complex(x.reshape(..., -1, 2))``, a complex multiply and
``torch.view_as_real(...)``. TVM's importer has no complex dtype (``view_as_complex`` / ``polar`` are
refused), so while the model is traced, :func:`complex_as_pairs` (a ``TorchFunctionMode``) keeps every
complex tensor as a real tensor with a trailing axis of 2 (exactly ``view_as_real``'s layout) and runs the
ops on it in real arithmetic (Fourier transforms, FNet's token mixing and Autoformer's autocorrelation
``irfft(rfft(q) * conj(rfft(k)))``, too: :mod:`.fft_pairs`): the exported step has only real ops, whose
gradients the frontend has.

Shape queries on such a tensor answer for the complex tensor (the pair axis hidden), so code that checks or
reshapes by ``freqs_cis.shape`` keeps working. An op on a complex tensor that is not handled here raises
:class:`UnsupportedError` naming it, before the slow import.
"""
from __future__ import annotations

import contextlib
import weakref

from .errors import UnsupportedError
from .fft_pairs import FFT_NAMES, dft

_WAY_OUT = ("Way out: write that step in real arithmetic on the real and imaginary parts (a rotary embedding as "
            "x * cos + rotate_half(x) * sin, as Hugging Face's LLaMA does).")


# queries torch.export makes on a model's buffers, which hold the same for the pair tensor
_PASS_THROUGH = frozenset({"_is_view", "is_contiguous", "data_ptr", "untyped_storage", "storage_offset",
                           "__hash__", "requires_grad_", "_version", "get_device", "is_leaf"})


def _dim(d: int) -> int:
    """A dim of the complex tensor -> the same dim of its pair tensor (negative dims skip the pair axis)."""
    return d - 1 if d < 0 else d


def _mul(x, y):
    """(a + ib)(c + id) on pairs; broadcasting as the complex tensors would."""
    import torch

    a, b, c, d = x[..., 0], x[..., 1], y[..., 0], y[..., 1]
    return torch.stack([a * c - b * d, a * d + b * c], -1)


def _shape_args(args):
    """``view(2, 3)`` / ``view((2, 3))`` / ``view(torch.Size)`` -> a tuple of sizes."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)


class _PairMode:
    """Built lazily (``torch.overrides`` at import time would load torch for every frontend user)."""

    @staticmethod
    def make():
        import torch
        from torch.overrides import TorchFunctionMode

        T = torch.Tensor
        ffts = {getattr(torch.fft, n): n for n in FFT_NAMES}

        class Mode(TorchFunctionMode):
            def __init__(self):
                super().__init__()
                self.pairs = {}  # id -> weakref (a WeakSet would compare tensors with ==)

            def _mark(self, t):
                self.pairs[id(t)] = weakref.ref(t)
                return t

            def _is(self, t):
                ref = self.pairs.get(id(t)) if isinstance(t, torch.Tensor) else None
                return ref is not None and ref() is t

            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func is torch.polar:
                    mag, ang = args[0], args[1]
                    return self._mark(torch.stack([mag * torch.cos(ang), mag * torch.sin(ang)], -1))
                if func is torch.view_as_complex:
                    return self._mark(args[0].view(args[0].shape))  # a new tensor: the real input stays real
                if func is torch.view_as_real:
                    return args[0].view(args[0].shape)  # unmarked: real from here on
                if func is T.is_complex:
                    return self._is(args[0])
                if func in ffts:
                    out = dft(ffts[func], args[0], self._is(args[0]), args, kwargs)
                    return out if ffts[func].startswith("irfft") else self._mark(out)  # irfft: real
                if not any(self._is(a) for a in (*args, *kwargs.values())):
                    return func(*args, **kwargs)
                return self._pair_op(func, args, kwargs)

            def _pair_op(self, func, args, kwargs):
                x, rest = args[0], args[1:]
                name = getattr(func, "__name__", str(func))
                prop = getattr(getattr(func, "__self__", None), "__name__", None)  # a property's getter
                if name == "__get__" and prop in ("shape", "ndim"):
                    return x.shape[:-1] if prop == "shape" else x.dim() - 1
                if (name == "__get__" and prop in ("real", "imag")) or func in (torch.real, torch.imag):
                    part = 0 if prop == "real" or func is torch.real else 1
                    return x[..., part]  # unmarked: real from here on
                if name == "__get__" or name in _PASS_THROUGH:  # device, dtype, ...: the pair tensor's
                    return func(*args, **kwargs)
                if func is T.size:
                    return x.shape[:-1] if not rest else x.shape[:-1][rest[0]]
                if func in (T.dim, T.ndimension):
                    return x.dim() - 1
                if func in (torch.mul, T.mul, T.__mul__, T.__rmul__):
                    y = rest[0]
                    if self._is(x) and self._is(y):
                        return self._mark(_mul(x, y))
                    other, pair = (y, x) if self._is(x) else (x, y)
                    if isinstance(other, torch.Tensor):
                        other = other.unsqueeze(-1)  # a real factor scales both parts
                    return self._mark(pair * other)
                if func in (torch.conj, T.conj, torch.conj_physical, T.conj_physical):
                    # (a, b) -> (a, -b): Autoformer's autocorrelation, rfft(q) * conj(rfft(k))
                    return self._mark(torch.stack([x[..., 0], -x[..., 1]], -1))
                if func in (torch.neg, T.neg, T.__neg__):
                    return self._mark(-x)
                if func in (torch.div, T.div, T.__truediv__) and not self._is(rest[0]) and not kwargs:
                    other = rest[0]  # a real divisor scales both parts
                    return self._mark(x / (other.unsqueeze(-1) if isinstance(other, torch.Tensor) else other))
                if func in (torch.add, T.add, T.__add__, T.__radd__, torch.sub, T.sub, T.__sub__) and \
                        all(self._is(a) for a in args[:2]) and not kwargs:
                    return self._mark(func(*args))
                if func in (torch.unsqueeze, T.unsqueeze):
                    return self._mark(x.unsqueeze(_dim(rest[0])))
                if func in (T.view, T.reshape, torch.reshape):
                    return self._mark(x.reshape(*_shape_args(rest), 2))
                if func in (T.expand,):
                    return self._mark(x.expand(*_shape_args(rest), 2))
                if func in (T.transpose, torch.transpose):
                    return self._mark(x.transpose(_dim(rest[0]), _dim(rest[1])))
                if func in (T.permute, torch.permute):
                    n = x.dim() - 1
                    return self._mark(x.permute(*[d % n for d in _shape_args(rest)], n))
                if func is T.__getitem__:
                    idx = rest[0] if isinstance(rest[0], tuple) else (rest[0],)
                    return self._mark(x[(*idx, slice(None))])
                if func in (T.to, T.contiguous, T.clone, T.detach, torch.clone):
                    keep = [a for a in rest if not isinstance(a, torch.dtype)]
                    kw = {k: v for k, v in kwargs.items() if k != "dtype"}
                    return self._mark(func(x, *keep, **kw))
                if func in (T.float, T.type_as, torch.resolve_conj, T.resolve_conj):  # pairs hold no lazy conj bit
                    return self._mark(x)
                raise UnsupportedError(
                    f"a complex tensor reaches {name}, which roam-tvm does not trace on complex numbers (held as "
                    f"real pairs: polar, view_as_complex, torch.fft (i)(r)fft(2/n), real/imag, multiply, add, conj, "
                    f"negation, division by a real, reshape/view/unsqueeze/expand/transpose/permute, indexing, "
                    f"view_as_real). {_WAY_OUT}")

        return Mode()


def _complex_state(model) -> list[tuple[object, str, bool]]:
    """(module, name, is_buffer) of every complex buffer or plain tensor attribute in ``model``
    (Meta's reference LLaMA keeps ``freqs_cis = torch.polar(...)`` as one, made in ``__init__``)."""
    import torch

    found = []
    for module in model.modules():
        for name, buf in module._buffers.items():
            if buf is not None and buf.is_complex():
                found.append((module, name, True))
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and value.is_complex():
                found.append((module, name, False))
    return found


def _swap_for_pairs(mode, module, name: str, is_buffer: bool):
    """Hold ``module.<name>`` (complex) as a real pair tensor while traced; returns the undo.

    ``torch.export`` replaces a module's buffers and constants with its own tensors while tracing, so the
    pair is held under another name and ``<name>`` becomes a property (on a subclass made for this module)
    that hands the model a marked view of whatever tensor is there, or what the model assigned to it.
    """
    import torch

    cls, pair_name, assigned = type(module), f"_roam_pairs_{name}", f"_roam_pairs_{name}_assigned"
    old = module._buffers.pop(name) if is_buffer else vars(module).pop(name)
    pair = torch.view_as_real(old).clone()
    if is_buffer:
        module._buffers[pair_name] = pair
        if name in module._non_persistent_buffers_set:
            module._non_persistent_buffers_set.add(pair_name)
    else:
        vars(module)[pair_name] = pair

    def get(self):
        t = vars(self).get(assigned)
        t = getattr(self, pair_name) if t is None else t
        return t if mode._is(t) else mode._mark(t.view(t.shape))

    def put(self, value):  # Meta's LLaMA: self.freqs_cis = self.freqs_cis.to(h.device)
        vars(self)[assigned] = value

    module.__class__ = type(cls.__name__, (cls,), {name: property(get, put), "__module__": cls.__module__,
                                                   "__qualname__": cls.__qualname__})

    def undo():
        module.__class__ = cls
        vars(module).pop(assigned, None)
        if is_buffer:
            module._buffers.pop(pair_name, None)
            module._non_persistent_buffers_set.discard(pair_name)
            module._buffers[name] = old
        else:
            vars(module).pop(pair_name, None)
            vars(module)[name] = old
    return undo


@contextlib.contextmanager
def complex_as_pairs(model=None):
    """While active, complex tensors from ``torch.polar`` / ``torch.view_as_complex`` are real pairs, and so
    are ``model``'s complex buffers and tensor attributes (restored on exit)."""
    mode = _PairMode.make()
    undo = []
    try:
        for module, name, is_buffer in _complex_state(model) if model is not None else []:
            undo.append(_swap_for_pairs(mode, module, name, is_buffer))
        with mode:
            yield
    finally:
        for u in reversed(undo):
            u()
