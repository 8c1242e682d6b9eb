"""``Tensor.masked_scatter`` (``aten.masked_scatter.default``, masked_scatter.py): a VLM's
image-feature merge, where both the text embeddings and the projected image features train,
and a mask that broadcasts, with more source elements than true positions. Whole steps against
torch autograd."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402

B, T, D, V, IMAGE = 2, 7, 6, 11, 3


class _Vlm(nn.Module):
    """Llava-style: ``embeds.masked_scatter(ids == IMAGE, proj(pixels))``."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.proj = nn.Linear(5, D)
        self.head = nn.Linear(D, V)

    def forward(self, ids, pixels):
        embeds = self.emb(ids)
        mask = (ids == IMAGE).unsqueeze(-1).expand_as(embeds)
        feats = self.proj(pixels).to(embeds.dtype)  # [n_image_tokens, D]
        return self.head(embeds.masked_scatter(mask, feats))


def _ids():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (B, T), generator=g)
    ids[ids == IMAGE] = 0
    ids[0, 1:3] = IMAGE  # 2 image tokens in the first row, 3 in the second
    ids[1, 4:7] = IMAGE
    return ids


def test_vlm_merge_trains_embeddings_and_source():
    torch.manual_seed(0)
    ids = _ids()
    pixels = torch.randn(5, 5)
    compare_step(_Vlm(), (ids, pixels), (torch.randint(0, V, (B, T)),), "cross_entropy",
                 SGD(lr=0.5))


def test_vlm_merge_float64():
    torch.manual_seed(0)
    ids = _ids()
    pixels = torch.randn(5, 5, dtype=torch.float64)
    compare_step(_Vlm().double(), (ids, pixels), (torch.randint(0, V, (B, T)),),
                 "cross_entropy", SGD(lr=1.0), dtype="float64")


class _Broadcast(nn.Module):
    """A ``[B, T, 1]`` mask broadcast over ``D``, and a source with elements to spare (PyTorch
    reads its first ones; the rest get no gradient)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(D, D)
        self.src = nn.Parameter(torch.randn(4, 2 * D))

    def forward(self, x):
        h = self.lin(x)
        mask = h[..., :1] > 0.2
        return h.masked_scatter(mask, self.src * h.mean())


def test_broadcast_mask_and_spare_source():
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    compare_step(_Broadcast(), (x,), (torch.randn(B, T, D),), "mse", SGD(lr=0.05))
