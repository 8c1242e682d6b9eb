"""from_torch(dynamic_shapes=...): each dynamic dim is built and planned at its upper bound."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.frontend import SGD, Adam, DynamicShapeError, from_torch  # noqa: E402

Dim = torch.export.Dim


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_dynamic_batch_is_built_at_its_upper_bound_and_trains_like_torch():
    b = Dim("b", max=16)
    model = _mlp()
    ts = from_torch(copy.deepcopy(model), (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),),
                    optimizer=SGD(lr=0.1), dynamic_shapes=({0: b}, {0: b}), quiet=True)
    assert ts.dynamic_bounds == {"b": 16}
    assert ts.shapes["input"] == ((16, 8), "float32") and ts.shapes["target"] == ((16,), "int64")
    # the same module as a static import at the bound
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    static = from_torch(copy.deepcopy(model), (x,), (y,), optimizer=SGD(lr=0.1), quiet=True)
    assert static.dynamic_bounds == {}
    tvm.ir.assert_structural_equal(ts.mod["train_step"], static.mod["train_step"],
                                   map_free_vars=True)
    # one step at the bound matches torch's
    vm = relax.VirtualMachine(tvm.compile(ts.mod, target="llvm"), tvm.cpu())
    state = ts.initial_values()
    with pytest.raises(ValueError) as e:  # a smaller batch is refused before anything runs
        ts.run(vm, [x[:4].numpy()], [y[:4].numpy()], state)
    assert "(4, 8)" in str(e.value) and "{'b': 16}" in str(e.value) and "@step" not in state
    loss = ts.run(vm, [x.numpy()], [y.numpy()], state)
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref_loss = torch.nn.functional.cross_entropy(ref(x), y)
    ref_loss.backward()
    opt.step()
    assert abs(loss - ref_loss.item()) < 1e-5
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(state[name], p.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_dynamic_batch_and_sequence_of_a_transformer():
    """Slice bounds computed from the sequence length (GPT-2's positions) fold to integers."""
    from roam_tvm.frontend._demo import tiny_gpt2

    b, s = Dim("b", max=4), Dim("s", max=16)
    ids = torch.randint(0, 32, (2, 8))
    model = tiny_gpt2(vocab=32, n_embd=16, n_layer=1, n_head=2, n_positions=32)
    ts = from_torch(copy.deepcopy(model), (ids,), (ids,), optimizer=Adam(lr=1e-3), quiet=True,
                    dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}))
    assert ts.dynamic_bounds == {"b": 4, "s": 16}
    big = torch.randint(0, 32, (4, 16))
    static = from_torch(copy.deepcopy(model), (big,), (big,), optimizer=Adam(lr=1e-3), quiet=True)
    tvm.ir.assert_structural_equal(ts.mod["train_step"], static.mod["train_step"],
                                   map_free_vars=True)


@pytest.mark.parametrize("dim, what", [(Dim("batch"), "batch"), (Dim.AUTO, "AUTO")])
def test_dynamic_dim_without_max_is_refused_before_tracing(monkeypatch, dim, what):
    def no_export(*args, **kwargs):
        raise AssertionError("torch.export ran before the spec was checked")

    monkeypatch.setattr(torch.export, "export", no_export)
    with pytest.raises(DynamicShapeError) as e:
        from_torch(_mlp(), (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),),
                   dynamic_shapes=({0: dim}, None))
    msg = str(e.value)
    assert "example_inputs[0], dim 0" in msg and what in msg and "max=" in msg


def test_dynamic_shapes_needs_one_spec_per_tensor():
    with pytest.raises(DynamicShapeError) as e:
        from_torch(_mlp(), (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),),
                   dynamic_shapes=({0: Dim("b", max=8)},))
    assert "one spec per input then per target" in str(e.value) and "targets[0]" in str(e.value)
    with pytest.raises(DynamicShapeError) as e:
        from_torch(_mlp(), (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),),
                   dynamic_shapes=({5: Dim("b", max=8)}, None))
    assert "dim 5" in str(e.value)


def _backbone(bound):
    n = tvm.tirx.Var("n", "int64")
    attrs = {"tir_var_upper_bound": {"n": bound}} if bound else {}

    @I.ir_module
    class Backbone:
        I.module_attrs({"param_num": 2, "state_num": 0})

        @R.function
        def backbone(x: R.Tensor((n, 8), "float32"), w: R.Tensor((8, 3), "float32"),
                     b: R.Tensor((3,), "float32")):
            R.func_attr(attrs)
            with R.dataflow():
                y = R.add(R.matmul(x, w), b)
                R.output(y)
            return y

    return Backbone


def test_backbone_with_a_bounded_symbolic_batch():
    from roam_tvm.frontend import from_backbone

    ts = from_backbone(_backbone(16), SGD(lr=0.1), loss="mse", quiet=True)
    assert ts.dynamic_bounds == {"n": 16}
    assert ts.shapes["x"] == ((16, 8), "float32") and ts.shapes["target"] == ((16, 3), "float32")
    with pytest.raises(DynamicShapeError) as e:
        from_backbone(_backbone(None), SGD(lr=0.1), loss="mse", quiet=True)
    assert "dim 0" in str(e.value) and "upper bound" in str(e.value)
