"""A model's own ``torch.autograd.Function``: its backward is checked against the gradient of its forward.

``torch.export`` inlines ``Function.forward`` into the graph and keeps no trace of ``Function.backward``, so the
imported step differentiates the forward's ops. Where the user's backward is that gradient (a fused kernel
written out, a memory-saving recompute) nothing changes; where it is not -- a straight-through estimator
(``clamp`` / ``round`` forward, identity backward), gradient reversal or clipping, a surrogate gradient --
the step would silently train another model. :func:`record_functions` records the user-defined Functions
applied while the model is traced (PyTorch's own, such as the reentrant checkpoint, are left alone), and
:func:`check_backwards` runs the model and its loss eagerly twice, once as written and once with each such
Function's forward inlined under autograd, and refuses the model when the parameters' gradients differ.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from .errors import UnsupportedError


class _Context:
    """Stands in for a Function's ``ctx`` when its forward is run under autograd (nothing is saved for a
    backward that will not run)."""

    def __init__(self, args: tuple):
        import torch

        self.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        self.saved_tensors = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_dirty(self, *args) -> None:
        pass

    def mark_non_differentiable(self, *args) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def _is_users(cls) -> bool:
    return not (getattr(cls, "__module__", "") or "").startswith("torch.")


@contextlib.contextmanager
def record_functions() -> Iterator[list]:
    """Within the block, the user-defined ``autograd.Function`` classes applied are listed (in call order,
    once each); they run unchanged."""
    import torch

    base = torch.autograd.Function
    original = base.__dict__["apply"]
    found: list = []

    def apply(cls, *args, **kwargs):
        if _is_users(cls) and cls not in found:
            found.append(cls)
        return original.__func__(cls, *args, **kwargs)

    base.apply = classmethod(apply)
    try:
        yield found
    finally:
        base.apply = original


@contextlib.contextmanager
def _inlined(classes: list) -> Iterator[None]:
    """Within the block, ``cls.apply`` of each listed Function runs its forward under autograd."""
    import torch

    base = torch.autograd.Function
    original = base.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        if cls not in classes:
            return original.__func__(cls, *args, **kwargs)
        if cls.setup_context is not base.setup_context:  # forward(*args), ctx set up separately
            return cls.forward(*args, **kwargs)
        return cls.forward(_Context(args), *args, **kwargs)

    base.apply = classmethod(apply)
    try:
        yield
    finally:
        base.apply = original


def _gradients(fn: Callable, args: tuple, params: list) -> list:
    """The parameters' gradients of ``fn(*args)`` (float64; None where none); the user's ``.grad`` is kept."""
    import torch

    kept = [p.grad for p in params]
    for p in params:
        p.grad = None
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            loss = fn(*args)
        loss = loss if isinstance(loss, torch.Tensor) else loss[0]
        loss.float().sum().backward()
        return [None if p.grad is None else p.grad.detach().double().clone() for p in params]
    finally:
        for p, g in zip(params, kept):
            p.grad = g


def _difference(a, b) -> float:
    """Largest difference relative to the larger gradient; a missing gradient counts as zeros."""
    import torch

    if a is None and b is None:
        return 0.0
    a = torch.zeros_like(b) if a is None else a
    b = torch.zeros_like(a) if b is None else b
    scale = max(a.abs().max().item(), b.abs().max().item(), 1e-12)
    return float((a - b).abs().max().item() / scale) if torch.isfinite(a - b).all() else float("inf")


def check_backwards(fn: Callable, args: tuple, model, classes: list) -> None:
    """Refuse ``model`` if a listed Function's backward is not the gradient of its forward.

    Parameters
    ----------
    fn : callable
        The model with its loss (``export.with_loss``): ``fn(*args)`` is the scalar loss.
    args : tuple
        Example inputs, then targets.
    model : torch.nn.Module
        The user's model, in training mode (its parameters' gradients are compared; its buffers are
        restored).
    classes : list
        The Functions :func:`record_functions` found.

    Raises
    ------
    UnsupportedError
        Some parameter's gradient differs (names the Functions and the way out).
    """
    import torch

    if not classes:
        return
    params = [p for p in model.parameters() if p.requires_grad]
    if not params or any(p.is_meta for p in params):
        return  # nothing to compare (a meta model has no values)
    # in training mode, as traced (a Function may run only then); both runs draw the same dropout masks
    # (same seed, same draws), and the buffers they update (BatchNorm statistics) are put back
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        written = _gradients(fn, args, params)
        # a forward written for its own backward may write in place what autograd saved for the inlined
        # one (SEW-D's XSoftmax fills its softmax output); saved tensors are then copied on write
        with _inlined(classes), torch.autograd.graph.allow_mutation_on_saved_tensors():
            inlined = _gradients(fn, args, params)
    finally:
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
    tol = 1e-4 if all(p.element_size() >= 4 for p in params) else 2e-2
    worst = max(_difference(a, b) for a, b in zip(written, inlined))
    if worst > tol:
        names = ", ".join(c.__qualname__ for c in classes)
        raise UnsupportedError(
            f"the model applies torch.autograd.Function {names} whose backward is not the gradient of its forward "
            f"(parameter gradients differ by {worst:.2g} relative): torch.export keeps only the forward, so the "
            "planned step would differentiate that and train another model. Way out: write the custom gradient "
            "with detach, e.g. a straight-through estimator as x + (f(x) - x).detach(), or "
            "g(x) - (g(x) - f(x)).detach() for forward f and gradient of g.")
