"""Value-sized selections (``torch.where(mask)``, ``nonzero``, ``x[bool_mask]``) traced dense.

The reference Mixtral/Mistral MoE and most hand-written MoE layers dispatch tokens to experts with

    tok, slot = torch.where(top_idx == e)
    out.index_add_(0, tok, expert(x[tok]) * w[tok, slot, None])     # or: out[tok] += ...

``torch.where(mask)`` has as many rows as ``mask`` has true entries, a number only known from the
values, and a planned step needs every size before it runs (:mod:`.data_sizes` refuses such graphs).
While the model is traced, :func:`dense_dispatch` (a ``TorchFunctionMode``) runs each such selection
*dense*: ``torch.where(mask)`` returns the coordinates of *every* entry of ``mask`` (``mask.numel()``
rows, in ``nonzero``'s row-major order) and remembers ``mask`` as their validity. Rows read with
those coordinates (``x[tok]``, ``w[tok, slot]``, ``index_select``, ``gather``) are computed for every
entry; where they are written back -- ``index_add``, ``index_put`` / ``out[tok] = v`` / ``out[tok] +=
v``, ``scatter_add`` with the coordinates as index -- the rows of invalid entries are replaced by
zeros (``torch.where``, so an inf/nan computed on an unselected row cannot leak). ``x[bool_mask]``
gives all rows of ``x`` and ``out[bool_mask] = v`` becomes ``torch.where(bool_mask, v, out)``.

The step then computes each expert on all ``mask.numel()`` (token, slot) pairs with weight 0 where
not routed: the same loss and gradients, with static sizes, and more work and memory than PyTorch's
sparse dispatch (the planned step is the dense one; a warning says so).

Anything else done with the coordinates (arithmetic, a reduction, ``.tolist()``) raises
:class:`UnsupportedError` naming the op. Values computed from the selected rows are not tracked, so a
selection that feeds a reduction (``x[mask].mean()``) would change the result: :meth:`DenseDispatch.check`
runs the model eagerly with and without the dense form, on the example inputs and on variants whose integer
inputs are shuffled row by row, and refuses the model when they differ. That is a test on samples, not a
proof.
"""
from __future__ import annotations

import contextlib
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from .errors import UnsupportedError, model_frame
from .module_modes import kept_modes
from .single_hot import SingleHot

_WAY_OUT = ("Way out: for a mixture of experts, run every expert on all tokens and weight each output by its "
            "routing weight (0 where not routed), or pad each group to a fixed capacity; to pick one row per "
            "sample (a classifier's <eos> or last token), select by position, e.g. idx = (mask * "
            "torch.arange(T)).argmax(-1) and x[torch.arange(B), idx].")


