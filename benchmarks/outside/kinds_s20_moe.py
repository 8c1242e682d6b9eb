"""Outside models of ``transformers`` mixture-of-experts families no earlier probe file covers (round 20), random
weights, no hub: Qwen3.5-MoE, GLM-MoE-DSA, GraniteMoe-SWA, Bailing-Hybrid, A.X-K1, A.X-K2, HY-V4, Beam, Kolibri-1,
Aria text, MiniMax-M3 text, Qwen3-VL-MoE text, GLM-4V-MoE text, ERNIE-4.5-VL-MoE text, Mistral-Large-4 text,
Step-3.7 text, Dots3-Note text and the OpenAI privacy filter (a MoE token classifier).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s20_moe.py:<name>``
at the size of hf_more.py (2 layers, hidden 64, vocab 256, 12 tokens, batch 2; 4 experts top-2). Eager
attention, no dropout, no cache, seeded. Text towers without a ``ForCausalLM`` get a plain linear LM head.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import _LLAMA_LIKE, BATCH, SEQ, VOCAB, _causal, _lm  # noqa: E402
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402

_MOE_SMALL = dict(moe_intermediate_size=32, num_experts_per_tok=2)
_MLA = dict(q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16)
_DS = dict(n_routed_experts=4, n_shared_experts=1, n_group=1, topk_group=1, **_MOE_SMALL)


class TextLM(nn.Module):
    """A Hugging Face text tower plus a linear LM head: ``forward(ids)`` -> logits."""

    def __init__(self, body, hidden: int = 64, vocab: int = VOCAB):
        super().__init__()
        self.body, self.head = body, nn.Linear(hidden, vocab, bias=False)

    def forward(self, x):
        return self.head(self.body(input_ids=x).last_hidden_state)


def _text(cfg_name: str, model_name: str, **cfg):
    """``<cfg_name>(**cfg)`` -> ``<model_name>`` (a text tower) under a linear LM head."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    conf = getattr(tf, cfg_name)(vocab_size=VOCAB, num_hidden_layers=2, **cfg)
    return _lm(TextLM(getattr(tf, model_name)(conf)))


def qwen3_5_moe():
    """Qwen3.5-MoE text (Gated DeltaNet layer then gated full attention; 4 experts top-2 + a shared expert)."""
    return _causal("Qwen3_5MoeText", "Qwen3_5MoeForCausalLM", head_dim=16, linear_key_head_dim=16,
                   linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                   layer_types=["linear_attention", "full_attention"], num_experts=4,
                   shared_expert_intermediate_size=32, **_MOE_SMALL, **_LLAMA_LIKE)


def glm_moe_dsa():
    """GLM-MoE-DSA (GLM-5: MLA plus the DSA indexer's top-4 sparse mask, first MLP dense; 4 experts top-2 + shared)."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("GlmMoeDsa", head_dim=8, index_topk=4, index_head_dim=16, index_n_heads=2,
                   mlp_layer_types=["dense", "sparse"], layer_types=["indexed_attention"] * 2,
                   indexer_types=["full", "full"], **_MLA, **_DS, **cfg)


def granitemoe_swa():
    """GraniteMoe-SWA (Granite multipliers, a full and a sliding-window layer; 4 experts top-2)."""
    return _causal("GraniteMoeSWA", num_local_experts=4, num_experts_per_tok=2, sliding_window=5,
                   layer_types=["full_attention", "sliding_attention"], layer_rope_theta=[10000.0, 10000.0],
                   embedding_multiplier=2.0, logits_scaling=2.0, residual_multiplier=0.5, attention_multiplier=0.25,
                   **_LLAMA_LIKE)


def bailing_hybrid():
    """Bailing-Hybrid (Ling 2.5: Kimi delta attention layer then an MLA layer, first MLP dense; 4 experts top-2
    grouped + shared)."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("BailingHybrid", head_dim=16, num_experts=4, num_shared_experts=1, num_expert_group=1, topk_group=1,
                   num_experts_per_token=2, moe_intermediate_size=32, kv_lora_rank=16, qk_rope_head_dim=8,
                   qk_nope_head_dim=8, v_head_dim=16, layer_types=["linear_attention", "full_attention"],
                   mlp_layer_types=["dense", "sparse"], first_k_dense_replace=1, linear_head_dim=16,
                   linear_num_heads=4, layer_group_size=2, pad_token_id=0, **cfg)


