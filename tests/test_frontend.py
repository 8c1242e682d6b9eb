"""Frontend API: signature, names, in-place updates, update placement, errors, backbone, meta."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from roam_tvm.frontend import (SGD, Adam, AdamW, DynamicShapeError, FrontendError,  # noqa: E402
                               MetaWeightsError, MissingGradientError, TraceError,
                               UnsupportedError, from_backbone, from_torch)
from roam_tvm.frontend.step import _VIEW_OPS, _bindings, _free_vars, _op_name  # noqa: E402


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 16)
        self.l2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def _mlp_ts(opt=None):
    torch.manual_seed(0)
    m = MLP()
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    return m, x, y, from_torch(m, (x,), (y,), optimizer=opt or Adam(lr=1e-2))


_EXE = {}


def _compiled(ts, key):
    if key not in _EXE:
        _EXE[key] = tvm.compile(ts.mod, target="llvm")
    return _EXE[key]


def test_signature_names():
    m, x, y, ts = _mlp_ts()
    assert ts.param_names == [n for n, _ in m.named_parameters()]
    assert ts.input_names == ["x"] and ts.target_names == ["target"]
    assert ts.state_names == [f"{n}.{s}" for n, _ in m.named_parameters()
                              for s in ("exp_avg", "exp_avg_sq")]
    kinds = [k for _, k in ts.signature]
    assert kinds == sorted(kinds, key=["input", "target", "param", "state", "hyper"].index)
    f = ts.mod["train_step"]
    assert [p.name for p in f.params] == [n for n, _ in ts.signature]
    h = ts.hyper_values(3)
    assert set(h) == {"hyper.step_size", "hyper.bc2_sqrt"}
    assert np.isclose(float(h["hyper.step_size"]), 1e-2 / (1 - 0.9**3))
    assert h["hyper.step_size"].shape == () and h["hyper.step_size"].dtype == np.float32
    init = ts.initial_values()
    assert np.array_equal(init["l1.weight"], m.l1.weight.detach().numpy())
    assert not init["l1.weight.exp_avg"].any()
    # the return value: loss, then aliases of the updated buffers
    assert isinstance(f.ret_ty, relax.TupleType)
    assert len(f.ret_ty.fields[0].shape.values) == 0


def _update_positions(f):
    binds = _bindings(f)
    ups = {}
    for i, b in enumerate(binds):
        if isinstance(b.value, relax.Call) and _op_name(b.value) == "relax.call_tir_inplace":
            ups[i] = b
    return binds, ups


def test_updates_in_place_and_ordered():
    """Every update: reads the param as arg 0 (in place), and nothing after it reads the param
    or a view of it; it sits right after its gradient / last reader (only other updates between)."""
    m, x, y, ts = _mlp_ts(SGD(lr=0.1, momentum=0.9))
    f = ts.mod["train_step"]
    binds, ups = _update_positions(f)
    params = {p.name: p for p in f.params}
    assert len(ups) == len(ts.param_names)
    for i, b in ups.items():
        args = b.value.args[1].fields
        p = args[0]
        assert p.name in ts.param_names
        assert [int(v) for v in b.value.attrs.inplace_indices] == [0, 2]
        views = {p}
        for j, later in enumerate(binds):
            fv = set(_free_vars(later.value))
            if j > i:
                assert not (fv & views) or later.var.name.startswith("gv"), \
                    f"{later.var.name} reads {p.name} after its update"
            elif j < i and (fv & views) and _op_name(later.value) in _VIEW_OPS:
                views.add(later.var)
        # placement: the binding before the update run (skipping other updates) defines the
        # gradient or reads the param
        k = i - 1
        while k in ups:
            k -= 1
        prev = binds[k]
        g = args[1]
        assert prev.var.same_as(g) or (set(_free_vars(prev.value)) & views)
    assert params  # silence


def test_inplace_buffers_are_mutated():
    """The param / state tensors passed in are mutated; no copy is made."""
    m, x, y, ts = _mlp_ts(SGD(lr=0.1, momentum=0.9))
    vm = relax.VirtualMachine(_compiled(ts, "mlp-mom"), tvm.cpu())
    init = ts.initial_values()
    args, ptrs = [], {}
    hyp = ts.hyper_values(1)
    for name, kind in ts.signature:
        v = {"input": x.numpy(), "target": y.numpy()}.get(kind)
        if kind == "hyper":
            v = hyp[name]
        if kind in ("param", "state"):
            v = init[name]
        t = tvm.runtime.tensor(np.array(v, copy=True))
        args.append(t)
        ptrs[name] = t
    out = vm["train_step"](*args)
    updated = out[1]
    for k, name in enumerate(ts.param_names):
        t = ptrs[name]
        assert not np.array_equal(t.numpy(), init[name]), name  # changed in place
        alias = updated[k][0]
        assert alias.data_ptr() == t.data_ptr(), f"{name}: update output is not the input buffer"
        assert np.array_equal(alias.numpy(), t.numpy())
        buf = ptrs[f"{name}.momentum_buffer"]
        assert updated[k][1].data_ptr() == buf.data_ptr()


def test_lowered_ir_has_no_copy_for_updates():
    """After the VM lowering, each optimizer kernel is called on the function's own param and
    state buffers (no copy, no new allocation), and the gradient is freed right after."""
    import re

    m, x, y, ts = _mlp_ts(Adam(lr=1e-2))
    mod = relax.get_pipeline("default_build")(ts.mod)
    lines = [ln.strip() for ln in mod["train_step"].script().splitlines()]
    for n, p in m.named_parameters():
        v = n.replace(".", "_")
        pat = re.compile(rf"adam_update_float32_{p.dim()}d\({v}, (\w+), {v}_exp_avg, "
                         rf"{v}_exp_avg_sq, hyper_step_size, hyper_bc2_sqrt\)")
        hits = [(i, pat.search(ln)) for i, ln in enumerate(lines) if pat.search(ln)]
        assert len(hits) == 1, f"{n}: in-place kernel call on the param buffer not found"
        i, mt = hits[0]
        assert lines[i + 1] == f"R.vm.kill_object({mt.group(1)})", lines[i + 1]


def test_run_matches_torch_two_steps():
    m, x, y, ts = _mlp_ts(AdamW(lr=1e-2))
    vm = relax.VirtualMachine(tvm.compile(ts.mod, target="llvm"), tvm.cpu())
    state = ts.initial_values()
    tm = MLP()
    tm.load_state_dict(m.state_dict())
    opt = torch.optim.AdamW(tm.parameters(), lr=1e-2, foreach=False)
    for step in range(2):
        loss = ts.run(vm, [x.numpy()], [y.numpy()], state)
        opt.zero_grad()
        lt = torch.nn.functional.cross_entropy(tm(x), y)
        lt.backward()
        opt.step()
        assert abs(loss - lt.item()) < 1e-5
    assert state["@step"] == 2
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(state[n], p.detach().numpy(), rtol=1e-4, atol=1e-6)


# ---- errors ---------------------------------------------------------------------------------


class DataDependent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 2)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent Python control flow
            return self.l(x)
        return self.l(-x)


def test_trace_error_is_clear():
    with pytest.raises(TraceError) as e:
        from_torch(DataDependent(), (torch.randn(3, 4),), (torch.randint(0, 2, (3,)),))
    msg = str(e.value)
    assert "torch.export" in msg and "DataDependent" in msg and "\n" not in msg[:200]


class UsesAtan(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 2)

    def forward(self, x):
        return torch.atan(self.l(x))


def test_missing_gradient_names_op():
    with pytest.raises(MissingGradientError) as e:
        from_torch(UsesAtan(), (torch.randn(3, 4),), (torch.randint(0, 2, (3,)),))
    msg = str(e.value)
    assert "relax.atan" in msg and "register_gradient" in msg


def test_dynamic_dim_without_bound():
    dim = torch.export.Dim("batch")
    with pytest.raises(DynamicShapeError) as e:
        from_torch(MLP(), (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),),
                   dynamic_shapes=({0: dim}, {0: dim}))
    assert "upper bound" in str(e.value) and "dim 0" in str(e.value)


def test_bad_arguments():
    with pytest.raises(UnsupportedError):
        from_torch(MLP(), (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),), loss="hinge")
    with pytest.raises(FrontendError):
        from_torch(lambda x: x, (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),))
    with pytest.raises(UnsupportedError):
        SGD(lr=0.1, dampening=0.5)


def test_instance_norm_running_stats_are_refused_before_export():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.InstanceNorm2d(4, track_running_stats=True),
                                torch.nn.Flatten(), torch.nn.LazyLinear(2))
    model(torch.randn(2, 3, 6, 6))
    with pytest.raises(UnsupportedError, match="InstanceNorm2d '1' has track_running_stats=True.*=False"):
        from_torch(model, (torch.randn(2, 3, 6, 6),), (torch.randint(0, 2, (2,)),))


def test_torchscript_model_is_refused_before_export():
    scripted = torch.jit.script(MLP())
    with pytest.raises(FrontendError, match="TorchScript module .*eager torch.nn.Module"):
        from_torch(scripted, (torch.randn(4, 8),), (torch.randint(0, 4, (4,)),))


def test_zoo_optimizer_config_is_accepted():
    from roam_tvm.frontend.optim import as_optimizer

    class Cfg:
        kind, lr, momentum, betas, eps, weight_decay = "momentum", 0.1, 0.9, (0.9, 0.99), 1e-8, 1e-4

    o = as_optimizer(Cfg())
    assert isinstance(o, SGD) and o.momentum == 0.9 and o.weight_decay == 1e-4
    Cfg.kind = "adamw"
    o = as_optimizer(Cfg())
    assert isinstance(o, AdamW) and o.betas == (0.9, 0.99)


# ---- meta weights ----------------------------------------------------------------------------


def test_meta_weights_build_shapes_only():
    from roam_tvm.frontend._demo import tiny_gpt2

    with torch.device("meta"):
        m = tiny_gpt2(vocab=32, n_embd=16, n_layer=1, n_head=2, n_positions=16)
        ids = torch.randint(0, 32, (2, 8))
        tgt = torch.randint(0, 32, (2, 8))
    ts = from_torch(m, (ids,), (tgt,), optimizer=Adam(lr=1e-3))
    assert "transformer.wte.weight" in ts.param_names and "lm_head.weight" not in ts.param_names
    assert ts.shapes["transformer.wte.weight"] == ((32, 16), "float32")
    with pytest.raises(MetaWeightsError) as e:
        ts.initial_values()
    assert "meta" in str(e.value)


# ---- BatchNorm states --------------------------------------------------------------------------


def test_batchnorm_states_named():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 3))
    m[1].running_mean.fill_(0.5)
    ts = from_torch(m, (torch.randn(2, 3, 6, 6),), (torch.randint(0, 3, (2,)),),
                    optimizer=SGD(lr=0.1))
    assert ts.state_names == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    init = ts.initial_values()
    assert np.all(init["1.running_mean"] == 0.5)
    assert ts.shapes["1.num_batches_tracked"] == ((), "int64")


# ---- from_backbone ------------------------------------------------------------------------------


def _backbone():
    @I.ir_module
    class Backbone:
        I.module_attrs({"param_num": 2, "state_num": 1})

        @R.function
        def backbone(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 3), "float32"),
                     b: R.Tensor((3,), "float32"), cnt: R.Tensor((3,), "float32")):
            with R.dataflow():
                y = R.add(R.matmul(x, w), b)
                c = R.add(cnt, R.sum(y, axis=0))
                R.output(y, c)
            return (y, c)

    return Backbone


def test_from_backbone_matches_torch():
    ts = from_backbone(_backbone(), SGD(lr=0.1, momentum=0.9), loss="cross_entropy")
    assert ts.param_names == ["w", "b"]
    assert ts.state_names == ["w.momentum_buffer", "b.momentum_buffer", "cnt"]
    with pytest.raises(MetaWeightsError):
        ts.initial_values()
    vm = relax.VirtualMachine(tvm.compile(ts.mod, target="llvm"), tvm.cpu())
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((8, 3)).astype("float32")
    state = {"w": w0.copy(), "b": np.zeros(3, "float32"), "cnt": np.zeros(3, "float32"),
             "w.momentum_buffer": np.zeros((8, 3), "float32"),
             "b.momentum_buffer": np.zeros(3, "float32")}
    x = rng.standard_normal((4, 8)).astype("float32")
    y = np.array([0, 1, 2, 1])
    loss = ts.run(vm, [x], [y], state)
    W = torch.tensor(w0, requires_grad=True)
    B = torch.zeros(3, requires_grad=True)
    out = torch.tensor(x) @ W + B
    lt = torch.nn.functional.cross_entropy(out, torch.tensor(y))
    lt.backward()
    assert abs(loss - lt.item()) < 1e-5
    np.testing.assert_allclose(state["w"], w0 - 0.1 * W.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state["cnt"], out.sum(0).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_from_backbone_takes_relax_training_optimizers():
    # TVM's own Adam cannot be initialised with numpy 2; ours runs the same rule.
    from tvm.relax.training import optimizer as relax_opt

    from roam_tvm.frontend.optim import SGD as OurSGD, Adam as OurAdam, as_optimizer

    adam = as_optimizer(relax_opt.Adam(0.01, (0.8, 0.99), 1e-6, 0.1))
    assert isinstance(adam, OurAdam) and (adam.lr, adam.betas, adam.eps, adam.weight_decay) == (
        0.01, (0.8, 0.99), 1e-6, 0.1)
    sgd = as_optimizer(relax_opt.MomentumSGD(0.1, 0.9, weight_decay=0.01, nesterov=True))
    assert isinstance(sgd, OurSGD) and (sgd.momentum, sgd.nesterov, sgd.weight_decay) == (0.9, True, 0.01)
    with pytest.raises(UnsupportedError, match="dampening"):
        as_optimizer(relax_opt.MomentumSGD(0.1, 0.9, dampening=0.5))
    ts = from_backbone(_backbone(), relax_opt.Adam(0.01), loss="cross_entropy")
    assert ts.state_names == ["w.exp_avg", "w.exp_avg_sq", "b.exp_avg", "b.exp_avg_sq", "cnt"]


def test_from_backbone_needs_attrs():
    mod = _backbone().without_attr("param_num")
    with pytest.raises(FrontendError):
        from_backbone(mod, SGD(lr=0.1))


def test_no_transposed_weight_copy():
    """matmul(x, permute_dims(w)) is one NT-matmul kernel (FuseTransposeMatmul): no transposed
    copy of a weight is made for nn.Linear's forward; and a weight gradient dy^T @ x is one
    TN-matmul kernel (no transposed copy of dy)."""
    _, _, _, ts = _mlp_ts()
    func = ts.mod["train_step"]
    defs = {b.var: b.value for blk in func.body.blocks for b in blk.bindings}

    def is_transpose(v):
        val = defs.get(v)
        return isinstance(val, relax.Call) and _op_name(val) == "relax.permute_dims"
    fed = [b for b in defs.values()
           if isinstance(b, relax.Call) and _op_name(b) == "relax.matmul"
           and isinstance(b.args[1], relax.Var) and is_transpose(b.args[1])]
    assert fed == []
    names = [gv.name_hint for gv in ts.mod.get_global_vars()]
    assert sum("NT_matmul" in n for n in names) == 2  # the two nn.Linear forwards
    assert sum("TN_matmul" in n for n in names) == 2  # their weight gradients
    assert not any(_op_name(b) == "relax.permute_dims" for b in defs.values()
                   if isinstance(b, relax.Call))
    assert not any(n.startswith("fused_relax") for n in names)  # the pattern's leftovers are gone
