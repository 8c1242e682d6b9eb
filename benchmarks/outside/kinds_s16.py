"""Outside decoders of the zoo's kinds that earlier probe files did not cover, built from ``transformers``
configs (random weights, no hub): LLaMA-like dense decoders of 2025-26 (Arcee, Cohere2, Doge, ERNIE-4.5,
Seed-OSS, VaultGemma, NanoChat, Ministral/Ministral3, Jais2, HunYuan dense), multi-head latent attention
(MiniCPM3), MoE decoders (Dots1, FlexOlmo, GraniteMoeShared, AFMoE, Solar-Open, Mellum, Laguna, Lfm2-MoE,
HunYuan-MoE, GLM-4-MoE-Lite, Llama-4 with chunked attention, GraniteMoeHybrid with a Mamba-2 layer) and
the T5Gemma encoder-decoder.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s16.py:<name>``
at the size of hf_more.py (2 layers, hidden 64, vocab 256, 12 tokens); MoE sizes are cut to 4 experts.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import BATCH, SEQ, VOCAB, _LLAMA_LIKE, CausalLM, _causal, _lm  # noqa: E402
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402

_MOE_SMALL = dict(moe_intermediate_size=32, num_experts_per_tok=2)


# dense decoders
def arcee():
    """Arcee (ReLU² MLP without a gate), hidden 64."""
    return _causal("Arcee", **_LLAMA_LIKE)


def cohere2():
    """Cohere2 (parallel attention + MLP, LayerNorm without bias, sliding/full layers), hidden 64."""
    return _causal("Cohere2", sliding_window=4, layer_types=["sliding_attention", "full_attention"], **_LLAMA_LIKE)


def doge():
    """Doge (dynamic-mask attention with a learned per-head gate over values), hidden 64."""
    return _causal("Doge", **_LLAMA_LIKE)


def ernie4_5():
    """ERNIE-4.5 dense (interleaved rotary, no biases), hidden 64."""
    return _causal("Ernie4_5", head_dim=16, **_LLAMA_LIKE)


def seed_oss():
    """Seed-OSS (q/k/v biases, output bias off, GQA), hidden 64."""
    return _causal("SeedOss", head_dim=16, **_LLAMA_LIKE)


def vaultgemma():
    """VaultGemma (Gemma-2 style soft-capping, scaled embeddings), hidden 64."""
    return _causal("VaultGemma", head_dim=16, **_LLAMA_LIKE)


def nanochat():
    """NanoChat (ReLU² MLP, q/k RMSNorm without weights, logit soft-capping), hidden 64."""
    return _causal("NanoChat", **_LLAMA_LIKE)


def ministral():
    """Ministral (every layer sliding-window, window 4 over 12 tokens), hidden 64."""
    return _causal("Ministral", head_dim=16, sliding_window=4,
                   layer_types=["sliding_attention", "full_attention"], **_LLAMA_LIKE)


def ministral3():
    """Ministral3 (LLaMA-like with a llama-3 style rotary scaling), hidden 64."""
    return _causal("Ministral3", **_LLAMA_LIKE)


def jais2():
    """Jais2 (LayerNorm with bias, non-gated MLP), hidden 64."""
    return _causal("Jais2", **_LLAMA_LIKE)


def hunyuan_dense():
    """HunYuan dense v1 (q/k layer norms after rotary), hidden 64."""
    return _causal("HunYuanDenseV1", head_dim=16, **_LLAMA_LIKE)


def minicpm3():
    """MiniCPM3 (multi-head latent attention: low-rank q and kv, split rope/nope heads), hidden 64."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("MiniCPM3", q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
                   v_head_dim=16, head_dim=8, **cfg)


# MoE decoders
def dots1():
    """Dots1 (DeepSeek-V3 style router with a shared expert, first layer dense), 4 experts top-2."""
    return _causal("Dots1", n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, head_dim=16,
                   **_MOE_SMALL, **_LLAMA_LIKE)


def flex_olmo():
    """FlexOlmo (Olmo2 norms, 4 experts top-2 without renormalising), hidden 64."""
    return _causal("FlexOlmo", num_experts=4, num_experts_per_tok=2, pad_token_id=0, **_LLAMA_LIKE)


def granitemoeshared():
    """GraniteMoeShared (multipliers on embeddings, residuals and logits, shared expert), 4 experts top-2."""
    return _causal("GraniteMoeShared", num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=32,
                   **_LLAMA_LIKE)


