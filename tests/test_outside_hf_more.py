"""Outside models from ``transformers`` configs (benchmarks/outside/hf_more.py), tiny: each imports,
is planned by the roam pipeline (RoamOrder + RoamLayout), builds for llvm and runs one Adam step whose
loss, updated parameters and optimizer states match PyTorch's step (test_numerics.compare_step)."""

from __future__ import annotations

import ast
import copy
import importlib.util
import os

import numpy as np

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")
pytest.importorskip("transformers")

from tvm import relax  # noqa: E402

import test_numerics  # noqa: E402
from roam_tvm.frontend import SGD, Adam, from_torch  # noqa: E402
from roam_tvm.frontend.double_transpose import cancel_double_transposes  # noqa: E402
from roam_tvm.frontend.hf_experts import exportable_experts  # noqa: E402
from test_families import _roam_step  # noqa: E402

OUTSIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "outside")
PATH, USAGE_PATH = os.path.join(OUTSIDE, "hf_more.py"), os.path.join(OUTSIDE, "hf_usage.py")
# 30-90 s each on 2 shared cores; a decoder and an encoder-decoder by default, the rest with --runslow
FAST = ["llama_lora", "bart"]
SLOW = ["gpt_neox", "falcon", "phi", "phi3", "gemma", "gemma2", "stablelm", "olmo", "olmo2", "granite", "qwen3", "gemma3",
        "cohere", "gptj", "opt", "qwen2_moe", "mixtral", "llama", "llama_sdpa", "pegasus", "marian", "mt5",
        "umt5", "bert_mlm", "albert_mlm", "electra_mlm", "roberta_cls", "distilbert_cls", "vit", "deit",
        "beit", "convnextv2", "regnet", "resnet_hf", "whisper_enc"]
USAGE = ["llama_raw", "llama_own_loss", "llama_ckpt", "t5_own_loss", "mixtral_aux_loss", "swin_own_loss",
         "qwen2_moe_aux_mask"]  # hf_usage.py, slow
USAGE_FAST = ["llama_wrapped_mask", "gpt2_own_mask"]  # hf_usage.py, their own tests below
# no torch step to match: bf16 end to end, and drop-path (imported as the identity, with a warning)
USAGE_NO_NUMERICS = ["qwen2_auto_bf16", "swin_default_rates"]
# no torch step to match: bf16 end to end (test_precision holds pure bf16 to the exact step), and
# default dropout (imported as the identity, with a warning; torch's step drops)
NO_NUMERICS = ["llama_bf16", "bert_cls_defaults",
               "llama_lora_medium"]  # llama_lora at a size for planning: its numerics are llama_lora's


