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