def axk1():
    """A.X-K1 (DeepSeek-V3 style MLA with interleaved rope, first MLP dense; 4 experts top-2 + shared)."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("AXK1", head_dim=8, mlp_layer_types=["dense", "sparse"], **_MLA, **_DS, **cfg)


def axk2():
    """A.X-K2 (MLA with an indexer's top-4 sparse mask and a gated norm, first MLP dense; 4 experts top-2)."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    ds = dict(_DS, n_group=None, topk_group=None)
    return _causal("AXK2", head_dim=8, index_topk=4, index_head_dim=16, index_n_heads=2, gated_norm_rank=4,
                   mlp_layer_types=["dense", "sparse"], layer_types=["indexed_attention"] * 2, **_MLA, **ds, **cfg)


def hy_v4():
    """HY-V4 (Hunyuan v4: hyper-connections of 2 streams, MLA with an indexer and a learnable sink, SwiGLU clamp;
    first MLP dense, 4 experts top-2 + shared)."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("HYV4", head_dim=8, index_topk=4, index_head_dim=16, index_n_heads=2, hc_mult=2,
                   mlp_layer_types=["dense", "sparse"], layer_types=["indexed_attention"] * 2,
                   indexer_types=["full", "shared"], pad_token_id=0, **_MLA, **_DS, **cfg)


def beam():
    """Beam (sliding-window layers, grouped sigmoid router, logit soft-cap; first MLP dense, 4 experts top-2)."""
    return _causal("Beam", head_dim=16, sliding_window=5, num_experts=4, n_group=1, topk_group=1,
                   layer_types=["sliding_attention", "full_attention"], mlp_layer_types=["dense", "sparse"],
                   **_MOE_SMALL, **_LLAMA_LIKE)


def aria_text():
    """Aria text (Llama attention, 4 experts top-2 + 2 shared experts in one grouped GEMM)."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k != "intermediate_size"}
    return _causal("AriaText", head_dim=16, intermediate_size=32, moe_num_experts=4, moe_topk=2,
                   moe_num_shared_experts=2, pad_token_id=0, **cfg)


def minimax_m3_text():
    """MiniMax-M3 text (partial rotary, SwiGLU with clamp and alpha, shared expert, routed scaling; 4 experts top-2)."""
    return _causal("MiniMaxM3VLText", "MiniMaxM3VLForCausalLM", head_dim=16, num_local_experts=4,
                   num_experts_per_tok=2, shared_intermediate_size=32, dense_intermediate_size=96, rotary_dim=8,
                   mlp_layer_types=["sparse", "sparse"], layer_types=["full_attention"] * 2, **_LLAMA_LIKE)


def qwen3_vl_moe_text():
    """Qwen3-VL-MoE text tower (interleaved m-rope over 3 position axes, 4 experts top-2) under an LM head."""
    return _text("Qwen3VLMoeTextConfig", "Qwen3VLMoeTextModel", head_dim=16, num_local_experts=4,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3],
                                  "mrope_interleaved": True}, **_MOE_SMALL, **_LLAMA_LIKE)


def glm4v_moe_text():
    """GLM-4V-MoE text tower (m-rope, partial rotary, first MLP dense; 4 experts top-2 + shared) under an LM head."""
    return _text("Glm4vMoeTextConfig", "Glm4vMoeTextModel", rope_parameters={"rope_type": "default", "rope_theta":
                 10000.0, "partial_rotary_factor": 0.5, "mrope_section": [2, 1, 1]}, n_routed_experts=4, n_shared_experts=1, n_group=1,
                 topk_group=1, first_k_dense_replace=1, **_MOE_SMALL, **_LLAMA_LIKE)