@dataclass
class DenseDispatch:
    """What :func:`dense_dispatch` densified while the model was traced."""

    selections: int = 0                               #: value-sized selections traced dense
    sinks: int = 0                                    #: write-backs masked by their validity
    rows: list[int] = field(default_factory=list)     #: dense rows of each selection

    def check(self, fn: Callable, args: tuple, model_name: str) -> None:
        """Refuse the model if its dense form computes something else than the model.

        Runs ``fn(*args)`` eagerly in evaluation mode (no dropout), once as written and once with the
        selections dense, and compares every output tensor; then the same on ``TRIALS`` variants of
        ``args`` whose integer and boolean tensors are shuffled along their last dim (each row keeps its
        values, at other positions), so a dense form that agrees only by chance on the example (a
        classifier's ``<eos>`` that happens to be the last token) is caught. A variant the model itself
        cannot run is skipped.

        Raises
        ------
        UnsupportedError
            The outputs differ: a selection feeds something other than a write-back.
        """
        import torch

        if not self.selections:
            return
        module = fn if isinstance(fn, torch.nn.Module) else None
        worst, trials = 0.0, [args] + [_shuffled(args, seed) for seed in range(1, TRIALS + 1)]
        with kept_modes(module) if module is not None else contextlib.nullcontext():
            if module is not None:
                module.eval()
            for k, trial in enumerate(trials):
                if trial is None:
                    continue
                with torch.no_grad(), torch.random.fork_rng():
                    torch.manual_seed(0)
                    try:
                        sparse = _tensors(fn(*trial))
                    except Exception:  # noqa: BLE001 - a variant the model refuses (not the example)
                        if k == 0:
                            raise
                        continue
                    torch.manual_seed(0)
                    with _DenseMode.make(DenseDispatch()):
                        dense = _tensors(fn(*trial))
                if len(sparse) != len(dense):
                    worst = float("inf")
                worst = max([worst] + [_mismatch(a, b) for a, b in zip(sparse, dense)])
                if worst > 0:
                    break
        if worst > 0:
            raise UnsupportedError(
                f"{model_name} selects rows by tensor values (torch.where/nonzero/boolean masks); roam-tvm traces "
                f"such a selection dense (every row, weighted 0 where not selected), but here the dense form "
                f"changes the output (worst relative difference {worst:.2g}): a selection feeds something other "
                f"than index_add / index_put / scatter_add / a masked write (e.g. a mean over the selected rows). "
                f"For a loss over the selected rows, F.cross_entropy(logits[mask], labels[mask]), pass every row "
                f"and ignore the others: F.cross_entropy(logits.flatten(0, -2), labels.masked_fill(~mask, "
                f"-100).flatten()). {_WAY_OUT}")


#: shuffled variants of the example inputs the dense form is also checked on
TRIALS = 2


def _shuffled(args: tuple, seed: int) -> tuple | None:
    """``args`` with each integer / boolean tensor's values shuffled along its last dim, row by row
    (None when there is none to shuffle, or a tensor has no values: a meta model's)."""
    import torch

    if any(isinstance(a, torch.Tensor) and a.is_meta for a in args):
        return None
    gen = torch.Generator().manual_seed(seed)
    out, changed = [], False
    for a in args:
        if (isinstance(a, torch.Tensor) and not a.is_floating_point() and not a.is_complex() and a.dim() >= 1
                and a.shape[-1] > 1):
            keys = torch.rand(a.shape, generator=gen)
            a = a.gather(-1, keys.argsort(dim=-1))
            changed = True
        out.append(a)
    return tuple(out) if changed else None


def _tensors(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _tensors(o)]
    return [t for o in getattr(out, "values", lambda: [])() for t in _tensors(o)]


def _mismatch(a, b) -> float:
    """Relative difference beyond the dtype's rounding (0.0 when they agree)."""
    import torch

    if a.shape != b.shape:
        return float("inf")
    if a.is_meta or b.is_meta:
        return 0.0  # a model built on the meta device has no values to compare
    if not a.is_floating_point():
        return 0.0 if torch.equal(a, b) else float("inf")
    tol = 1e-4 if a.element_size() >= 4 else 2e-2  # fp32 sums in another order; 16-bit rounding
    a, b = a.double(), b.double()
    if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
        return float("inf")
    fa, fb = a[torch.isfinite(a)], b[torch.isfinite(b)]
    if fa.numel() == 0:
        return 0.0
    scale = fa.abs().max().item() + 1e-6
    rel = (fa - fb).abs().max().item() / scale
    return 0.0 if rel <= tol else rel


@dataclass(frozen=True)
class _Coords:
    """Validity of dense coordinates: ``valid[i]`` says whether row ``i`` was selected."""

    valid: object  # torch.Tensor, bool [rows]
    shape: tuple    # of the mask the coordinates index
    dim: int | None  # the mask dim of a [rows] coordinate tensor; None: one [rows, ndim] tensor (nonzero)
    folded: int | None = None  # the mask dim folded into its argmax (true at most once along it), if any

    @property
    def rows(self) -> int:
        return int(self.valid.shape[0])


