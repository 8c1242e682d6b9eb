"""Ops whose integer operands torch promotes to the result's floating dtype (float_promotion.in_result_dtype).

TVM 0.27's converters keep an operand's dtype: ``torch.reciprocal(int_tensor)`` became ``1 / x`` in int64, a
floor division that made every value 0 (Idefics2's ``1.0 / nb_patches``: a silently wrong step), and
``int_tensor ** 0.5`` turned ``0.5`` into an int64 ``0``; ``torch.cat`` of a float and a long mask (LayoutLMv3's
default masks) and ``torch.where`` / ``torch.stack`` of mixed dtypes were refused. Each case scales a linear
layer's output by a value computed from integers, so a wrong conversion changes the loss and every gradient."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402

from test_numerics import compare_step  # noqa: E402

# each: ids (int64, values in [1, 6]) -> a float tensor of shape [6]
CASES = {
    "reciprocal": lambda ids: torch.reciprocal(ids),
    "one_over": lambda ids: 1.0 / ids,
    "sigmoid": lambda ids: torch.sigmoid(ids - 3),
    "tanh": lambda ids: torch.tanh(ids - 3),
    "erf": lambda ids: torch.erf(ids - 3),
    "log1p": lambda ids: torch.log1p(ids),
    "log2": lambda ids: torch.log2(ids),
    "log10": lambda ids: torch.log10(ids),
    "expm1": lambda ids: torch.expm1(ids - 4),
    "atan": lambda ids: torch.atan(ids),
    "sqrt_pow": lambda ids: ids ** 0.5,
    "scalar_pow": lambda ids: 1.5 ** (ids - 3),
    "atan2": lambda ids: torch.atan2(ids, torch.full((6,), 2.5)),
    "fmod": lambda ids: torch.fmod(ids, 2.5),
    "remainder": lambda ids: torch.remainder(ids, 2.5),
    "rsub": lambda ids: 1.5 - ids,
    "where": lambda ids: torch.where(ids > 3, ids, torch.full((6,), 0.25)),
    "stack": lambda ids: torch.stack([torch.full((6,), 0.5), ids]).sum(0),
    "cat": lambda ids: torch.cat([torch.ones(3), ids[:3]]),
}


# grouped so that one step checks several (a wrong conversion of any changes the loss and every gradient)
GROUPS = {
    "reciprocals": ("reciprocal", "one_over", "rsub", "scalar_pow", "sqrt_pow"),
    "transcendental": ("sigmoid", "tanh", "erf", "log1p", "log2", "log10", "expm1", "atan"),
    "binary": ("atan2", "fmod", "remainder"),
    "mixed_operands": ("where", "stack", "cat"),
}


class _Scaled(nn.Module):
    def __init__(self, cases: tuple):
        super().__init__()
        self.lin = nn.Linear(4, 6)
        self.cases = cases

    def forward(self, x, ids):
        scale = sum(CASES[c](ids) * (k + 1) for k, c in enumerate(self.cases))
        return self.lin(x) * scale


def test_groups_cover_every_case():
    assert sorted(c for cs in GROUPS.values() for c in cs) == sorted(CASES)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_integer_operands_promoted_as_pytorch(group):
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x = torch.randn(5, 4, generator=g)
    ids = torch.tensor([1, 2, 3, 4, 5, 6])
    for case in GROUPS[group]:  # each case exercises a promotion
        assert CASES[case](ids).dtype == torch.float32, case
    compare_step(_Scaled(GROUPS[group]), (x, ids), (torch.randn(5, 6, generator=g),), "mse", SGD(lr=0.05))
