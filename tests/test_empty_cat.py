"""``torch.cat`` with a 1-D size-0 operand (a key/value cache that starts as ``torch.empty(0)``, as XLM's with
its default ``use_cache``): PyTorch skips such operands; TVM's ``concat`` refused the mixed ranks ("Concat
expects all input tensors to have same ndim"). The converter skips them (``frontend/converters.py``), and
the step matches PyTorch's."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from roam_tvm.frontend import SGD  # noqa: E402
from test_numerics import compare_step  # noqa: E402


class _CachedAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(8, 24), torch.nn.Linear(8, 3)

    def forward(self, x):  # [B, T, 8]
        q, k, v = self.qkv(x).chunk(3, -1)
        cache_k = cache_v = torch.empty(0)  # an empty cache, filled by its first update
        k, v = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
        attn = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, -1)
        return self.out(torch.cat([attn @ v], 1).mean(1))


def test_cat_skips_empty_vectors_and_steps_as_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    compare_step(_CachedAttention(), (torch.randn(2, 5, 8, generator=g),),
                 (torch.randint(0, 3, (2,), generator=g),), "cross_entropy", SGD(lr=0.1))
