"""``x[bool_mask] = v`` with ``v`` broadcast to every selected row (index_put._masked_put): zeroing padding or
special-token embeddings (``x[ids == pad] = 0.0``, T5Gemma2's ``x[ids == tok] = p``). TVM 0.27's converter
refused boolean indices ("IndexPut requires integer index"); each case is now ``where(mask, v, x)`` and one
SGD step matches PyTorch's, the broadcast value's gradient included."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class _Masked(nn.Module):
    def __init__(self, case: str):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.special = nn.Parameter(torch.randn(8))
        self.head = nn.Linear(8, 3)
        self.case = case

    def forward(self, ids):
        x = self.emb(ids) * 1.0  # [B, T, D], a copy the writes below may overwrite
        if self.case == "scalar":
            x[ids == 0] = 0.0
        elif self.case == "row_param":
            x[ids == 7] = self.special
        elif self.case == "row_one_param":
            x[ids == 7] = self.special[None]
        elif self.case == "inner_dim":  # a mask over dim 1 only
            x[:, torch.arange(ids.shape[1]) % 2 == 0] = -1.5
        elif self.case == "elementwise":
            x[x < 0] = 0.0
        elif self.case == "accumulate":
            x.index_put_((ids == 7,), self.special, accumulate=True)
        elif self.case == "int_values":  # an integer tensor written into a float one
            x[ids == 0] = torch.tensor(2)
        return self.head(x).mean(1)


@pytest.mark.parametrize("case", ["scalar", "row_param", "row_one_param", "inner_dim", "elementwise",
                                  "accumulate", "int_values"])
def test_boolean_mask_write_matches_pytorch(case):
    torch.manual_seed(0)
    ids = torch.tensor([[0, 7, 3, 7, 0, 2], [5, 0, 7, 1, 9, 7]])
    compare_step(_Masked(case), (ids,), (torch.randn(2, 3),), "mse", SGD(lr=0.1))


class _CompactRows(nn.Module):
    """One row of projected features per image token, written (the older LLaVA merge, ``h[ids == img] =
    feats``) or added (Qwen3-VL's deepstack, ``h[mask, :] = h[mask, :] + feats``)."""

    def __init__(self, add: bool):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.proj = nn.Linear(8, 8)
        self.add = add

    def forward(self, ids, feats):
        h = self.emb(ids) * 1.0
        mask = ids == 15
        if self.add:
            h[mask, :] = h[mask, :] + self.proj(feats)
        else:
            h[mask] = self.proj(feats)
        return h.sum(1)


@pytest.mark.parametrize("add", [False, True], ids=["write", "deepstack_add"])
def test_one_row_per_true_entry_matches_pytorch(add):
    torch.manual_seed(0)
    ids = torch.tensor([[15, 15, 3, 4], [1, 15, 15, 2]])
    compare_step(_CompactRows(add), (ids, torch.randn(4, 8)), (torch.randn(2, 8),), "mse", SGD(lr=0.1))
