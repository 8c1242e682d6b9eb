"""torch.utils.checkpoint regions are traced as the plain forward (no recomputation in the planned
step): the export counts them and warns with the way out (checkpoint_regions.py)."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

from roam_tvm.frontend.export import export_with_loss  # noqa: E402


class _Net(nn.Module):
    def __init__(self, reentrant=None):
        super().__init__()
        self.a, self.b, self.reentrant = nn.Linear(6, 8), nn.Linear(8, 3), reentrant

    def forward(self, x):
        if self.reentrant is None:
            h = torch.relu(self.a(x))
        else:
            h = checkpoint(lambda t: torch.relu(self.a(t)), x, use_reentrant=self.reentrant)
        return self.b(h)


def _export_warnings(model):
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ep = export_with_loss(model, (x,), (y,), nn.functional.cross_entropy)
    return ep, [str(w.message) for w in caught if "torch.utils.checkpoint" in str(w.message)]


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_forward_warns_with_the_way_out(reentrant):
    ep, msgs = _export_warnings(_Net(reentrant))
    assert len(msgs) == 1 and "1 torch.utils.checkpoint region" in msgs[0] and "--budget" in msgs[0]
    ops = {str(n.target) for g in ep.graph_module.modules() if hasattr(g, "graph") for n in g.graph.nodes
           if n.op == "call_function"}  # the reentrant region is a no-grad submodule
    assert "aten.relu.default" in ops  # the region is traced as the plain forward


def test_plain_forward_does_not_warn():
    from torch.utils import checkpoint as ckpt

    before = (ckpt._checkpoint_without_reentrant_generator, ckpt.CheckpointFunction)
    assert _export_warnings(_Net())[1] == []
    assert (ckpt._checkpoint_without_reentrant_generator, ckpt.CheckpointFunction) == before  # restored


class _Nested(nn.Module):
    """A checkpointed block whose body checkpoints again (Hugging Face Swin's stage around its layers),
    or one reentrant region."""

    def __init__(self, reentrant=False):
        super().__init__()
        self.a, self.b, self.c, self.reentrant = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3), reentrant

    def inner(self, t):
        return torch.relu(self.b(t))

    def outer(self, t):
        return checkpoint(self.inner, t, use_reentrant=self.reentrant) + t

    def forward(self, x):
        return self.c(checkpoint(self.outer, self.a(x), use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_regions_train_like_pytorch(reentrant):
    """Nested non-reentrant regions (their inner one exported as set_grad_enabled(False)) and reentrant
    regions (a no-grad forward) used to give every parameter a zero update; PyTorch's step trains them."""
    import sys
    import os

    sys.path.insert(0, os.path.dirname(__file__))
    import test_numerics
    from roam_tvm.frontend import SGD

    torch.manual_seed(0)
    model = _Nested(reentrant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test_numerics.compare_step(model, (torch.randn(2, 8),), (torch.tensor([0, 2]),), "cross_entropy",
                                   SGD(lr=0.1))


class _AllNoGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 3)

    def forward(self, x):
        with torch.no_grad():
            h = self.a(x)
        return h * 2.0


def test_a_step_that_trains_nothing_is_refused():
    from roam_tvm.frontend import SGD, from_torch
    from roam_tvm.frontend.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="does not depend differentiably on any trainable parameter"):
        from_torch(_AllNoGrad(), (torch.randn(2, 8),), (torch.tensor([0, 2]),), loss="cross_entropy",
                   optimizer=SGD(lr=0.1), quiet=True)
