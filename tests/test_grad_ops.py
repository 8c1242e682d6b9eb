"""Gradients registered by grad_nn.py, grad_index.py and grad_fixes.py (and the index_put
converter), each checked against torch autograd in float64 through a whole train_step
(SGD, lr=1: each update is minus the gradient)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402

from roam_tvm.frontend import SGD  # noqa: E402
from test_numerics import compare_step  # noqa: E402

F = torch.nn.functional
N, D = 4, 12


def _idx(*v):
    return torch.tensor(v, dtype=torch.int64)


class OpsNet(torch.nn.Module):
    """``l1`` -> every op on the hidden state -> ``l2``; ``b`` is a broadcast operand."""

    def __init__(self, ops):
        super().__init__()
        self.l1 = torch.nn.Linear(D, D)
        self.b = torch.nn.Parameter(torch.randn(D))
        if any(k in OPS_F32 for k in ops):
            self.gn = torch.nn.GroupNorm(2, 4)
            self.gn2 = torch.nn.GroupNorm(2, 4)
            with torch.no_grad():
                for g in (self.gn, self.gn2):
                    g.weight.uniform_(0.5, 1.5)
                    g.bias.uniform_(-0.5, 0.5)
        self.ops = ops
        self.l2 = torch.nn.LazyLinear(3)

    def forward(self, x):
        h = self.l1(x) + 0.0 * self.b  # b always has a gradient (0 unless an op reads it)
        ops = {**OPS, **OPS_F32}
        return self.l2(torch.cat([ops[k](self, h).reshape(N, -1) for k in self.ops], 1))


OPS = {
    "pad": lambda m, h: F.pad(h.reshape(N, 3, 4), (1, 2, 0, 1)),
    # negative widths crop: RWKV's token shift (ZeroPad2d((0, 0, 1, -1))), and both signs on one axis
    "pad_crop": lambda m, h: torch.nn.ZeroPad2d((0, 0, 1, -1))(h.reshape(N, 3, 4)) * h.reshape(N, 3, 4),
    "pad_mixed": lambda m, h: F.pad(h.reshape(N, 3, 4), (-1, 2, 1, -2)),
    "concat_one": lambda m, h: torch.cat([h], 1) * h,
    "split": lambda m, h: torch.split(h, [4, 8], 1)[1] * torch.split(h, [4, 8], 1)[0].sum(1, True),
    # b (D,) against a (N, D) mask: its gradient is summed over the batch
    "split_one": lambda m, h: torch.split(h, D, 1)[0] * 2.0,
    "chunk": lambda m, h: torch.chunk(h, 3, 1)[2] * torch.chunk(h, 3, 1)[0],
    "where_broadcast": lambda m, h: torch.where(h > 0.1, h, m.b),
    "where_scalar_column": lambda m, h: torch.where(h[:, :1] > 0, m.b * 2.0, h),
    "cumsum": lambda m, h: torch.cumsum(h, 1),
    "index_add": lambda m, h: torch.zeros(6, D, dtype=h.dtype).index_add(0, _idx(1, 3, 1, 5), h),
    "index_put_acc": lambda m, h: h.index_put((_idx(0, 2, 2),), h[1:4] * 2.0, accumulate=True),
    "index_put_set": lambda m, h: h.index_put((_idx(0, 2),), m.b[None, :] * h[3:4]),
    "index_select": lambda m, h: h[:, _idx(0, 5, 5, 11)],
    "select": lambda m, h: h[:, 3] * h[:, -1],  # take with a 0-d index
    "select_list": lambda m, h: h[:, [4]] * h[:, [-2]],  # take with a one-element 1-d index
    # a scan reading every step of a sequence (Mamba's x[:, :, t]): one gradient per step summed up
    "select_scan": lambda m, h: torch.stack([h.reshape(N, 3, 4)[:, t] * (t + 1.0) for t in range(3)], 1),
    "take_2d": lambda m, h: h[:, torch.tensor([[0, 5], [5, 11]])],
    "scatter": lambda m, h: h.scatter(1, _idx(0, 4, 7).expand(N, 3), h[:, 8:11] * 3.0),
    "scatter_add": lambda m, h: h.scatter_add(1, _idx(0, 4, 4).expand(N, 3), h[:, 8:11]),
    "gather": lambda m, h: torch.gather(h, 1, _idx(0, 3, 3, 7).expand(N, 4)),
    # one index per row (a cross-entropy's class): the gradient is a where, not a scatter
    "gather_one": lambda m, h: torch.gather(h, 1, _idx(2, 0, 11, 2)[:, None]) * h[:, :2],
    "topk": lambda m, h: torch.topk(h, 3, dim=1).values,
}

# TVM legalizes group_norm for float32 / float16 only, and its resize2d rounds float64
# values through float32 (loss 1.4e-9 off in float64): checked in float32
OPS_F32 = {
    "nearest_2x": lambda m, h: F.interpolate(h.reshape(N, 1, 3, 4), scale_factor=2.0,
                                             mode="nearest"),
    "group_norm_3d": lambda m, h: m.gn(h.reshape(N, 4, 3)),
    "group_norm_4d": lambda m, h: m.gn2(h.reshape(N, 4, 3, 1) * 2.0),
}


def _case(ops, dtype=torch.float64):
    torch.manual_seed(0)
    m = OpsNet(ops).to(dtype)
    x = torch.randn(N, D, dtype=dtype)
    m(x)  # materialise the lazy layer
    return m, (x,), (torch.randint(0, 3, (N,)),)


def test_all_new_gradients_float64():
    m, ins, tgs = _case(list(OPS))
    compare_step(m, ins, tgs, "cross_entropy", SGD(lr=1.0), dtype="float64")


def test_group_norm_and_resize_float32():
    m, ins, tgs = _case(list(OPS_F32), torch.float32)
    compare_step(m, ins, tgs, "cross_entropy", SGD(lr=0.1))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(OPS))
def test_new_gradient_float64(name):
    m, ins, tgs = _case([name])
    compare_step(m, ins, tgs, "cross_entropy", SGD(lr=1.0), dtype="float64")


def test_exclusive_cumsum_gradient():
    """TVM's cumsum gradient ignores ``exclusive``; ours: d/dx_j sum_{i} w_i y_i with
    y_i = sum_{k < i} x_k is sum_{i > j} w_i."""
    from roam_tvm.frontend import gradients

    gradients.ensure_registered()
    x = relax.Var("x", relax.TensorType((2, 5), "float64"))
    w = relax.Var("w", relax.TensorType((2, 5), "float64"))
    bb = relax.BlockBuilder()
    with bb.function("f", [x, w]):
        with bb.dataflow():
            y = bb.emit(relax.op.cumsum(x, axis=1, exclusive=True))
            s = bb.emit_output(bb.emit(relax.op.sum(relax.op.multiply(y, w))))
        bb.emit_func_output(s)
    mod = bb.get()
    with gradients.output_based_gradients():
        mod = relax.transform.Gradient("f", require_grads=[mod["f"].params[0]])(mod)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    wv = np.random.default_rng(0).standard_normal((2, 5))
    _, (gx,) = vm["f_adjoint"](tvm.runtime.tensor(np.ones((2, 5))), tvm.runtime.tensor(wv))
    want = np.cumsum(wv[:, ::-1], axis=1)[:, ::-1] - wv
    np.testing.assert_allclose(gx.numpy(), want, rtol=1e-12, atol=1e-12)


def test_unsupported_pad_mode_names_the_mode():
    """(torch decomposes F.pad(mode="reflect") into indexing, so only a Relax reflect pad
    reaches this gradient.)"""
    from roam_tvm.frontend.errors import UnsupportedError
    from roam_tvm.frontend.grad_nn import GRADS

    x = relax.Var("x", relax.TensorType((2, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", [x]):
        call = bb.normalize(relax.op.nn.pad(x, [0, 0, 1, 1], pad_mode="reflect"))
        y = bb.emit(call)
        g = bb.emit(relax.op.ones_like(y))
        with pytest.raises(UnsupportedError, match="reflect"):
            GRADS["relax.nn.pad"](y, call, g, bb)
        bb.emit_func_output(y)


BROADCASTING = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
                "where", "matmul"]


@pytest.mark.parametrize("name", BROADCASTING)
def test_broadcasting_gradients_are_reduced_to_each_operand(name):
    """Every broadcasting op with a gradient: the adjoint of each operand has its shape."""
    from roam_tvm.frontend import gradients

    gradients.ensure_registered()
    a = relax.Var("a", relax.TensorType((3, 1, 4) if name != "matmul" else (2, 1, 3, 4),
                                        "float32"))
    b = relax.Var("b", relax.TensorType((5, 1) if name != "matmul" else (5, 4, 2), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", [a, b]):
        with bb.dataflow():
            if name == "where":
                y = relax.op.where(relax.op.greater(a, relax.const(0.0, "float32")), a, b)
            else:
                y = getattr(relax.op, name)(a, b)
            s = bb.emit_output(bb.emit(relax.op.sum(y)))
        bb.emit_func_output(s)
    mod = bb.get()
    with gradients.output_based_gradients():
        mod = relax.transform.Gradient("f", require_grads=list(mod["f"].params))(mod)
    ret = mod["f_adjoint"].ret_ty.fields[1]
    assert [list(map(int, f.shape.values)) for f in ret.fields] == [
        list(map(int, p.ty.shape.values)) for p in (a, b)]
