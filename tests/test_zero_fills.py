"""Zero fills folded: products with them are zeros, sums with them the other term (frontend/zero_fills.py)."""
import numpy as np
import pytest
import torch
import tvm
from tvm import relax
from tvm.script import relax as R

from roam_tvm.frontend.zero_fills import fold_zero_fills


def test_first_rnn_step_product_folds():
    """``h0 = zeros``: ``matmul(h0, W^T)`` is zeros and ``zeros + x`` is ``x``; the fill goes."""
    @R.function(private=True)
    def before(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((2, 8), "float32"):
        with R.dataflow():
            full = R.full(R.shape([2, 2, 8]), R.const(0.0, "float32"), dtype="float32")
            h0 = R.strided_slice(full, (0,), (0,), (1,))
            h0r = R.reshape(h0, R.shape([2, 8]))
            wt = R.permute_dims(w, [1, 0])
            hw = R.matmul(h0r, wt)
            xw = R.matmul(x, wt)
            gates = R.add(xw, hw)
            out = R.sigmoid(gates)
            R.output(out)
        return out

    @R.function(private=True)
    def expected(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((2, 8), "float32"):
        with R.dataflow():
            wt = R.permute_dims(w, [1, 0])
            xw = R.matmul(x, wt)
            out = R.sigmoid(xw)
            R.output(out)
        return out

    tvm.ir.assert_structural_equal(fold_zero_fills(before), expected)


def test_zero_minus_x_is_negative_and_product_is_zeros():
    @R.function(private=True)
    def before(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
        with R.dataflow():
            z = R.zeros(R.shape([4]), "float32")
            d = R.subtract(z, x)
            p = R.multiply(y, z)
            out = (d, p)
            R.output(out)
        return out

    @R.function(private=True)
    def expected(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
        with R.dataflow():
            d = R.negative(x)
            p = R.zeros(R.shape([4]), "float32")
            out = (d, p)
            R.output(out)
        return out

    tvm.ir.assert_structural_equal(fold_zero_fills(before), expected)


def test_broadcasting_sum_and_nonzero_fill_are_kept():
    """``zeros[2, 4] + b[4]`` broadcasts ``b`` (not ``b`` itself), and ``full(.., 1)`` is no zero."""
    @R.function(private=True)
    def before(b: R.Tensor((4,), "float32"), y: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            z = R.zeros(R.shape([2, 4]), "float32")
            s = R.add(z, b)
            one = R.full(R.shape([2, 4]), R.const(1.0, "float32"), dtype="float32")
            p = R.multiply(y, one)
            out = (s, p)
            R.output(out)
        return out

    tvm.ir.assert_structural_equal(fold_zero_fills(before), before)


def test_output_var_is_not_aliased_to_a_dataflow_var():
    """A sum bound outside the dataflow block cannot stand for a dataflow var: kept."""
    @R.function(private=True)
    def before(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            z = R.zeros(R.shape([4]), "float32")
            e = R.exp(x)
            s = R.add(e, z)
            R.output(s)
        return s

    after = fold_zero_fills(before)
    tvm.ir.assert_structural_equal(after, before)


class _LastStep(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(6, 8, batch_first=True)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


@pytest.mark.parametrize("cell", [torch.nn.GRU, torch.nn.LSTM])
def test_rnn_from_zeros_has_no_product_with_the_fill_and_matches_torch(cell):
    """An RNN from a zero state: no matmul or product in the step reads a zero fill (the first
    step's recurrent product and its gradient terms are gone), and one Adam step matches
    PyTorch's (test_numerics.compare_step)."""
    import test_numerics
    from roam_tvm.frontend import Adam, from_torch
    from roam_tvm.frontend.relax_walk import bindings, op_name

    torch.manual_seed(0)
    model = _LastStep(cell)
    inputs, targets = [torch.randn(2, 4, 6)], [torch.tensor([0, 2])]
    opt = Adam(lr=1e-3)
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=opt, quiet=True)
    func = ts.mod[ts.func_name]
    zero = set()  # fills and views of them
    for b in bindings(func):
        name = op_name(b.value)
        if name in ("relax.zeros", "relax.full") or (
                name in ("relax.strided_slice", "relax.reshape", "relax.squeeze", "relax.expand_dims")
                and b.value.args[0] in zero):
            zero.add(b.var)
    kernels = [b for b in bindings(func) if op_name(b.value) in ("relax.call_tir", "relax.call_tir_inplace")]
    readers = [b.var for b in kernels if any(a in zero for a in b.value.args[1].fields)
               and "matmul" in str(b.value.args[0])]
    assert not readers, readers
    test_numerics.compare_step(model, inputs, targets, "cross_entropy", opt, ts=ts)