def _user_line() -> str:
    """`` (File "model.py", line 12)``: the model's own innermost frame on the stack, if any."""
    import traceback

    frame = model_frame(traceback.extract_stack())
    return f' (File "{frame.filename}", line {frame.lineno})' if frame is not None else ""


def _key_tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _is_full_slice(k) -> bool:
    return k is Ellipsis or (isinstance(k, slice) and k == slice(None))


class _DenseMode:
    """Built lazily (``torch.overrides`` at import time would load torch for every frontend user)."""

    @staticmethod
    def make(record: DenseDispatch):
        import torch
        from torch.overrides import TorchFunctionMode

        T = torch.Tensor
        sources = {torch.nonzero, T.nonzero, torch.argwhere, T.argwhere}
        index_adds = {torch.index_add, T.index_add, T.index_add_}
        index_puts = {torch.index_put, T.index_put, T.index_put_}
        scatter_adds = {torch.scatter_add, T.scatter_add, T.scatter_add_}
        gathers = {torch.index_select, T.index_select, torch.gather, T.gather, torch.take_along_dim,
                   T.take_along_dim, torch.nn.functional.embedding, torch.embedding}
        keeps_rows = {T.view, T.reshape, torch.reshape, T.unsqueeze, torch.unsqueeze, T.squeeze, torch.squeeze,
                      T.expand, T.expand_as, T.flatten, torch.flatten, T.contiguous, T.to, T.long, T.int,
                      T.clone, torch.clone, T.detach, torch.detach, T.unbind, torch.unbind}
        # elementwise ops that may combine the rows of x[mask] with one row per true entry
        combines = {torch.add, torch.sub, torch.mul, torch.div, T.add, T.sub, T.mul, T.div, T.__add__, T.__radd__,
                    T.__sub__, T.__rsub__, T.__mul__, T.__rmul__, T.__truediv__}
        queries = {"size", "dim", "numel", "__len__", "__get__", "is_floating_point", "element_size", "stride",
                   "get_device", "is_contiguous", "__format__", "__repr__", "__hash__"}

        class Mode(TorchFunctionMode):
            def __init__(self):
                super().__init__()
                self.coords = {}  # id -> (weakref, _Coords)
                self.single = SingleHot()  # masks true at most once along a dim (top-k routing)
                self.rows_of = {}  # id -> (weakref, mask): the rows x[mask] gave (every row, dense)

            # -- coordinates -------------------------------------------------------------
            def _mark(self, t, c: _Coords):
                self.coords[id(t)] = (weakref.ref(t), c)
                return t

            def _of(self, t) -> _Coords | None:
                entry = self.coords.get(id(t)) if isinstance(t, torch.Tensor) else None
                return entry[1] if entry is not None and entry[0]() is t else None

            def _dense_coords(self, cond, as_tuple: bool):
                shape = tuple(cond.shape)
                single = [d for d in self.single.dims(cond) if shape[d] > 1] if cond.dim() > 1 else []
                folded = max(single, key=lambda d: shape[d]) if single else None
                # true at most once along ``folded``: one row per position of the other dims, at its argmax
                rest = tuple(n for d, n in enumerate(shape) if d != folded)
                rows = int(np.prod(rest)) if rest else 1
                coords = []
                for d, size in enumerate(shape):  # nonzero's row-major order over every (other) entry
                    if d == folded:
                        coords.append(cond.to(torch.int32).argmax(d).reshape(-1).to(torch.int64))
                        continue
                    axis = [1] * len(rest)
                    axis[d - (folded is not None and d > folded)] = size
                    coords.append(torch.arange(size, device=cond.device).reshape(axis).expand(rest).reshape(-1))
                nonzero = cond if cond.dtype == torch.bool else cond != 0
                valid = (nonzero.any(folded) if folded is not None else nonzero).reshape(-1)
                record.selections += 1
                record.rows.append(rows)
                if as_tuple:
                    return tuple(self._mark(x, _Coords(valid, shape, d, folded)) for d, x in enumerate(coords))
                return self._mark(torch.stack(coords, 1), _Coords(valid, shape, None, folded))

            @staticmethod
            def _candidates(coords, c: _Coords):
                """``for e in mask.nonzero():`` runs the loop over every candidate, as constants (each body's
                own selections are then empty where ``e`` was not selected)."""
                if c.folded is not None:
                    raise UnsupportedError("a loop over the coordinates of a top-k mask is not traced. " + _WAY_OUT)
                cols = np.unravel_index(np.arange(c.rows), c.shape)
                if c.dim is None and tuple(coords.shape) == (c.rows, len(c.shape)):
                    return tuple(torch.tensor([int(v) for v in r], dtype=coords.dtype) for r in zip(*cols))
                dim = c.dim if c.dim is not None else (0 if len(c.shape) == 1 else None)
                if dim is None or coords.dim() != 1:
                    raise UnsupportedError(f"a loop over reshaped nonzero/torch.where coordinates is not traced. "
                                           f"{_WAY_OUT}")
                return tuple(torch.tensor(int(v), dtype=coords.dtype) for v in cols[dim])

            def _keep(self, out, c: _Coords, name: str):
                outs = out if isinstance(out, (tuple, list)) else (out,)
                for t in outs:
                    if not (isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] == c.rows):
                        raise self._refuse(name, "moves the selected rows off the first dim")
                    self._mark(t, c)
                return out

            def _refuse(self, name: str, what: str = "") -> UnsupportedError:
                return UnsupportedError(
                    f"the coordinates of a value-sized selection (torch.where/nonzero, traced dense) reach "
                    f"{name}{_user_line()}{', which ' + what if what else ''}; roam-tvm traces only reads by them (indexing, "
                    f"index_select, gather) and write-backs (index_add, index_put / x[idx] = v, scatter_add). "
                    f"{_WAY_OUT}")

            # -- masking -----------------------------------------------------------------
            @staticmethod
            def _along(c: _Coords, like, dim: int = 0):
                shape = [1] * like.dim()
                shape[dim] = c.rows
                return c.valid.reshape(shape)

            def _masked(self, c: _Coords, values, like=None, dim: int = 0):
                like = values if like is None else like
                values = values.expand_as(like) if values.shape != like.shape else values
                record.sinks += 1
                return torch.where(self._along(c, like, dim), values, torch.zeros_like(values))

            def _one(self, tensors, name):
                cs = {id(c.valid): c for c in (self._of(t) for t in tensors) if c is not None}
                if len(cs) != 1 or any(self._of(t) is None for t in tensors):
                    raise self._refuse(name, "mixes coordinates of different selections with other indices")
                return next(iter(cs.values()))

            # -- dispatch ----------------------------------------------------------------
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func is torch.where and len(args) == 1 and not kwargs:
                    return self._dense_coords(args[0], True) if args[0].dim() else func(*args)
                if func in sources and args[0].dim():
                    as_tuple = bool(kwargs.get("as_tuple", False)) and func in (torch.nonzero, T.nonzero)
                    return self._dense_coords(args[0], as_tuple)
                if func is T.__getitem__:
                    return self._getitem(func, args[0], args[1])
                if func is T.__setitem__:
                    return self._setitem(func, *args)
                if func in combines and len(args) >= 2:
                    combined = self._combine_rows(func, args, kwargs)
                    if combined is not None:
                        return combined
                flat = [*args, *kwargs.values()]
                flat += [t for a in flat if isinstance(a, (tuple, list)) for t in a]
                marked = [a for a in flat if self._of(a) is not None]
                if not marked:
                    out = func(*args, **kwargs)
                    self.single.observe(func, args, kwargs, out)
                    return out
                name = getattr(func, "__name__", str(func))
                if func in index_adds:
                    return self._index_add(func, args, kwargs)
                if func in index_puts:
                    return self._index_put(func, args, kwargs)
                if func in scatter_adds:
                    return self._scatter_add(func, args, kwargs)
                if func in gathers:
                    if self._of(args[0]) is not None and func not in (torch.nn.functional.embedding,
                                                                      torch.embedding):
                        raise self._refuse(name, "reads from the coordinates themselves")
                    return func(*args, **kwargs)
                if func in (T.unbind, torch.unbind) and self._of(args[0]) is not None and \
                        args[1:] in ((), (0,)) and not kwargs.get("dim", 0):
                    return self._candidates(args[0], self._of(args[0]))
                if func in keeps_rows and self._of(args[0]) is not None:
                    return self._keep(func(*args, **kwargs), self._of(args[0]), name)
                if name in queries:
                    return func(*args, **kwargs)
                raise self._refuse(name)

            def _getitem(self, func, x, key):
                keys = _key_tuple(key)
                c = self._of(x)
                if c is not None:  # nz[:, 0]: a column of the coordinates
                    if not (keys and _is_full_slice(keys[0])):
                        raise self._refuse("indexing", "selects some of the selected rows")
                    return self._keep(func(x, key), c, "indexing")
                masks = [k for k in keys if isinstance(k, torch.Tensor) and k.dtype == torch.bool]
                if masks:
                    return self._bool_rows(func, x, keys, masks[0])
                out = func(x, key)
                self.single.observe(func, (x, key), {}, out)
                return out

            def _bool_rows(self, func, x, keys, mask):
                """``x[mask, rest...]`` with the mask over leading dims: every row of ``x``, then ``rest``."""
                rest = keys[1:]
                if keys[0] is not mask or tuple(mask.shape) != tuple(x.shape[:mask.dim()]) or not mask.dim() \
                        or any(isinstance(k, torch.Tensor) or k is Ellipsis for k in rest):
                    raise self._refuse("boolean-mask indexing", "is not over the leading dims")
                record.selections += 1
                record.rows.append(mask.numel())
                # a copy, as boolean indexing gives: ``out[mask] += v`` adds to it, then writes it back
                rows = x.reshape(mask.numel(), *x.shape[mask.dim():])
                out = (rows[(slice(None), *rest)] if rest else rows).clone()
                self.rows_of[id(out)] = (weakref.ref(out), mask)
                return out

            def _rows_mask(self, t):
                entry = self.rows_of.get(id(t)) if isinstance(t, torch.Tensor) else None
                return entry[1] if entry is not None and entry[0]() is t else None

            def _combine_rows(self, func, args, kwargs):
                """``x[mask] + feats`` with ``feats`` one row per true entry (Qwen3-VL's deepstack): ``feats``
                spread over every row of the dense ``x[mask]`` (row ``r`` reads the entry of the true
                entries before it), exact at the true rows, which are all a masked write keeps."""
                a, b = args[0], args[1]
                mask = self._rows_mask(a)
                rows, other = (a, b) if mask is not None else (b, a)
                mask = mask if mask is not None else self._rows_mask(b)
                if mask is None or not isinstance(other, torch.Tensor) or self._rows_mask(other) is not None \
                        or other.dim() != rows.dim() or other.shape[0] in (1, rows.shape[0]):
                    return None
                index = (mask.reshape(-1).to(torch.int64).cumsum(0) - 1).clamp(min=0)
                spread = other.index_select(0, index)
                out = func(*((rows, spread) if other is b else (spread, rows)), *args[2:], **kwargs)
                self.rows_of[id(out)] = (weakref.ref(out), mask)
                return out

            def _setitem(self, func, x, key, value):
                keys = _key_tuple(key)
                masks = [k for k in keys if isinstance(k, torch.Tensor) and k.dtype == torch.bool]
                marked = [k for k in keys if self._of(k) is not None]
                if self._of(x) is not None:
                    raise self._refuse("item assignment", "writes into the coordinates")
                if marked:
                    n = len(marked)
                    if keys[:n] != tuple(marked) or not all(_is_full_slice(k) for k in keys[n:]):
                        raise self._refuse("item assignment", "mixes the coordinates with other indices")
                    c = self._one(marked, "item assignment")
                    old = x[tuple(marked)]
                    new = value if isinstance(value, torch.Tensor) else torch.as_tensor(value, dtype=x.dtype)
                    delta = self._masked(c, new.to(x.dtype) - old, like=old)
                    x.index_put_(tuple(marked), delta, accumulate=True)
                    return None
                # one value per selected row (a value of one row broadcasts: index_put's boolean converter)
                if masks and isinstance(value, torch.Tensor) and value.dim() > x.dim() - masks[0].dim() \
                        and value.shape[0] != 1:
                    mask = masks[0]
                    if keys[0] is not mask or not all(_is_full_slice(k) for k in keys[1:]):
                        raise self._refuse("boolean-mask assignment", "is not over the leading dims")
                    rest = tuple(x.shape[mask.dim():])
                    keep = mask.reshape(*mask.shape, *([1] * len(rest)))
                    if value.shape[0] != mask.numel() and self._of(value) is None:
                        # one row per true entry, computed apart from the selection (a VLM's image
                        # features: h[ids == img] = feats): the same write as masked_scatter, static-sized
                        x.copy_(x.masked_scatter(keep.expand_as(x), value.to(x.dtype)))
                        return None
                    dense = value.expand(mask.numel(), *rest).reshape(*mask.shape, *rest)
                    record.sinks += 1
                    x.copy_(torch.where(keep, dense.to(x.dtype), x))
                    return None
                return func(x, key, value)

            def _index_add(self, func, args, kwargs):
                x, dim, index, source = args[:4]
                c = self._of(index)
                if c is None or index.dim() != 1 or self._of(source) is not None or self._of(x) is not None:
                    raise self._refuse("index_add", "is not indexed by the coordinates")
                return func(x, dim, index, self._masked(c, source, dim=dim % source.dim()), *args[4:], **kwargs)

            def _index_put(self, func, args, kwargs):
                x, indices, values = args[0], tuple(args[1]), args[2]
                accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
                c = self._one(list(indices), "index_put")
                old = x[indices]
                # a plain write of v is an accumulating write of v - old (the selected rows are distinct)
                delta = self._masked(c, values if accumulate else values - old, like=old)
                return func(x, indices, delta, True)

            def _scatter_add(self, func, args, kwargs):
                x, dim, index, source = args[:4]
                c = self._of(index)
                if c is None or source.shape[0] != c.rows:
                    raise self._refuse("scatter_add", "is not indexed by the coordinates")
                return func(x, dim, index, self._masked(c, source), **kwargs)

        return Mode()


def warn_dense(record: DenseDispatch, model_name: str) -> None:
    """A ``RuntimeWarning`` that the planned step computes the selected rows dense."""
    if not record.selections:
        return
    warnings.warn(
        f"{model_name} selects rows by tensor values ({record.selections} torch.where/nonzero/boolean-mask "
        f"selection(s), e.g. a MoE's token dispatch). The step is planned dense: every selection computes all "
        f"its {max(record.rows)} candidate rows, weighted 0 where not selected (same loss and gradients). "
        "PyTorch computes only the selected rows, so its step does less work; to plan the sparse form, pad "
        "each expert's tokens to a fixed capacity.", RuntimeWarning, stacklevel=3)


@contextlib.contextmanager
def dense_dispatch() -> Iterator[DenseDispatch]:
    """While active, value-sized selections are traced dense (see the module docstring)."""
    record = DenseDispatch()
    with _DenseMode.make(record):
        yield record
