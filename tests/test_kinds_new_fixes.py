"""Fixes found by the kinds_new outside rows (benchmarks/outside/kinds_new.py, kinds_new_nn.py):

* DBRX's stacked-GLU experts and NLLB-MoE's ModuleDict experts (which also hold ``token_dropout``) run densely for the export (roam_tvm/frontend/hf_experts.py): the same
  output as its eager nonzero loop; with --runslow, one planned Adam step matches PyTorch's.
* tensor sizes read from tensor values (JetMoE's ``expert_size.tolist()`` split) are refused before TVM's
  importer, naming the model's line and the way out (roam_tvm/frontend/data_sizes.py).
* a random LayerDrop branch (NLLB-MoE's default 0.05) names the config fields to zero (export.py).
* with --runslow: DeepSeek-V2 (complex RoPE, complex_pairs.py) and Meta-style LLaMA steps planned by roam
  match PyTorch's (test_numerics.compare_step, the zoo's tolerances); DBRX's and NLLB-MoE's SGD gradients
  match PyTorch's float32 ones.
"""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

import test_numerics  # noqa: E402
from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from roam_tvm.frontend.errors import TraceError, UnsupportedError  # noqa: E402
from roam_tvm.frontend.hf_experts import exportable_experts  # noqa: E402
from roam_tvm.frontend.noop_casts import noop_module_casts  # noqa: E402
from test_families import _roam_step  # noqa: E402
from test_outside_hf_more import OUTSIDE, _module  # noqa: E402

HF, NN = os.path.join(OUTSIDE, "kinds_new.py"), os.path.join(OUTSIDE, "kinds_new_nn.py")


def test_dbrx_dense_experts_match_the_eager_loop():
    pytest.importorskip("transformers")
    model, ins, _ = _module(HF).dbrx()
    want = model(*ins)
    with exportable_experts(model):
        got = model(*ins)
    assert type(model.hf.transformer.blocks[0].ffn.experts).forward is not None
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert "forward" not in vars(model.hf.transformer.blocks[0].ffn.experts)  # restored


def test_nllb_moe_experts_run_densely():
    """NLLB-MoE's ModuleDict experts also hold ``token_dropout``: still found, still the eager output."""
    pytest.importorskip("transformers")
    model, ins, _ = _module(HF).nllb_moe()
    want = model(*ins)
    with exportable_experts(model):
        assert sum("forward" in vars(m) for m in model.modules()) == 2  # the encoder's and decoder's sparse layer
        got = model(*ins)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


