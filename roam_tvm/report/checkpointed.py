"""The hand-written baseline: ``torch.utils.checkpoint`` around every ResNet stage or transformer block.

This is what users write when a model does not fit: wrap each stage (ResNet:
the blocks between two changes of width) or each transformer block in
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``. The forward
then keeps only the block inputs, and the backward recomputes each block's
forward before differentiating it.

* :func:`checkpointed_spec` returns a copy of a zoo spec with those wrappers;
  its peak comes from the same eager simulator as the ``pytorch`` baseline
  (:func:`~roam_tvm.report.pytorch_peak.simulate_eager_step`), which records
  the recomputed ops too.
* :func:`eager_step_time` gives the step's H100 roofline time from the aten
  ops PyTorch runs (per op ``max(FLOPs / 989e12, bytes / 3.35e12)``, FLOPs
  from ``torch.utils.flop_counter``'s formulas, bytes the tensors read and
  written). The checkpointing overhead is the checkpointed step's time over
  the plain step's, minus one: the same accounting on both sides, but on
  eager (unfused) ops, so it is not directly the roofline of roam's fused
  kernels.
"""
from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["checkpointed_spec", "eager_step_time", "checkpoint_units"]

H100_FLOPS = 989e12  # as roam_tvm.remat.cost; not imported so the baseline shares no code with the planner
H100_BANDWIDTH = 3.35e12


class _Checkpointed(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        from torch.utils.checkpoint import checkpoint

        return checkpoint(self.inner, *args, use_reentrant=False, **kwargs)


def checkpoint_units(model: nn.Module) -> str:
    """Wrap ``model``'s stages or blocks in place; returns what was wrapped (for the report).

    Raises
    ------
    ValueError
        For a model with no known stages or blocks.
    """
    from ..zoo.vision import ResNet18, ResNet50

    if isinstance(model, (ResNet18, ResNet50)):
        stages: list[list[nn.Module]] = []
        width = None
        for blk in model.layers:
            out = next(m for m in reversed(list(blk.modules())) if isinstance(m, nn.BatchNorm2d)).num_features
            if out != width:
                stages.append([])
                width = out
            stages[-1].append(blk)
        model.layers = nn.Sequential(*[_Checkpointed(nn.Sequential(*s)) for s in stages])
        return f"{len(stages)} ResNet stages"
    hf = getattr(model, "hf", None)
    blocks = getattr(getattr(hf, "transformer", hf), "h", None)
    if isinstance(blocks, nn.ModuleList):
        for i, blk in enumerate(blocks):
            blocks[i] = _Checkpointed(blk)
        return f"{len(blocks)} transformer blocks"
    raise ValueError(f"per-block checkpointing: no ResNet stages or GPT-2 blocks in {type(model).__name__}; "
                     f"it is defined for the zoo's resnet18, resnet50 and gpt2-* models")


def checkpointed_spec(spec) -> tuple[Any, str]:
    """A copy of ``spec`` whose model checkpoints every stage or block, and what was wrapped."""
    out = copy.copy(spec)
    out.model = copy.deepcopy(spec.model)
    return out, checkpoint_units(out.model)


class _Roofline(TorchDispatchMode):
    """Sums per aten op the larger of FLOPs at the tensor-core rate and bytes at HBM bandwidth."""

    def __init__(self):
        super().__init__()
        from torch.utils.flop_counter import flop_registry

        self.registry = flop_registry
        self.seconds = 0.0
        self.flops = 0
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace in ("prim", "profiler"):
            return out
        ins, _ = tree_flatten((args, kwargs))
        outs, _ = tree_flatten(out)
        nbytes = sum(t.numel() * t.element_size() for t in (*ins, *outs) if isinstance(t, torch.Tensor))
        f = 0
        fn = self.registry.get(func._overloadpacket)
        if fn is not None:
            f = int(fn(*args, **kwargs, out_val=out))
        self.flops += f
        self.ops += 1
        self.seconds += max(f / H100_FLOPS, nbytes / H100_BANDWIDTH)
        return out


def eager_step_time(spec) -> dict[str, float]:
    """Roofline seconds, FLOPs and aten ops of one eager training step (forward, backward, optimizer),
    run on fake tensors (no memory, no compute)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ..zoo import LossWrapper, torch_optimizer
    from .pytorch_peak import meta_copy

    fake = FakeTensorMode(allow_non_fake_inputs=True)
    model = meta_copy(spec.model, fake)
    model.train()
    wrapped = LossWrapper(model, spec.loss, len(spec.example_inputs))
    args = tuple(fake.from_tensor(torch.empty_like(a.detach(), device="meta"), static_shapes=True)
                 for a in spec.args)
    opt = torch_optimizer(spec.optimizer, [p for p in model.parameters() if p.requires_grad], foreach=False)
    mode = _Roofline()
    with fake:
        for record in (False, True):  # the first step creates the optimizer states
            opt.zero_grad(set_to_none=True)
            if record:
                with mode:
                    wrapped(*args).backward()
                    opt.step()
            else:
                wrapped(*args).backward()
                opt.step()
    return {"seconds": mode.seconds, "flops": float(mode.flops), "ops": mode.ops}