def _module(path: str = PATH):
    spec = importlib.util.spec_from_file_location("benchmarks_outside_" + os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(name, monkeypatch, path=PATH, made=None):
    made = made or getattr(_module(path), name)()
    model, inputs, targets = made[:3]
    loss = made[3] if len(made) > 3 else "cross_entropy"
    opt = Adam(lr=1e-3)
    ts = from_torch(model, inputs, targets, loss=loss, optimizer=opt, quiet=True)
    monkeypatch.setattr(test_numerics, "tvm_step", _roam_step)
    # torch's reference steps (float64 among them, which grouped_mm experts refuse) run MoE
    # experts as the exported step does: the same function (hf_experts.py)
    with exportable_experts(model):
        test_numerics.compare_step(model, inputs, targets, loss, opt, ts=ts)
    return ts


@pytest.mark.parametrize("name", FAST)
def test_hf_more_tiny(name, monkeypatch):
    _check(name, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_hf_more_tiny_slow(name, monkeypatch):
    _check(name, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", USAGE)
def test_hf_usage_tiny_slow(name, monkeypatch):
    _check(name, monkeypatch, USAGE_PATH)


@pytest.mark.slow
def test_wrapped_hf_model_trains_without_its_cache(monkeypatch):
    """An HF model inside the user's own module keeps ``config.use_cache`` on; the export turns it off in
    every config (TVM's importer refused the concat to the empty cache) and puts it back."""
    made = _module(USAGE_PATH).llama_wrapped_mask()
    assert made[0].hf.config.use_cache is True
    _check("llama_wrapped_mask", monkeypatch, USAGE_PATH, made)
    assert made[0].hf.config.use_cache is True


def test_gpt2_with_sdpa_and_mask_trains_as_pytorch(monkeypatch):
    """GPT-2's Conv1D views the attention output that torch's SDPA decomposition leaves permuted; traced
    as a reshape (view_reshapes.py) the step imports and matches PyTorch's."""
    _check("gpt2_own_mask", monkeypatch, USAGE_PATH)


def test_lora_trains_only_the_adapters(monkeypatch):
    """The frozen backbone is an input of the step: only the 2 x 2 adapter matrices get gradients."""
    ts = from_torch(*_module().llama_lora(), loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    assert sorted({n.rsplit(".", 1)[-1] for n in ts.param_names}) == ["a", "b"]
    assert len(ts.param_names) == 2 * 2 * 2  # 2 layers x (q, v) x (a, b)


def _sgd_step(model, ids, tgt, lr, autocast=None):
    """PyTorch's SGD step on a copy of ``model``: loss and parameters (float64 numpy)."""
    m = copy.deepcopy(model).train()
    with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
        out = m(ids)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]).float(), tgt.reshape(-1))
    loss.backward()
    torch.optim.SGD(m.parameters(), lr=lr).step()
    return float(loss.detach()), {n: p.detach().double().numpy() for n, p in m.named_parameters()}


def _llvm_step(ts, ids, tgt):
    vm = relax.VirtualMachine(tvm.compile(ts.mod, target="llvm"), tvm.cpu())
    state = ts.initial_values()
    before = {k: v.copy() for k, v in state.items()}
    return ts.run(vm, [ids.numpy()], [tgt.numpy()], state), before, state


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "llama_lora"])
def test_llama_bf16_amp_matches_torch_autocast(name):
    """LLaMA (RMSNorm and SiLU folds, RoPE), full or LoRA on a frozen base, under ``--precision
    bf16-amp``: fp32 master weights, bf16 activations; the step matches torch.autocast's within
    4 bf16 eps (test_precision's bound)."""
    model, (ids,), (tgt,) = getattr(_module(), name)()
    ts = from_torch(model, (ids,), (tgt,), optimizer=SGD(lr=0.5), quiet=True, precision="bf16-amp")
    assert 'dtype="bfloat16"' in ts.mod["train_step"].script()
    loss, before, after = _llvm_step(ts, ids, tgt)
    t_loss, ref = _sgd_step(model, ids, tgt, 0.5, autocast=torch.bfloat16)
    eps = 2.0**-7
    assert abs(loss - t_loss) <= 4 * eps * max(1.0, abs(t_loss)), (loss, t_loss)
    for n in ts.param_names:
        test_numerics._close(after[n].astype(np.float64) - before[n], ref[n] - before[n], 4 * eps, n)


@pytest.mark.slow
def test_llama_pure_bf16_as_close_to_exact_as_torch():
    """``model.to(torch.bfloat16)``: the step is as close to the exact (float64) step as PyTorch's
    own bf16 step (test_precision's bound: twice torch's error plus one bf16 eps)."""
    from test_precision import _err_beyond_rounding

    model, (ids,), (tgt,) = _module().llama_bf16()
    ts = from_torch(model, (ids,), (tgt,), optimizer=SGD(lr=0.5), quiet=True)
    assert {ts.shapes[n][1] for n in ts.param_names} == {"bfloat16"}
    loss, before, after = _llvm_step(ts, ids, tgt)
    _, ref = _sgd_step(model, ids, tgt, 0.5)
    x_loss, exact = _sgd_step(copy.deepcopy(model).double(), ids, tgt, 0.5)
    assert abs(loss - x_loss) <= 0.02 * max(1.0, abs(x_loss)), (loss, x_loss)
    for n in ts.param_names:
        p0 = before[n].astype(np.float64)
        if np.abs(exact[n] - p0).max() == 0:
            continue
        e_tvm = _err_beyond_rounding(after[n].astype(np.float64), exact[n], p0, torch.bfloat16)
        e_torch = _err_beyond_rounding(ref[n], exact[n], p0, torch.bfloat16)
        assert e_tvm <= 2 * e_torch + 2.0**-7, (n, e_tvm, e_torch)


