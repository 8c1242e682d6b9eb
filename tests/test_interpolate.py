"""Bicubic / antialiased / 1-D / 3-D interpolation imported as constant matmuls (frontend/interpolate.py):
one SGD step matches PyTorch's for every mode, and the step holds no index constants."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

import test_numerics  # noqa: E402
from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend.interpolate import axis_matrix  # noqa: E402

F = torch.nn.functional


class _Resized(torch.nn.Module):
    """A parameter resized to the input's grid (a ViT's position embeddings), then a linear head."""

    def __init__(self, shape, kwargs):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(*shape))
        self.kwargs = kwargs
        self.head = torch.nn.Linear(shape[1], 3)

    def forward(self, x):
        y = F.interpolate(self.table, **self.kwargs) * x
        return self.head(y.flatten(2).mean(-1))


CASES = {
    "bicubic_size": ((1, 4, 8, 8), dict(size=(5, 6), mode="bicubic", align_corners=False)),
    "bicubic_aa_down": ((1, 4, 8, 8), dict(size=(4, 4), mode="bicubic", align_corners=False, antialias=True)),
    "bicubic_scale_corners": ((1, 4, 5, 7), dict(scale_factor=1.5, mode="bicubic", align_corners=True)),
    "bilinear_aa": ((1, 4, 9, 6), dict(size=(4, 5), mode="bilinear", antialias=True)),
    "linear_1d": ((1, 4, 7), dict(scale_factor=2.0, mode="linear")),
    "trilinear": ((1, 4, 3, 4, 5), dict(size=(5, 3, 6), mode="trilinear", align_corners=False)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_step_matches_torch(case):
    shape, kwargs = CASES[case]
    torch.manual_seed(0)
    model = _Resized(shape, kwargs)
    out_shape = F.interpolate(model.table, **kwargs).shape
    inputs, targets = [torch.randn(2, *out_shape[1:])], [torch.tensor([0, 2])]
    opt = SGD(lr=0.1)
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=opt, quiet=True)
    test_numerics.compare_step(model, inputs, targets, "cross_entropy", opt, ts=ts)


def test_no_index_constants():
    """An antialiased bicubic resize of a 64-channel table: the step's constants are the two
    small interpolation matrices, not ``[N, C, H', W', taps]`` int64 index tensors."""
    torch.manual_seed(0)
    shape, kwargs = (1, 64, 8, 8), dict(size=(4, 4), mode="bicubic", align_corners=False, antialias=True)
    model = _Resized(shape, kwargs)
    ts = from_torch(model, [torch.randn(2, 64, 4, 4)], [torch.tensor([0, 1])], loss="cross_entropy",
                    optimizer=SGD(lr=0.1), quiet=True)
    consts = []
    tvm.relax.analysis.post_order_visit(
        ts.mod[ts.func_name], lambda e: consts.append(e.value.numpy()) if isinstance(e, tvm.ir.expr.GenericConst) else None)
    big = [c for c in consts if c.size > 64]
    assert all(c.dtype.kind == "f" for c in big), [c.dtype for c in big]
    assert sum(c.nbytes for c in big) <= 2 * 8 * 4 * 4, [c.shape for c in big]


def test_axis_matrix_rows_are_pytorch_weights():
    """The matrix reproduces PyTorch's 1-D resize of any vector (checked here by torch itself)."""
    a = axis_matrix("upsample_bicubic2d.vec", 2, 1, 7, [1, 4], False, None)
    v = torch.randn(7, dtype=torch.float64)
    want = F.interpolate(v.reshape(1, 1, 1, 7), size=(1, 4), mode="bicubic", align_corners=False)
    np.testing.assert_allclose(a @ v.numpy(), want.reshape(-1).numpy(), rtol=1e-12)
