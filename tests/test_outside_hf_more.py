"""Outside models from ``transformers`` configs (benchmarks/outside/hf_more.py), tiny: each imports,
is planned by the roam pipeline (RoamOrder + RoamLayout), builds for llvm and runs one Adam step whose
loss, updated parameters and optimizer states match PyTorch's step (test_numerics.compare_step)."""

from __future__ import annotations

import ast
import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")
pytest.importorskip("transformers")

from tvm import relax  # noqa: E402

import test_numerics  # noqa: E402
from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from roam_tvm.frontend.double_transpose import cancel_double_transposes  # noqa: E402
from roam_tvm.frontend.hf_experts import exportable_experts  # noqa: E402
from test_families import _roam_step  # noqa: E402

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "outside",
                    "hf_more.py")
# 30-90 s each on 2 shared cores; one of each kind by default, the rest with --runslow
FAST = ["gpt_neox", "llama_lora", "bart"]
SLOW = ["falcon", "phi", "phi3", "gemma", "gemma2", "stablelm", "olmo", "olmo2", "granite", "qwen3", "gemma3", "cohere", "gptj", "opt", "qwen2_moe",
        "mixtral", "llama", "llama_sdpa", "pegasus", "marian", "mt5", "umt5", "bert_mlm", "albert_mlm", "electra_mlm", "roberta_cls", "distilbert_cls", "vit",
        "deit", "beit", "convnextv2", "regnet", "resnet_hf", "whisper_enc"]
# no torch step to match: bf16 end to end (test_precision holds pure bf16 to the exact step), and
# default dropout (imported as the identity, with a warning; torch's step drops)
NO_NUMERICS = ["llama_bf16", "bert_cls_defaults"]


def _module():
    spec = importlib.util.spec_from_file_location("benchmarks_outside_hf_more", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(name, monkeypatch):
    model, inputs, targets = getattr(_module(), name)()
    opt = Adam(lr=1e-3)
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=opt, quiet=True)
    monkeypatch.setattr(test_numerics, "tvm_step", _roam_step)
    # torch's reference steps (float64 among them, which grouped_mm experts refuse) run MoE
    # experts as the exported step does: the same function (hf_experts.py)
    with exportable_experts(model):
        test_numerics.compare_step(model, inputs, targets, "cross_entropy", opt, ts=ts)
    return ts


@pytest.mark.parametrize("name", FAST)
def test_hf_more_tiny(name, monkeypatch):
    _check(name, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_hf_more_tiny_slow(name, monkeypatch):
    _check(name, monkeypatch)


def test_lora_trains_only_the_adapters(monkeypatch):
    """The frozen backbone is an input of the step: only the 2 x 2 adapter matrices get gradients."""
    ts = from_torch(*_module().llama_lora(), loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    assert sorted({n.rsplit(".", 1)[-1] for n in ts.param_names}) == ["a", "b"]
    assert len(ts.param_names) == 2 * 2 * 2  # 2 layers x (q, v) x (a, b)


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


def test_every_factory_is_tested():
    with open(PATH, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    public = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    assert sorted(FAST + SLOW + NO_NUMERICS) == sorted(public)
