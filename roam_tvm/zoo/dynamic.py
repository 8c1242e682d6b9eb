"""A factory's ``dynamic_shapes``: the step is planned at each dynamic dimension's upper bound.

A memory plan made for the largest shape holds for every smaller one (each buffer only shrinks
inside its slot), and every planner and the PyTorch baseline then measure the same size. So the
example tensors are tiled along each dynamic dimension up to its ``torch.export.Dim``'s ``max``
and the step is imported with static shapes. A dynamic dimension without a finite ``max`` cannot
be planned and is refused.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch

from .spec import ZooError


def _dim_specs(spec: Any, rank: int, where: str) -> Dict[int, Any]:
    """One tensor's spec (``None``, ``{dim: Dim}`` or a sequence with one entry per dim) -> {dim: Dim}."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        if len(spec) != rank:
            raise ZooError(f"{where}: dynamic_shapes gives {len(spec)} dims for a tensor of rank {rank}")
        items = list(enumerate(spec))
    else:
        raise ZooError(f"{where}: dynamic_shapes entries must be None, {{dim: Dim}} or a list with one entry per "
                       f"dim, got {type(spec).__name__}")
    out = {}
    for dim, d in items:
        if not isinstance(dim, int) or not -rank <= dim < rank:
            raise ZooError(f"{where}: dynamic_shapes names dim {dim!r} of a tensor of rank {rank}")
        if d is not None and d is not torch.export.Dim.STATIC:
            out[dim % rank] = d
    return out


def _upper_bound(d: Any, where: str) -> int:
    if not isinstance(d, torch.export.Dim):
        raise ZooError(f"{where}: {d!r} has no upper bound; memory is planned for the largest shape, so give "
                       "the dim one: torch.export.Dim(name, max=N)")
    bound = d.max
    if not isinstance(bound, int) or isinstance(bound, bool) or bound <= 0 or bound >= 2**31:
        raise ZooError(f"{where}: dynamic dim {d.__name__!r} has no finite upper bound; memory is planned for "
                       f"the largest shape, so give it one: torch.export.Dim({d.__name__!r}, max=N)")
    return bound


def _tile(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """``t`` repeated cyclically along ``dim`` to ``size`` (the values stay valid inputs, e.g. token ids)."""
    idx = torch.arange(size, device=t.device) % t.shape[dim]
    return t.index_select(dim, idx)


def expand_to_upper_bounds(inputs: Sequence[torch.Tensor], targets: Sequence[torch.Tensor], dynamic_shapes: Any,
                           ref: str) -> Tuple[Tuple[torch.Tensor, ...], Tuple[torch.Tensor, ...], Dict[str, int]]:
    """Tile the example tensors to the upper bound of each dynamic dim.

    Parameters
    ----------
    inputs, targets : sequence of torch.Tensor
        The factory's example inputs and targets.
    dynamic_shapes : sequence
        One ``torch.export`` spec per input, then one per target.
    ref : str
        The factory's reference, for messages.

    Returns
    -------
    (inputs, targets, bounds)
        The expanded tensors and ``{"<name>": bound}`` for each dynamic dim (what the plan assumes).
    """
    tensors: List[torch.Tensor] = list(inputs) + list(targets)
    names = [f"example_inputs[{i}]" for i in range(len(inputs))] + [f"targets[{i}]" for i in range(len(targets))]
    if not isinstance(dynamic_shapes, (list, tuple)) or len(dynamic_shapes) != len(tensors):
        got = len(dynamic_shapes) if isinstance(dynamic_shapes, (list, tuple)) else type(dynamic_shapes).__name__
        raise ZooError(f"{ref}: dynamic_shapes must give one spec per input then per target "
                       f"({len(tensors)} in all: {', '.join(names)}), got {got}")
    bounds: Dict[str, int] = {}
    for k, (t, spec) in enumerate(zip(tensors, dynamic_shapes)):
        where = f"{ref}: dynamic_shapes for {names[k]}"
        for dim, d in sorted(_dim_specs(spec, t.dim(), where).items()):
            bound = _upper_bound(d, f"{where}, dim {dim}")
            if t.shape[dim] > bound:
                raise ZooError(f"{where}, dim {dim}: the example size {t.shape[dim]} exceeds the upper bound "
                               f"{bound} of {d.__name__!r}")
            if bounds.setdefault(d.__name__, bound) != bound:
                raise ZooError(f"{where}: dim {d.__name__!r} has two upper bounds ({bounds[d.__name__]}, {bound})")
            t = _tile(t, dim, bound)
        tensors[k] = t
    return tuple(tensors[:len(inputs)]), tuple(tensors[len(inputs):]), bounds
