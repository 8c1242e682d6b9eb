"""Boolean masks with at most one true entry along a dim, followed through the ops that keep it.

A top-k router's indices hold ``k`` distinct experts per token, so ``indices == e`` is true at most once along
the top-k dim, and ``F.one_hot(indices, E)`` is too for every expert (Mixtral's ``expert_mask``). When such a
mask is selected from (``torch.where(indices == e)``), :mod:`.dense_dispatch` needs one row per token rather
than one per (token, slot): the slot is the mask's ``argmax`` along that dim. :class:`SingleHot` records which
tensors are known to be so, from ``topk`` through ``==`` with one value, ``one_hot``, ``permute`` /
``transpose``, ``squeeze`` / ``unsqueeze``, basic indexing and dtype casts; anything else forgets it.
"""
from __future__ import annotations

import weakref


class SingleHot:
    """Tensor -> the dims along which it is known to be nonzero at most once (integer tensors from
    ``topk``: the dims along which their values are distinct)."""

    def __init__(self):
        self._known = {}  # id -> (weakref, frozenset of dims)
        self._funcs = None

    def dims(self, t) -> frozenset:
        entry = self._known.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else frozenset()

    def _set(self, t, dims) -> None:
        dims = frozenset(d for d in dims if d is not None)
        if dims:
            self._known[id(t)] = (weakref.ref(t), dims)

    def observe(self, func, args: tuple, kwargs: dict, out) -> None:
        """Record what ``out = func(*args, **kwargs)`` is known to be."""
        import torch

        handlers = self._handlers()
        handler = handlers.get(func)
        if handler is None or not isinstance(out, (torch.Tensor, tuple)):
            return
        try:
            handler(args, kwargs, out)
        except (TypeError, IndexError, ValueError, AttributeError):  # a form not followed: nothing is known
            return

    # -- the ops followed ------------------------------------------------------------------------------------
    def _handlers(self) -> dict:
        if self._funcs is None:
            import torch

            T, F = torch.Tensor, torch.nn.functional
            same_shape = (T.to, T.bool, T.long, T.int, T.contiguous, T.clone, torch.clone, T.detach)
            self._funcs = {torch.topk: self._topk, T.topk: self._topk,
                           torch.eq: self._eq, T.eq: self._eq, T.__eq__: self._eq,
                           F.one_hot: self._one_hot,
                           T.permute: self._permute, torch.permute: self._permute,
                           T.transpose: self._transpose, torch.transpose: self._transpose,
                           T.unsqueeze: self._unsqueeze, torch.unsqueeze: self._unsqueeze,
                           T.squeeze: self._squeeze, torch.squeeze: self._squeeze,
                           T.__getitem__: self._getitem,
                           **{f: self._keep for f in same_shape}}
        return self._funcs

    def _topk(self, args, kwargs, out):
        x = args[0]
        dim = kwargs.get("dim", args[2] if len(args) > 2 else -1)
        self._set(out[1], {dim % x.dim()} if x.dim() else set())

    def _eq(self, args, kwargs, out):
        import torch

        a, b = args[0], args[1]
        marked, other = (a, b) if self.dims(a) else (b, a)
        if self.dims(marked) and (not isinstance(other, torch.Tensor) or other.dim() == 0):
            self._set(out, self.dims(marked))

    def _one_hot(self, args, kwargs, out):
        self._set(out, self.dims(args[0]) | {out.dim() - 1})  # one class per entry, and distinct along the dims

    def _keep(self, args, kwargs, out):
        if tuple(out.shape) == tuple(args[0].shape):
            self._set(out, self.dims(args[0]))

    def _permute(self, args, kwargs, out):
        x = args[0]
        perm = args[1:] if len(args) > 2 else (args[1] if len(args) == 2 else kwargs.get("dims"))
        perm = [p % x.dim() for p in perm]
        self._set(out, {perm.index(d) for d in self.dims(x)})

    def _transpose(self, args, kwargs, out):
        x = args[0]
        a, b = args[1] % x.dim(), args[2] % x.dim()
        self._set(out, {b if d == a else a if d == b else d for d in self.dims(x)})

    def _unsqueeze(self, args, kwargs, out):
        at = args[1] % out.dim()
        self._set(out, {d + 1 if d >= at else d for d in self.dims(args[0])})

    def _squeeze(self, args, kwargs, out):
        x = args[0]
        gone = [i for i in range(x.dim()) if x.shape[i] == 1 and (len(args) < 2 or i == args[1] % x.dim())]
        self._set(out, {d - sum(g < d for g in gone) for d in self.dims(x) if d not in gone})

    def _getitem(self, args, kwargs, out):
        """Basic indexing (ints, slices, None, one Ellipsis) and one integer index tensor of at most one dim
        (Mixtral's ``expert_mask[expert_idx]``): where each kept dim lands."""
        import torch

        x, key = args[0], args[1]
        dims = self.dims(x)
        if not dims:
            return
        key = key if isinstance(key, tuple) else (key,)
        tensors = [k for k in key if isinstance(k, torch.Tensor)]
        if len(tensors) > 1 or any(t.dim() > 1 or t.is_floating_point() or t.dtype == torch.bool for t in tensors):
            return
        gathered = set()  # a dim indexed by a 1-D tensor: rows may repeat, so no longer at most once
        for i, k in enumerate(key):
            if isinstance(k, torch.Tensor):
                gathered.add(i)  # position in key == source dim: only ints/slices/None precede it here
                key = key[:i] + ((0 if k.dim() == 0 else slice(None)),) + key[i + 1:]
        if any(k is None for k in key[:max(gathered, default=0)]) or any(isinstance(k, bool) for k in key):
            return
        if any(not (isinstance(k, (int, slice)) or k is None or k is Ellipsis) for k in key):
            return
        if key.count(Ellipsis) > 1:
            return
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (x.dim() - used) + key[i + 1:]
        key = key + (slice(None),) * (x.dim() - sum(1 for k in key if k is not None))
        where, src, dst = {}, 0, 0
        for k in key:
            if k is None:
                dst += 1
            elif isinstance(k, int):
                src += 1
            else:
                where[src] = dst
                src, dst = src + 1, dst + 1
        self._set(out, {where.get(d) for d in dims if d not in gathered})
