"""``module.to(dtype)`` calls inside a forward that change nothing, made traceable.

Some models cast a submodule inside ``forward`` (Hugging Face's Switch Transformers router:
``self.classifier = self.classifier.to(self.dtype)``, for its "selective precision"). Under
``torch.export`` the parameters are tracing tensors, so ``nn.Module._apply`` cannot update
them in place and tries ``torch.utils.swap_tensors``, which fails ("Couldn't swap
Linear.weight"). When every parameter and buffer already has the requested dtype and device,
the cast is a no-op in eager PyTorch; :func:`noop_module_casts` makes it return the module
unchanged while tracing. A cast that would change something still goes to PyTorch (and
fails in the trace as before, with the model's own line named).
"""
from __future__ import annotations

import contextlib


def _changes_nothing(module, args, kwargs) -> bool:
    import torch

    try:
        device, dtype, _, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    except (TypeError, RuntimeError):
        return False
    if memory_format is not None:
        return False
    for t in list(module.parameters()) + list(module.buffers()):
        if dtype is not None and t.is_floating_point() and t.dtype != dtype:
            return False
        if device is not None and t.device != torch.device(device):
            return False
    return True


@contextlib.contextmanager
def noop_module_casts():
    """While active, ``nn.Module.to(...)`` returns the module itself when it would change
    no parameter or buffer (see the module docstring)."""
    import torch

    original = torch.nn.Module.to

    def to(self, *args, **kwargs):
        if _changes_nothing(self, args, kwargs):
            return self
        return original(self, *args, **kwargs)

    torch.nn.Module.to = to
    try:
        yield
    finally:
        torch.nn.Module.to = original
