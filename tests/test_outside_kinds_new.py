"""Outside models of the zoo's kinds (benchmarks/outside/kinds_new.py, kinds_new_nn.py), tiny: each imports,
is planned by the roam pipeline (RoamOrder + RoamLayout), builds for llvm and runs one Adam step whose
loss, updated parameters and optimizer states match PyTorch's step (test_numerics.compare_step, through
test_outside_kinds_more's conventions). DeepSeek-V2, DBRX, NLLB-MoE and Meta-style LLaMA (the rows a fix
was needed for) are in test_kinds_new_fixes.py."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("tvm")
pytest.importorskip("transformers")

from roam_tvm.frontend import SGD, Adam  # noqa: E402
from test_outside_hf_more import OUTSIDE, _module  # noqa: E402
from test_outside_kinds_more import check_outside_step  # noqa: E402

HF, NN = os.path.join(OUTSIDE, "kinds_new.py"), os.path.join(OUTSIDE, "kinds_new_nn.py")
# one small row of each new construct by default (a GRUCell loop, a dict output read by a loss callable)
FAST = [("cnn_dict_aux", NN)]  # GRU cell loops: test_rnn_* by default, gru_cell_loop with --runslow
SLOW = [("gru_cell_loop", NN)] + [(n, HF) for n in ("qwen2", "mistral_swa", "starcoder2", "nemotron", "glm", "glm4", "helium", "smollm3",
                          "olmo3", "qwen3_moe", "flan_t5", "byt5", "maskformer_swin", "donut_swin",
                          "qwen2_frozen_body", "swin_frozen_stage1", "t5_frozen_encoder", "qwen2_masked_loss",
                          "helium_model_output", "qwen2_dict_out", "gpt_oss", "glm4_moe", "apertus", "exaone4",
                          "ernie4_5_moe", "lfm2")] + \
       [(n, NN) for n in ("lstm_cell_loop2", "lstm_dropout", "gru_nobias", "densenet_dropout", "densenet_buffer")]
# BatchNorm weight gradients near 0 (see test_outside_kinds_more.SGD_ROWS): checked through an SGD step
SGD_ROWS = {"densenet_dropout", "densenet_buffer", "cnn_dict_aux"}
# dropout is imported as the identity (with a warning, random_ops.py) while PyTorch's step draws masks: these
# rows are checked with their dropout probabilities set to 0, the step the import plans
DROPOUT_ROWS = {"lstm_dropout", "densenet_dropout"}


def _no_dropout(model):
    from torch import nn

    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        elif isinstance(m, nn.RNNBase):
            m.dropout = 0.0


def _check(name, path, monkeypatch):
    made = getattr(_module(path), name)()
    model, inputs, targets = made[:3]
    loss = made[3] if len(made) > 3 else "cross_entropy"
    if name in DROPOUT_ROWS:
        _no_dropout(model)
    opt = SGD(lr=0.1) if name in SGD_ROWS else Adam(lr=1e-3)
    check_outside_step(model, inputs, targets, loss, opt, monkeypatch)


@pytest.mark.parametrize("name,path", FAST)
def test_kinds_new_tiny(name, path, monkeypatch):
    _check(name, path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name,path", SLOW)
def test_kinds_new_tiny_slow(name, path, monkeypatch):
    _check(name, path, monkeypatch)