class _SplitBySizes(nn.Module):
    """A token-sorting router: group sizes from ``bincount(...).tolist()``, one linear per group."""

    def __init__(self):
        super().__init__()
        self.router, self.experts = nn.Linear(8, 3), nn.ModuleList(nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        pick = self.router(x).argmax(-1)
        order = pick.argsort()
        sizes = nn.functional.one_hot(pick, 3).sum(0).tolist()  # as JetMoE's router
        parts = x[order].split(sizes)
        return torch.cat([e(p) for e, p in zip(self.experts, parts)]).sum()


def test_sizes_from_values_are_refused_with_the_line():
    with pytest.raises((UnsupportedError, TraceError), match=r"sizes tensors by tensor values.*"
                                                             r"test_kinds_new_fixes.py.*Way out"):
        from_torch(_SplitBySizes(), (torch.randn(6, 8),), (), loss=lambda out: out, quiet=True)


class _EosHead(nn.Module):
    """A sequence classifier that picks each row's last <eos> state with a boolean mask (HF's T5/BART)."""

    def __init__(self, same_count_check: bool = True):
        super().__init__()
        self.emb, self.head = nn.Embedding(10, 8), nn.Linear(8, 3)
        self.same_count_check = same_count_check

    def forward(self, ids):
        h = self.emb(ids)
        eos = ids.eq(1)
        picked = self.head(h[eos, :].view(h.shape[0], -1, h.shape[-1])[:, -1, :])
        if self.same_count_check:  # HF checks every row has as many <eos>
            picked = picked + 0 * torch.unique_consecutive(eos.sum(1)).sum()
        return picked


def test_value_sized_selection_gets_the_positional_way_out():
    ids = torch.tensor([[3, 4, 1, 5, 0], [2, 1, 6, 7, 0]])  # <eos> (1) before padding (0)
    # the dense form of the mask changes the output here (the <eos> is not the last position)
    with pytest.raises((UnsupportedError, TraceError), match=r"selects rows by tensor values.*select by position"
                                                             r".*argmax"):
        from_torch(_EosHead(), (ids,), (torch.tensor([0, 2]),), quiet=True)


def test_dense_form_that_agrees_by_chance_is_refused():
    """The example's <eos> is the last token of each row, so the dense form of ``x[mask]`` agrees with the
    model there; on a shuffled variant of the tokens it does not, and the model is refused."""
    ids = torch.tensor([[3, 4, 1, 5, 1], [2, 1, 6, 7, 1]])
    with pytest.raises(UnsupportedError, match=r"selects rows by tensor values.*select by position"):
        from_torch(_EosHead(same_count_check=False), (ids,), (torch.tensor([0, 2]),), quiet=True)


def test_unique_sizes_get_the_positional_way_out():
    class _Unique(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x, ids):
            return self.lin(x) + 0 * torch.unique_consecutive(ids.eq(1).sum(1)).sum()

    ids = torch.tensor([[3, 1, 0], [1, 2, 0]])
    with pytest.raises((UnsupportedError, TraceError), match=r"sizes tensors by tensor values.*selects by value"
                                                             r".*unique_consecutive.*select by position"):
        from_torch(_Unique(), (torch.randn(2, 4), ids), (torch.tensor([0, 1]),), quiet=True)


def test_layerdrop_names_the_config_fields():
    pytest.importorskip("transformers")
    import transformers as tf

    conf = tf.NllbMoeConfig(vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                            decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, num_experts=2,
                            encoder_sparse_step=0, decoder_sparse_step=0, encoder_layerdrop=0.05,
                            max_position_embeddings=16, use_cache=False, attn_implementation="eager")
    model = _module(os.path.join(OUTSIDE, "hf_more.py")).Seq2SeqLM(tf.NllbMoeForConditionalGeneration(conf))
    ids = torch.randint(3, 64, (1, 6))
    with pytest.raises(TraceError, match="LayerDrop.*encoder_layerdrop"):
        from_torch(model, (ids, ids[:, :4]), (ids[:, :4],), quiet=True)


def _check(name, path, monkeypatch):
    model, inputs, targets = getattr(_module(path), name)()[:3]
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=Adam(lr=1e-3), quiet=True)
    monkeypatch.setattr(test_numerics, "tvm_step", _roam_step)
    with exportable_experts(model), noop_module_casts():  # torch's step runs the experts as the export
        test_numerics.compare_step(model, inputs, targets, "cross_entropy", Adam(lr=1e-3), ts=ts)


@pytest.mark.slow
@pytest.mark.parametrize("name,path", [("deepseek_v2", HF), ("meta_llama", NN)])
def test_kinds_new_step_matches_torch(name, path, monkeypatch):
    _check(name, path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dbrx", "nllb_moe"])
def test_moe_step_matches_torch_float32(name):
    """DBRX and NLLB-MoE planned by roam: every gradient of one SGD step (lr 1) is torch's float32 one
    (experts run as in the export) within 1e-4 of its tensor's largest plus the float32 rounding of the
    parameter the update is read from. Float32 only, as
    test_outside_kinds_more's Switch check: their routers cast to float32, so compare_step's float64
    reference cannot run them."""
    import copy

    import numpy as np
    import tvm
    from tvm import relax

    from roam_tvm.frontend import SGD
    from roam_tvm.runtime.build import build

    model, inputs, targets = getattr(_module(HF), name)()
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=SGD(lr=1.0), quiet=True)
    vm = relax.VirtualMachine(build(ts.mod, "llvm", order=True, layout=True, order_time_limit=2.0), tvm.cpu())
    state = ts.initial_values()
    before = {k: v.copy() for k, v in state.items()}
    loss = ts.run(vm, [t.numpy() for t in inputs], [t.numpy() for t in targets], state)
    ref = copy.deepcopy(model).train()
    with exportable_experts(ref), noop_module_casts():
        out = ref(*inputs)
        t_loss = nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), targets[0].reshape(-1))
        t_loss.backward()
    assert abs(float(loss) - float(t_loss)) <= 1e-5 * abs(float(t_loss))
    grads = dict(ref.named_parameters())
    for n in ts.param_names:
        want = grads[n].grad.double().numpy() if grads[n].grad is not None else np.zeros(before[n].shape)
        got = before[n].astype(np.float64) - state[n]
        # before - after carries the parameter's own float32 rounding: 2 spacings of its largest value
        atol = 1e-4 * max(np.abs(want).max(), 1e-6) + 2 * np.spacing(np.abs(before[n]).max())
        np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=n)
