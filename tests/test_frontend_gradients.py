"""The gradients registered by roam_tvm.frontend.gradients, each checked against torch in float64
through a full train_step (SGD, lr=1: the update is minus the gradient)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from roam_tvm.frontend import SGD  # noqa: E402
from roam_tvm.frontend.gradients import has_gradient  # noqa: E402
from test_numerics import compare_step  # noqa: E402

F = torch.nn.functional


class OpNet(torch.nn.Module):
    def __init__(self, op, d=12, c=4):
        super().__init__()
        self.l1 = torch.nn.Linear(d, d)
        self.op = op
        self.l2 = torch.nn.LazyLinear(c)

    def forward(self, x):
        return self.l2(self.op(self.l1(x)))


OPS = {
    "gelu": lambda h: F.gelu(h),
    "gelu_tanh": lambda h: F.gelu(h, approximate="tanh"),
    "strided_slice": lambda h: h[:, 1:11:3] * 2.0 + h[:, -4:],
    "squeeze": lambda h: h.unsqueeze(1).squeeze(1),
    "hardtanh_clip": lambda h: F.hardtanh(h, -0.5, 0.5),
    # inputs exactly at the clip bounds: torch passes no gradient there, nor do we
    "hardtanh_at_bounds": lambda h: F.hardtanh(torch.cat([h[:, :4], torch.full_like(h[:, 4:8], 0.5),
                                                         torch.full_like(h[:, 8:], -0.5)], dim=1), -0.5, 0.5) + h,
    "gather": lambda h: torch.gather(h, 1, torch.tensor([[0, 3, 3, 7]] * h.shape[0])),
    "leaky_relu": lambda h: F.leaky_relu(h, 0.1),
    # silu's gradient reads its input only (gradients._silu_grad_from_input); gated as in LLaMA
    "silu_gated": lambda h: F.silu(h[:, :6]) * h[:, 6:],
    # relu whose input is exactly 0 on some elements: its gradient there must be 0, as in torch
    "relu_at_zero": lambda h: F.relu(torch.cat([h[:, :6], torch.zeros_like(h[:, 6:])], dim=1) * 1.0) + h,
}


def _all_ops(h):
    # every op on its own slice of features, concatenated: one build checks them all
    return torch.cat([OPS[k](h) for k in OPS], dim=1)


def test_all_registered_gradients_float64():
    torch.manual_seed(0)
    m = OpNet(_all_ops).double()
    x = torch.randn(6, 12, dtype=torch.float64)
    m(x)  # materialise the lazy layer
    y = torch.randint(0, 4, (6,))
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=1.0), dtype="float64")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(OPS))
def test_registered_gradient_float64(name):
    torch.manual_seed(0)
    m = OpNet(OPS[name]).double()
    x = torch.randn(6, 12, dtype=torch.float64)
    m(x)  # materialise the lazy layer
    y = torch.randint(0, 4, (6,))
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=1.0), dtype="float64")


def test_registered_ops_have_gradients():
    from roam_tvm.frontend.gradients import ensure_registered

    ensure_registered()
    for op in ("relax.squeeze", "relax.gather_elements", "relax.strided_slice", "relax.nn.gelu",
               "relax.nn.gelu_tanh", "relax.clip"):
        assert has_gradient(op), op


def test_relu_gradient_reads_the_output_and_tvm_is_restored():
    """from_torch takes relu's gradient from relu's output (the input can die after the
    forward); TVM's own registration is back in place afterwards."""
    import tvm
    from tvm import relax

    from roam_tvm import from_torch

    op = tvm.ir.Op.get("relax.nn.relu")
    before = op.get_attr("FPrimalGradient")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    ts = from_torch(m, (torch.randn(4, 8),), (torch.randint(0, 3, (4,)),), loss="cross_entropy",
                    optimizer=SGD(lr=0.1), quiet=True)
    assert op.get_attr("FPrimalGradient").same_as(before)
    text = ts.mod.script()
    relu_out = [ln.split(":")[0].strip() for ln in text.splitlines() if "R.nn.relu(" in ln]
    assert relu_out, "the step keeps a relu"
    # the backward's mask compares relu's output with 0
    assert any(f"R.greater({relu_out[0]}," in ln for ln in text.splitlines()), text[:3000]


class NormNet(torch.nn.Module):
    """Every norm configuration on its own slice of a (6, 24) hidden state; one build."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(12, 24)
        self.ln = torch.nn.LayerNorm(6)                                 # last axis, affine
        self.ln_plain = torch.nn.LayerNorm(6, elementwise_affine=False)  # no gamma/beta
        self.ln_nobias = torch.nn.LayerNorm(6, bias=False)              # gamma only
        self.ln2 = torch.nn.LayerNorm((2, 3))                           # two normalised axes
        self.bn1 = torch.nn.BatchNorm1d(6)                               # (N, C)
        self.bn1_seq = torch.nn.BatchNorm1d(2)                           # (N, C, L)
        self.bn2 = torch.nn.BatchNorm2d(2)                               # (N, C, H, W)
        self.bn2_plain = torch.nn.BatchNorm2d(2, affine=False)
        self.l2 = torch.nn.Linear(6 * 4 + 6 + 6 + 12 + 12, 4)

    def forward(self, x):
        h = self.l1(x)
        n = h.shape[0]
        a, b, c, d = h[:, 0:6], h[:, 6:12], h[:, 12:18], h[:, 18:24]
        parts = [
            self.ln(a), self.ln_plain(b), self.ln_nobias(c),
            self.ln2(d.reshape(n, 2, 3)).reshape(n, 6),
            self.bn1(a * 2.0 + 1.0),
            self.bn1_seq(b.reshape(n, 2, 3)).reshape(n, 6),
            self.bn2(torch.cat([c, d], 1).reshape(n, 2, 2, 3)).reshape(n, 12),
            self.bn2_plain(torch.cat([a, d], 1).reshape(n, 2, 3, 2)).reshape(n, 12),
        ]
        return self.l2(torch.relu(torch.cat(parts, 1)))


def test_norm_gradients_float64():
    """layer_norm / batch_norm gradients (norm_grad.py) and BN running statistics against
    torch autograd in float64, SGD lr=1 and Adam (the update maps the gradient 1:1)."""
    torch.manual_seed(0)
    m = NormNet().double()
    for mod in m.modules():  # non-trivial gamma/beta, so their gradients matter
        if isinstance(mod, (torch.nn.LayerNorm, torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            with torch.no_grad():
                if mod.weight is not None:
                    mod.weight.uniform_(0.5, 1.5)
                if getattr(mod, "bias", None) is not None:
                    mod.bias.uniform_(-0.5, 0.5)
    x = torch.randn(6, 12, dtype=torch.float64)
    y = torch.randint(0, 4, (6,))
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=1.0), dtype="float64")


def test_norms_have_gradients():
    from roam_tvm.frontend.gradients import ensure_registered

    ensure_registered()
    for op in ("relax.nn.layer_norm", "relax.nn.batch_norm"):
        assert has_gradient(op), op
