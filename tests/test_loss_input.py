"""A loss callable gets the model's whole output (roam_tvm/frontend/loss_input.py): a model returning
``(logits, aux_loss)`` or a dict trains on what its callable reads from it, in the planned step and in
PyTorch's step (zoo.LossWrapper); a callable written for the first tensor still gets it. Each planned step
(roam's order + layout, llvm) is checked against torch.autograd: one SGD step (lr 1), every gradient."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

import numpy as np  # noqa: E402
from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from roam_tvm.frontend.errors import TraceError  # noqa: E402

F = nn.functional


class _TupleOut(nn.Module):
    """logits and a scalar auxiliary loss that depends on the parameters (a router-like term)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.gate = nn.Linear(6, 8), nn.Linear(8, 5), nn.Linear(8, 3)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        return self.b(h), torch.softmax(self.gate(h), -1).pow(2).sum(-1).mean()


class _DictOut(_TupleOut):
    def forward(self, x):
        logits, aux = super().forward(x)
        return {"logits": logits, "aux": aux}


def _tuple_loss(out, y):
    logits, aux = out  # with only out[0] (batch 2) this would unpack the batch
    return F.cross_entropy(logits, y) + 0.5 * aux


def _dict_loss(out, y):
    return F.cross_entropy(out["logits"], y) + 0.5 * out["aux"]


def _tensor_loss(out, y):  # written for the first tensor
    return F.cross_entropy(out, y)


def _data():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, 6, generator=g),), (torch.randint(0, 5, (2,), generator=g),)


def _planned_grads(model, loss):
    """One SGD(lr=1) step planned by roam, on llvm: (loss, {param: before - after})."""
    from tvm import relax

    from roam_tvm.runtime.build import build

    ins, tgt = _data()
    ts = from_torch(model, ins, tgt, loss=loss, optimizer=SGD(lr=1.0), quiet=True)
    vm = relax.VirtualMachine(build(ts.mod, "llvm", order=True, layout=True, order_time_limit=2.0), tvm.cpu())
    state = ts.initial_values()
    before = {k: v.copy() for k, v in state.items()}
    value = ts.run(vm, [t.numpy() for t in ins], [t.numpy() for t in tgt], state)
    return float(value), {n: before[n].astype(np.float64) - state[n] for n in ts.param_names}


def _torch_grads(model, reference):
    """torch.autograd on ``reference(model, inputs, targets)`` (written here, not roam's loss code)."""
    ins, tgt = _data()
    model.zero_grad()
    value = reference(model, *ins, *tgt)
    value.backward()
    return float(value.detach()), {n: p.grad.double().numpy() for n, p in model.named_parameters()
                                   if p.grad is not None}  # None: not on the loss's path


def _match(got, want):
    assert abs(got[0] - want[0]) <= 1e-5 * max(1.0, abs(want[0])), (got[0], want[0])
    assert {n.removeprefix("model.") for n in got[1]} == set(want[1])
    for n, g in got[1].items():
        w = want[1][n.removeprefix("model.")]
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * max(np.abs(w).max(), 1e-6), err_msg=n)


@pytest.mark.parametrize("model_cls,loss", [(_TupleOut, _tuple_loss), (_DictOut, _dict_loss)])
def test_callable_reads_the_whole_output(model_cls, loss):
    """The aux term trains the gate: its gradient is torch's, not zero (the first tensor alone has no
    path to the gate)."""
    model = model_cls()
    got = _planned_grads(model, loss)
    want = _torch_grads(model, lambda m, x, y: loss(m(x), y))
    assert any(np.abs(g).max() > 0 for n, g in got[1].items() if "gate" in n)
    _match(got, want)


def test_callable_for_the_first_tensor_still_gets_it():
    """A callable that fails on the tuple (``F.cross_entropy`` of a tuple) gets the logits."""
    model = _TupleOut()
    got = _planned_grads(model, _tensor_loss)
    want = _torch_grads(model, lambda m, x, y: F.cross_entropy(m(x)[0], y))
    _match(got, want)


def test_pytorch_step_reads_the_same_output():
    """zoo.LossWrapper (PyTorch's step in compare) gives the callable the whole output too."""
    from roam_tvm.zoo import LossWrapper

    model, (ins, tgt) = _TupleOut(), _data()
    value = LossWrapper(model, _tuple_loss, 1)(*ins, *tgt)
    assert torch.allclose(value, _tuple_loss(model(*ins), *tgt))


def test_callable_failing_on_both_names_both():
    def bad(out, y):
        return out["nope"].sum()

    ins, tgt = _data()
    with pytest.raises(TraceError, match="whole output.*first tensor"):
        from_torch(_TupleOut(), ins, tgt, loss=bad, optimizer=SGD(lr=1.0), quiet=True)