def ernie4_5_vl_moe_text():
    """ERNIE-4.5-VL-MoE text tower (text and vision expert groups, first MLP dense; 4 experts top-2 + shared)
    under an LM head."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k not in ("attention_dropout",)}
    return _text("Ernie4_5_VLMoeTextConfig", "Ernie4_5_VLMoeTextModel", rope_parameters={"rope_type": "default",
                 "rope_theta": 10000.0, "mrope_section": [3, 3, 2]}, moe_intermediate_size=[32, 32], moe_k=2,
                 moe_num_experts=4, moe_num_shared_experts=1, mlp_layer_types=["dense", "sparse"], **cfg)


def mistral_large4_text():
    """Mistral-Large-4 text tower (MLA with an indexer, cross-layer KV sharing off, logit soft-cap; first MLP dense,
    4 experts top-2 + shared) under an LM head."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    mla = {k: v for k, v in _MLA.items() if k != "q_lora_rank"}
    return _text("MistralLarge4TextConfig", "MistralLarge4TextModel", head_dim=8, index_topk=4, index_head_dim=16,
                 index_n_heads=2, mlp_layer_types=["dense", "sparse"], layer_types=["indexed_attention"] * 2,
                 indexer_types=["full", "full"], no_rope_layers=[1, 1], kv_source_layers=[0, 1],
                 first_k_dense_replace=1, n_routed_experts=4, n_shared_experts=1, n_group=1, topk_group=1,
                 **_MOE_SMALL, **mla, **cfg)


def step3p7_text():
    """Step-3.7 text tower (a sliding and a full layer, first MLP dense then 4 experts top-2 + a shared expert)
    under an LM head."""
    return _text("Step3p7TextConfig", "Step3p7TextModel", head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=32, share_expert_dim=32, mlp_layer_types=["dense", "sparse"],
                 layer_types=["sliding_attention", "full_attention"], sliding_window=5, num_sliding_attention_heads=4,
                 pad_token_id=0, **_LLAMA_LIKE)


def dots3_note_text():
    """Dots3-Note text tower (MLA with an indexer layer and a sliding layer, first MLP dense; 4 experts top-2 +
    shared) under an LM head."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _text("Dots3NoteTextConfig", "Dots3NoteTextModel", head_dim=8, index_topk=4, index_head_dim=16,
                 index_n_heads=2, sliding_window=5, mlp_layer_types=["dense", "sparse"],
                 layer_types=["indexed_attention", "sliding_attention"], shared_experts_intermediate_size=32,
                 swa_num_attention_heads=4, swa_num_key_value_heads=4, swa_q_lora_rank=32, swa_kv_lora_rank=16,
                 swa_head_dim=16, swa_qk_nope_head_dim=8, swa_v_head_dim=16, pad_token_id=0, **_MLA, **_DS, **cfg)


def privacy_filter():
    """OpenAI privacy filter (bidirectional gpt-oss style encoder: sinks, sliding window, clamped SwiGLU experts;
    4 experts top-2) as a token classifier over 5 labels."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    conf = tf.OpenAIPrivacyFilterConfig(vocab_size=VOCAB, num_hidden_layers=2, hidden_size=64, intermediate_size=32,
                                        head_dim=16, num_attention_heads=4, num_key_value_heads=2, sliding_window=5,
                                        num_local_experts=4, num_experts_per_tok=2, num_labels=5, pad_token_id=0,
                                        eos_token_id=0, max_position_embeddings=64, attention_dropout=0.0,
                                        classifier_dropout=0.0, attn_implementation="eager")
    model = tf.OpenAIPrivacyFilterForTokenClassification(conf)
    gen = _gen()

    class Tagger(nn.Module):
        def __init__(self, hf):
            super().__init__()
            self.hf = hf

        def forward(self, x):
            return self.hf(input_ids=x).logits

    return Tagger(model), (_tokens(gen, BATCH, SEQ, VOCAB),), (_tokens(gen, BATCH, SEQ, 5),)
