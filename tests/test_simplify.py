"""drop_noop_broadcasts: a broadcast_to onto the input's own shape is its input (no copy kernel)."""
from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.frontend.simplify import drop_noop_broadcasts  # noqa: E402


def _clean(func):
    func = func.with_attr("global_symbol", "main")  # compare bodies, not the functions' names
    mod = relax.transform.CanonicalizeBindings()(tvm.IRModule({"main": func}))
    return relax.transform.DeadCodeElimination()(mod)["main"]


@R.function
def before(s: R.Tensor((1, 2, 4, 4), "float32"), v: R.Tensor((1, 2, 4, 3), "float32"),
           w: R.Tensor((2, 1, 3), "float32")):
    # what torch.export + the importer give for attention's probs @ v, plus a real broadcast
    with R.dataflow():
        p = R.nn.softmax(s, axis=-1)
        a = R.broadcast_to(p, R.shape([1, 2, 4, 4]))
        b = R.reshape(a, R.shape([2, 4, 4]))
        vb = R.broadcast_to(v, R.shape([1, 2, 4, 3]))
        vv = R.reshape(vb, R.shape([2, 4, 3]))
        o = R.matmul(b, vv, out_dtype="float32")
        c = R.broadcast_to(w, R.shape([2, 4, 3]))
        out = R.add(o, c)
        R.output(out)
    return out


@R.function
def expected(s: R.Tensor((1, 2, 4, 4), "float32"), v: R.Tensor((1, 2, 4, 3), "float32"),
             w: R.Tensor((2, 1, 3), "float32")):
    with R.dataflow():
        p = R.nn.softmax(s, axis=-1)
        b = R.reshape(p, R.shape([2, 4, 4]))
        vv = R.reshape(v, R.shape([2, 4, 3]))
        o = R.matmul(b, vv, out_dtype="float32")
        c = R.broadcast_to(w, R.shape([2, 4, 3]))
        out = R.add(o, c)
        R.output(out)
    return out


def test_noop_broadcasts_become_their_input():
    tvm.ir.assert_structural_equal(_clean(drop_noop_broadcasts(before)), _clean(expected))


def test_real_broadcasts_stay():
    got = _clean(drop_noop_broadcasts(before))
    ops = [b.value.op.name for b in got.body.blocks[0].bindings if isinstance(b.value, relax.Call)]
    assert ops.count("relax.broadcast_to") == 1  # only the (2, 1, 3) -> (2, 4, 3) one


