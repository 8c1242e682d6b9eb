"""Exact ties at ``torch.topk``'s k-th value: which tied entries are picked is implementation-defined.

A router whose scores tie (AFMoE zero-initialises its gate, so every expert scores exactly the
same on the first step) sends tokens to experts chosen by the sort's tie-breaking, and PyTorch's
CPU kernel, its CUDA kernel and TVM's ``topk`` break ties differently: the planned step is a valid
step of the model, but its first step can route, and so train, differently from PyTorch's.
:func:`find_topk_ties` runs the model once eagerly (no gradients) when its trace holds a ``topk`` and
counts the calls whose k-th and (k+1)-th values are equal; :func:`warn_topk_ties` says so.
"""
from __future__ import annotations

import warnings
from typing import Callable

from .value_checks import buffers_restored

__all__ = ["find_topk_ties", "warn_topk_ties", "has_topk"]


def has_topk(ep) -> bool:
    """Whether the exported program computes a ``topk`` (only then is the eager run worth it)."""
    import torch

    return any(n.op == "call_function" and n.target is torch.ops.aten.topk.default for n in ep.graph.nodes)


def _tied(values, k: int, dim: int, largest: bool) -> bool:
    import torch

    n = values.shape[dim]
    if k >= n or k <= 0 or not values.is_floating_point():
        return False
    ordered = torch.sort(values.detach(), dim=dim, descending=largest).values
    kth, nxt = ordered.narrow(dim, k - 1, 1), ordered.narrow(dim, k, 1)
    return bool((kth == nxt).any())


def find_topk_ties(run: Callable[[], object], module) -> int:
    """Run ``run()`` eagerly without gradients (``module``'s buffers restored after); the number of
    ``topk`` calls tied at their k-th value."""
    import torch
    from torch.overrides import TorchFunctionMode

    found = [0]

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in (torch.topk, torch.Tensor.topk):
                x = args[0]
                k = args[1] if len(args) > 1 else kwargs.get("k")
                dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
                largest = args[3] if len(args) > 3 else kwargs.get("largest", True)
                if isinstance(x, torch.Tensor) and isinstance(k, int) and x.dim() and _tied(x, k, dim, largest):
                    found[0] += 1
            return func(*args, **kwargs)

    with buffers_restored(module), torch.no_grad(), Watch():
        run()
    return found[0]


def warn_topk_ties(count: int, model_name: str) -> None:
    """A ``RuntimeWarning`` that ``count`` topk calls met exact ties on the example inputs."""
    if count:
        warnings.warn(
            f"{model_name}: {count} torch.topk call(s) met exact ties at the k-th value on the example inputs "
            "(e.g. a zero-initialised MoE router: every expert scores the same). Which tied entries are picked "
            "is implementation-defined (PyTorch's CPU and CUDA kernels and TVM's topk differ), so the planned "
            "step may route, and train, differently from PyTorch's until the ties break. Memory is planned "
            "the same either way.", RuntimeWarning, stacklevel=3)
