"""The model zoo: every model builds small, runs a training step, exports; sizes, errors, meta mode, factories."""
import json
import textwrap

import pytest
import torch

from roam_tvm.zoo import (MODELS, ModelSpec, OptimizerConfig, ZooError, get_model, load_factory, meta_args,
                          torch_optimizer)

EXPECTED = {"mlp", "cnn", "resnet18", "resnet50", "vgg11", "mobilenet_v2", "vit-tiny", "vit-b16", "bert-base", "gpt2-small",
            "gpt2-medium", "gpt2-xl", "gpt2-xl-paper"}


def test_registry_names_and_info():
    assert EXPECTED <= set(MODELS)
    for name, info in MODELS.items():
        assert info.description
        assert set(info.defaults) == set(info.sizes) == set(info.small_sizes)
    assert MODELS["gpt2-xl-paper"].needs_meta_for_default
    assert not MODELS["resnet18"].needs_meta_for_default


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_small_models_train_step(name):
    spec = get_model(name, small=True)
    assert isinstance(spec, ModelSpec) and spec.small and spec.name == name
    assert spec.model.training
    json.dumps(spec.config)
    out = spec.model(*spec.example_inputs)
    assert isinstance(out, torch.Tensor)
    loss = spec.wrapped()(*spec.example_inputs, *spec.targets)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert torch.allclose(loss, spec.loss_fn(out, *spec.targets))
    loss.backward()
    opt = spec.make_optimizer()
    opt.step()


def test_loss_conventions():
    spec = get_model("gpt2-small", small=True)
    logits = spec.model(*spec.example_inputs)
    (tgt,) = spec.targets
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    assert torch.equal(spec.loss_fn(logits, tgt), ref)
    # next-token targets: inputs shifted by one
    assert tgt.shape == spec.example_inputs[0].shape


def test_gpt2_xl_paper_setup_small():
    spec = get_model("gpt2-xl-paper", small=True, batch=3, seq=8)
    out = spec.model(*spec.example_inputs)
    assert out.shape == (3, 8, 64)
    assert spec.targets[0].shape == (3, 8) and int(spec.targets[0].abs().sum()) == 0
    assert spec.optimizer == OptimizerConfig("adam", lr=0.1, weight_decay=1e-4)
    assert spec.loss == "cross_entropy"


def test_sizes_from_flags_and_determinism():
    a = get_model("resnet18", small=True, batch=3, image=16, seed=1)
    b = get_model("resnet18", small=True, batch=3, image=16, seed=1)
    assert a.example_inputs[0].shape == (3, 3, 16, 16)
    assert torch.equal(a.example_inputs[0], b.example_inputs[0])
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)
    assert a.config["batch"] == 3 and a.config["image"] == 16


def test_errors():
    with pytest.raises(ZooError, match="valid models: .*resnet18"):
        get_model("resnet19")
    with pytest.raises(ValueError, match="patch"):
        get_model("vit-tiny", image=100, meta=True)
    with pytest.raises(ZooError, match="positive"):
        get_model("mlp", batch=0)
    with pytest.raises(ZooError, match="does not apply"):
        get_model("mlp", seq=5)
    with pytest.raises(ZooError, match="position"):
        get_model("gpt2-small", seq=5000, meta=True)


def test_meta_gpt2_xl_paper_is_free():
    spec = get_model("gpt2-xl-paper", batch=1, seq=1024, meta=True)
    assert spec.meta and all(p.is_meta for p in spec.model.parameters())
    assert all(t.is_meta for t in spec.args)
    assert 1.5e9 < spec.num_params() < 1.6e9
    assert spec.config["width"] == 1600 and spec.config["layers"] == 48


def test_meta_export_small_gpt2():
    spec = get_model("gpt2-small", small=True, meta=True)
    ep = torch.export.export(spec.wrapped(), spec.args)
    assert len(ep.graph.nodes) > 50
    assert meta_args(get_model("mlp", small=True))[0].is_meta


@pytest.mark.slow
def test_meta_export_gpt2_xl_paper():
    spec = get_model("gpt2-xl-paper", batch=1, seq=1024, meta=True)
    ep = torch.export.export(spec.wrapped(), spec.args)
    assert len(ep.graph.nodes) > 2000


def test_torch_optimizer_kinds():
    p = [torch.nn.Parameter(torch.ones(3))]
    assert isinstance(torch_optimizer(OptimizerConfig("sgd", lr=0.1), p), torch.optim.SGD)
    m = torch_optimizer(OptimizerConfig("momentum", lr=0.1), p)
    assert m.param_groups[0]["momentum"] == 0.9
    assert isinstance(torch_optimizer(OptimizerConfig("adam"), p), torch.optim.Adam)
    assert isinstance(torch_optimizer(OptimizerConfig("adamw"), p), torch.optim.AdamW)
    with pytest.raises(ValueError):
        OptimizerConfig("lion")


def test_optimizer_config_reads_as_torch_optim():
    """A factory's ``{"kind": "sgd", "momentum": 0.9}`` is torch.optim.SGD(momentum=0.9), whose buffer the
    plan must hold (it was planned as plain SGD); AdamW's weight decay defaults to torch's 0.01; values
    torch.optim refuses are refused here, before any export."""
    cfg = OptimizerConfig(kind="sgd", momentum=0.9)
    assert cfg.kind == "momentum" and cfg.state_per_param == 1
    p = [torch.nn.Parameter(torch.ones(3))]
    assert torch_optimizer(cfg, p).param_groups[0]["momentum"] == 0.9
    assert OptimizerConfig("adamw").weight_decay == torch.optim.AdamW(p).defaults["weight_decay"]
    assert OptimizerConfig("adam").weight_decay == 0.0
    for bad in (dict(lr=-1e-3), dict(lr=0.0), dict(momentum=-0.5), dict(kind="adam", betas=(0.9, 1.0)),
                dict(eps=-1.0), dict(weight_decay=-0.1), dict(lr=float("nan"))):
        with pytest.raises(ValueError):
            OptimizerConfig(**bad)


def test_load_factory(tmp_path):
    f = tmp_path / "mymodel.py"
    f.write_text(textwrap.dedent("""
        import torch
        def factory():
            m = torch.nn.Linear(4, 2)
            return m, (torch.randn(3, 4),), (torch.randn(3, 2),)
        def classifier():
            m = torch.nn.Linear(4, 5)
            return m, torch.randn(3, 4), torch.tensor([0, 1, 4])
    """))
    spec = load_factory(f"{f}:factory")
    assert spec.loss == "mse" and len(spec.example_inputs) == 1
    assert spec.wrapped()(*spec.args).dim() == 0
    assert load_factory(f"{f}:classifier").loss == "cross_entropy"
    with pytest.raises(ZooError, match="not found"):
        load_factory(str(tmp_path / "nope.py") + ":factory")
    with pytest.raises(ZooError, match="no callable 'missing'.*classifier"):
        load_factory(f"{f}:missing")
    with pytest.raises(ZooError, match="path/to/file.py:factory"):
        load_factory(str(f))