def test_values_unchanged():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in ((1, 2, 4, 4), (1, 2, 4, 3), (2, 1, 3))]
    outs = []
    for func in (before, drop_noop_broadcasts(before)):
        mod = relax.transform.LegalizeOps()(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))
        vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
        outs.append(vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


@R.function
def attention_loss(s: R.Tensor((1, 2, 4, 4), "float32"), v: R.Tensor((1, 2, 4, 3), "float32")):
    with R.dataflow():
        p = R.nn.softmax(s, axis=-1)
        a = R.broadcast_to(p, R.shape([1, 2, 4, 4]))
        b = R.reshape(a, R.shape([2, 4, 4]))
        vv = R.reshape(v, R.shape([2, 4, 3]))
        o = R.matmul(b, vv, out_dtype="float32")
        loss = R.sum(o)
        R.output(loss)
    return loss


def _probability_copies(func) -> int:
    """broadcast_to calls on a (1, 2, 4, 4) tensor (the probabilities) in the adjoint."""
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    adj = relax.transform.Gradient("main")(mod)["main_adjoint"]
    return sum(1 for blk in adj.body.blocks for b in blk.bindings
               if isinstance(b.value, relax.Call) and b.value.op.name == "relax.broadcast_to"
               and [int(d) for d in b.value.args[0].ty.shape.values] == [1, 2, 4, 4])


def test_gradient_keeps_no_copy_of_the_probabilities():
    """The backward reads the softmax output itself: no broadcast (a copy kernel once fused) is left."""
    assert _probability_copies(attention_loss) == 1  # what autodiff saw before
    assert _probability_copies(drop_noop_broadcasts(attention_loss)) == 0


@R.function
def rnn_projection(x: R.Tensor((7, 3, 16), "float32"), w: R.Tensor((96, 16), "float32"),
                   u: R.Tensor((2, 16, 5), "float32")):
    # an RNN's input projection over all time steps, as the importer writes it, and a
    # broadcast that does change the result's batch (left alone)
    with R.dataflow():
        wt = R.permute_dims(w, axes=[1, 0])
        wb = R.broadcast_to(wt, R.shape([7, 16, 96]))
        y = R.matmul(x, wb, out_dtype="float32")
        ub = R.broadcast_to(u, R.shape([2, 16, 5]))
        z = R.matmul(R.reshape(x, R.shape([7, 3, 16])), R.broadcast_to(wt, R.shape([7, 16, 96])))
        q = R.matmul(R.ones(R.shape([2, 3, 16]), "float32"), ub)
        R.output(y, z, q)
    return (y, z, q)


@R.function
def rnn_projection_expected(x: R.Tensor((7, 3, 16), "float32"), w: R.Tensor((96, 16), "float32"),
                            u: R.Tensor((2, 16, 5), "float32")):
    with R.dataflow():
        wt = R.permute_dims(w, axes=[1, 0])
        y = R.matmul(x, wt, out_dtype="float32")
        ub = R.broadcast_to(u, R.shape([2, 16, 5]))
        z = R.matmul(R.reshape(x, R.shape([7, 3, 16])), wt)
        q = R.matmul(R.ones(R.shape([2, 3, 16]), "float32"), ub)
        R.output(y, z, q)
    return (y, z, q)


def test_weight_broadcast_over_time_steps_is_dropped():
    from roam_tvm.frontend.simplify import drop_matmul_weight_broadcasts

    got = drop_matmul_weight_broadcasts(rnn_projection)
    tvm.ir.assert_structural_equal(_clean(got), _clean(rnn_projection_expected))
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in ((7, 3, 16), (96, 16), (2, 16, 5))]
    outs = []
    for func in (rnn_projection, got):
        mod = relax.transform.LegalizeOps()(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))
        vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
        outs.append([o.numpy() for o in vm["main"](*[tvm.runtime.tensor(a) for a in args])])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@R.function
def flattened_weight_broadcast(a: R.Tensor((4, 8, 16), "float32"), w: R.Tensor((96, 16), "float32"),
                               u: R.Tensor((2, 16, 96), "float32")):
    # torch's matmul of a non-contiguous [2, 2, 8, 16] activation by a weight: the weight expanded to
    # every batch index and flattened with them; a 3-D operand broadcast the same way is left alone
    with R.dataflow():
        wt = R.permute_dims(w, axes=[1, 0])
        wide = R.broadcast_to(wt, R.shape([2, 2, 16, 96]))
        flat = R.reshape(wide, R.shape([4, 16, 96]))
        y = R.matmul(a, flat)
        wide3 = R.broadcast_to(u, R.shape([2, 2, 16, 96]))
        flat3 = R.reshape(wide3, R.shape([4, 16, 96]))
        z = R.matmul(a, flat3)
        R.output(y, z)
    return (y, z)


@R.function
def flattened_weight_broadcast_expected(a: R.Tensor((4, 8, 16), "float32"), w: R.Tensor((96, 16), "float32"),
                                        u: R.Tensor((2, 16, 96), "float32")):
    with R.dataflow():
        wt = R.permute_dims(w, axes=[1, 0])
        y = R.matmul(a, wt)
        wide3 = R.broadcast_to(u, R.shape([2, 2, 16, 96]))
        flat3 = R.reshape(wide3, R.shape([4, 16, 96]))
        z = R.matmul(a, flat3)
        R.output(y, z)
    return (y, z)


def test_weight_broadcast_flattened_with_the_batch_is_dropped():
    from roam_tvm.frontend.simplify import drop_matmul_weight_broadcasts

    got = drop_matmul_weight_broadcasts(flattened_weight_broadcast)
    tvm.ir.assert_structural_equal(_clean(got), _clean(flattened_weight_broadcast_expected))
