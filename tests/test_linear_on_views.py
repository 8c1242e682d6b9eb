"""An ``nn.Linear`` on a non-contiguous 4-D view (ProphetNet's ``lm_head`` on ``[B, ngram, T, H]`` streams
sliced from the hidden states): torch's matmul expands the weight to every batch index for a ``bmm``, a
view in eager and ``B * ngram`` weight copies (plus a batched weight gradient) once imported. The step
reads the weight itself (``simplify.drop_matmul_weight_broadcasts``) and matches PyTorch's."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import Adam, from_torch  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _Streams(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.head = nn.Linear(16, 16), nn.Linear(16, 40, bias=False)

    def forward(self, x):  # x [2, 9, 16]: one main stream of 3 tokens, two predicted streams
        h = torch.tanh(self.proj(x))
        return self.head(h[:, 3:].view(2, 2, 3, 16))[:, 0]


def test_no_weight_copies_and_the_step_matches_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _Streams()
    x, y = torch.randn(2, 9, 16, generator=g), torch.randint(0, 40, (2, 3), generator=g)
    ts = from_torch(model, (x,), (y,), loss="cross_entropy", optimizer=Adam(lr=0.01))
    text = ts.mod[ts.func_name].script()
    assert "(2, 2, 16, 40)" not in text and "(4, 16, 40)" not in text  # no expanded weight, no batched grad
    compare_step(model, (x,), (y,), "cross_entropy", Adam(lr=0.01), ts=ts)