def afmoe():
    """AFMoE (gated attention, sliding/full layers, 2 shared experts, first layer dense), 4 experts top-2."""
    return _causal("Afmoe", num_experts=4, num_shared_experts=1, num_dense_layers=1, head_dim=16,
                   sliding_window=4, layer_types=["sliding_attention", "full_attention"], **_MOE_SMALL,
                   **_LLAMA_LIKE)


def solar_open():
    """Solar-Open (DeepSeek-V3 style grouped router, one shared expert), 4 experts top-2."""
    return _causal("SolarOpen", n_routed_experts=4, n_shared_experts=1, head_dim=16, **_MOE_SMALL, **_LLAMA_LIKE)


def mellum():
    """Mellum (every MLP sparse, per-layer rotary parameters), 4 experts top-2."""
    return _causal("Mellum", num_local_experts=4, head_dim=16, layer_types=["full_attention"] * 2,
                   mlp_layer_types=["sparse"] * 2, **_MOE_SMALL, **_LLAMA_LIKE)


def laguna():
    """Laguna (first MLP dense, then sparse with a shared expert; per-layer head counts), 4 experts top-2."""
    return _causal("Laguna", num_experts=4, shared_expert_intermediate_size=32, head_dim=16,
                   layer_types=["full_attention"] * 2, mlp_layer_types=["dense", "sparse"],
                   num_attention_heads_per_layer=[4, 4], **_MOE_SMALL, **_LLAMA_LIKE)


def lfm2_moe():
    """LFM2-MoE (short convolutions and attention layers, expert bias in the router), 4 experts top-2."""
    return _causal("Lfm2Moe", num_experts=4, num_dense_layers=1, layer_types=["conv", "full_attention"],
                   **_MOE_SMALL, **_LLAMA_LIKE)


def hunyuan_moe():
    """HunYuan MoE v1 (shared MLP plus 4 experts top-2), hidden 64."""
    return _causal("HunYuanMoEV1", num_experts=4, moe_topk=2, head_dim=16, **_LLAMA_LIKE)


def glm4_moe_lite():
    """GLM-4-MoE-Lite (multi-head latent attention plus a shared-expert MoE), 4 experts top-2."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("Glm4MoeLite", n_routed_experts=4, n_shared_experts=1, q_lora_rank=32, kv_lora_rank=16,
                   qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16, mlp_layer_types=["dense", "sparse"],
                   **_MOE_SMALL, **cfg)


def llama4_text():
    """Llama-4 text (chunked attention: a mask from ``positions // chunk_size``, NoPE layers, one MoE layer
    of 4 experts top-1 with a shared expert), hidden 64."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    conf = tf.Llama4TextConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=64, intermediate_size_mlp=96,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                               num_local_experts=4, num_experts_per_tok=1, max_position_embeddings=64,
                               attention_chunk_size=8, use_cache=False, attn_implementation="eager",
                               moe_layers=[1], no_rope_layers=[1, 0])
    return _lm(CausalLM(tf.Llama4ForCausalLM(conf)))


def granitemoehybrid():
    """GraniteMoeHybrid (a Mamba-2 layer, then an attention layer; 4 experts top-2 and a shared expert)."""
    return _causal("GraniteMoeHybrid", num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=32,
                   layer_types=["mamba", "attention"], mamba_d_state=16, mamba_n_heads=4, mamba_d_head=32,
                   mamba_n_groups=1, mamba_chunk_size=4, **_LLAMA_LIKE)


def t5gemma():
    """T5Gemma (a Gemma-2 encoder-decoder: GQA, soft-capping, sandwich norms), hidden 64."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    side = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, max_position_embeddings=64, attention_dropout=0.0,
                dropout_rate=0.0)
    conf = tf.T5GemmaConfig(encoder=side, decoder=dict(side), vocab_size=VOCAB, dropout_rate=0.0,
                            attention_dropout=0.0, use_cache=False, attn_implementation="eager")
    gen = _gen()
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ - 4, VOCAB))
    return _EncDecLogits(tf.T5GemmaForConditionalGeneration(conf)), ins, (_tokens(gen, BATCH, SEQ - 4, VOCAB),)


class _EncDecLogits(torch.nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, decoder_input_ids):
        return self.hf(input_ids=input_ids, decoder_input_ids=decoder_input_ids).logits
