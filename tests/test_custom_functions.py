"""A model's own torch.autograd.Function (roam_tvm/frontend/custom_functions.py): torch.export keeps only its
forward, so a backward that is not that forward's gradient is refused; one that is trains as PyTorch does."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend.custom_functions import record_functions  # noqa: E402
from roam_tvm.frontend.errors import TraceError, UnsupportedError  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class ClampSTE(torch.autograd.Function):
    """Straight-through estimator: clamp forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, g):
        return g


class Swish(torch.autograd.Function):
    """The memory-saving swish of EfficientNet ports: saves x only, backward written out (its true gradient)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * s * (1 + x * (1 - s))


class ScaledTanh(torch.autograd.Function):
    """New-style Function (``setup_context``), its true gradient."""

    @staticmethod
    def forward(x, scale):
        return torch.tanh(x) * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.scale = inputs[1]

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * ctx.scale * (1 - torch.tanh(x) ** 2), None


class _Net(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.a, self.b = nn.Linear(10, 16), nn.Linear(16, 4)

    def forward(self, x):
        h = self.a(x)
        h = self.fn.apply(h, 0.5) if self.fn is ScaledTanh else self.fn.apply(h)
        return self.b(h)


def _made(fn):
    torch.manual_seed(0)
    model = _Net(fn)
    with torch.no_grad():
        model.a.weight.mul_(5.0)  # many pre-activations outside [-1, 1]
    return model, (torch.randn(6, 10),), (torch.randint(0, 4, (6,)),)


def test_straight_through_backward_is_refused():
    model, x, y = _made(ClampSTE)
    with pytest.raises(UnsupportedError, match=r"Function ClampSTE whose backward.*detach"):
        from_torch(model, x, y, optimizer=SGD(lr=1.0), quiet=True)


class CudaOnlyBackward(torch.autograd.Function):
    """A forward that runs anywhere and a backward that needs a CUDA kernel (raises on CPU)."""

    @staticmethod
    def forward(ctx, x):
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("my_fused_tanh_backward: CUDA kernel only")


def test_failing_eager_backward_names_the_check_not_the_trace():
    model, x, y = _made(CudaOnlyBackward)
    with pytest.raises(TraceError) as e:
        from_torch(model, x, y, optimizer=SGD(lr=1.0), quiet=True)
    msg = str(e.value)
    assert "the model traced, but checking the backward of its autograd.Function(s) CudaOnlyBackward" in msg
    assert "CUDA kernel only" in msg and "could not trace" not in msg


class MaskedSoftmax(torch.autograd.Function):
    """SEW-D / DeBERTa's XSoftmax: the forward zeroes the masked outputs of its softmax in place, so
    autodiff of the inlined forward (the check's reference) meets a saved tensor written after saving."""

    @staticmethod
    def forward(ctx, x):
        mask = x < -1.0
        out = torch.softmax(x.masked_fill(mask, float("-inf")), -1)
        out.masked_fill_(mask, 0.0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return out * (g - (g * out).sum(-1, keepdim=True))


@pytest.mark.parametrize("fn", [Swish, ScaledTanh, MaskedSoftmax])
def test_true_gradient_backward_trains_as_pytorch(fn):
    model, x, y = _made(fn)
    compare_step(model, x, y, "cross_entropy", SGD(lr=1.0))


def test_pytorch_functions_are_not_recorded():
    from torch.utils.checkpoint import checkpoint

    lin = nn.Linear(4, 4)
    with record_functions() as found:
        checkpoint(lin, torch.randn(2, 4, requires_grad=True), use_reentrant=True).sum().backward()
        Swish.apply(torch.randn(3))
    assert found == [Swish]


class _TrainOnlySTE(nn.Module):
    """The estimator applied only in training, after dropout and BatchNorm (checked as traced: training)."""

    def __init__(self):
        super().__init__()
        self.a, self.bn, self.b = nn.Linear(10, 16), nn.BatchNorm1d(16), nn.Linear(16, 4)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        h = self.drop(self.bn(self.a(x)) * 3)
        return self.b(ClampSTE.apply(h) if self.training else h.clamp(-1, 1))


def test_training_only_function_is_checked_and_buffers_restored():
    torch.manual_seed(0)
    model = _TrainOnlySTE()
    before = model.bn.running_mean.clone()
    with pytest.raises(UnsupportedError, match="Function ClampSTE"):
        from_torch(model, (torch.randn(6, 10),), (torch.randint(0, 4, (6,)),), optimizer=SGD(lr=1.0),
                   quiet=True)
    assert torch.equal(model.bn.running_mean, before)