class ReturnsModelOutput(torch.nn.Module):
    """A classifier returning a Hugging Face ``ModelOutput``, as a bare ``*ForCausalLM`` does."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        from transformers.modeling_outputs import SequenceClassifierOutput

        return SequenceClassifierOutput(logits=self.fc(x))


def test_pytorch_step_reads_logits_of_a_model_output():
    """PyTorch's simulated step reads ``.logits`` as ``from_torch`` does (it raised on a ModelOutput)."""
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.zoo.spec import ModelSpec, OptimizerConfig

    torch.manual_seed(0)
    x, y = torch.randn(3, 8), torch.randint(0, 4, (3,))
    spec = ModelSpec("out", ReturnsModelOutput(), (x,), (y,), optimizer=OptimizerConfig(kind="adam", lr=1e-3))
    plain = ModelSpec("plain", ReturnsModelOutput().fc, (x,), (y,), optimizer=OptimizerConfig(kind="adam", lr=1e-3))
    assert simulate_eager_step(spec)["peak_bytes"] == simulate_eager_step(plain)["peak_bytes"] > 0
    assert spec.wrapped()(x, y).shape == ()


class FrozenTop(torch.nn.Module):
    """Two trainable linears under two frozen ones: the backward passes through frozen weights."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 16)
        self.c, self.d = torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)
        for p in (*self.c.parameters(), *self.d.parameters()):
            p.requires_grad_(False)

    def forward(self, x):
        return self.d(torch.relu(self.c(torch.relu(self.b(torch.relu(self.a(x)))))))


def _transposed_weights(ts) -> list[str]:
    """Parameters (trainable or frozen) the step reads through a ``permute_dims`` copy."""
    names = {v: v.name for v in ts.mod[ts.func_name].params}
    found = []

    def visit(expr):
        if (isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op)
                and expr.op.name == "relax.permute_dims" and expr.args[0] in names):
            found.append(names[expr.args[0]])

    relax.analysis.post_order_visit(ts.mod[ts.func_name].body, visit)
    return found


def test_frozen_weight_gradient_reads_the_weight_not_a_copy(monkeypatch):
    """The input gradient through a frozen linear is ``dy @ W`` on the weight itself, as PyTorch's
    ``mm`` (before: a transposed copy of every frozen weight the backward passes through); the
    step against torch autograd in float64."""
    torch.manual_seed(0)
    m = FrozenTop().double()
    x, y = torch.randn(3, 8, dtype=torch.float64), torch.randint(0, 4, (3,))
    ts = from_torch(m, (x,), (y,), loss="cross_entropy", optimizer=Adam(lr=1e-2), quiet=True)
    assert _transposed_weights(ts) == []
    test_numerics.compare_step(m, (x,), (y,), "cross_entropy", Adam(lr=1e-2), dtype="float64", ts=ts)
    # the pass is what removes them: without it both frozen weights are copied transposed
    from roam_tvm.frontend import autodiff

    monkeypatch.setattr(autodiff, "cancel_double_transposes", lambda f: f)
    ts = from_torch(m, (x,), (y,), loss="cross_entropy", optimizer=Adam(lr=1e-2), quiet=True)
    assert sorted(_transposed_weights(ts)) == ["c.weight", "d.weight"]


def test_cancel_double_transposes_only_the_identity():
    """``permute_dims`` twice is dropped when the two compose to the identity, kept otherwise."""
    bb = relax.BlockBuilder()
    w = relax.Var("w", relax.TensorType((2, 3, 4), "float32"))
    with bb.function("f", [w]):
        with bb.dataflow():
            t = bb.emit(relax.op.permute_dims(w, [0, 2, 1]))
            back = bb.emit(relax.op.permute_dims(t, [0, 2, 1]))  # identity: w
            rot = bb.emit(relax.op.permute_dims(t, [2, 0, 1]))  # not the identity
            out = bb.emit_output(relax.Tuple([back, rot]))
        bb.emit_func_output(out)
    f = cancel_double_transposes(bb.get()["f"])
    values = [b.value for b in f.body.blocks[0].bindings]
    assert values[1].same_as(f.params[0])  # back = w
    assert values[2].op.name == "relax.permute_dims" and values[2].args[0].same_as(f.body.blocks[0].bindings[0].var)


def _public(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


def test_every_factory_is_tested():
    assert sorted(FAST + SLOW + NO_NUMERICS) == sorted(_public(PATH))
    assert sorted(USAGE + USAGE_FAST + USAGE_NO_NUMERICS) == sorted(_public(USAGE_PATH))


@pytest.mark.slow
@pytest.mark.parametrize("name", USAGE_NO_NUMERICS)
def test_hf_usage_imports_slow(name):
    """The usage rows without a step to match import and give a step with Adam's states."""
    made = getattr(_module(USAGE_PATH), name)()
    ts = from_torch(*made[:3], loss=made[3] if len(made) > 3 else "cross_entropy", optimizer=Adam(lr=1e-3),
                    quiet=True)
    assert ts.param_names
