"""More outside models "of the kinds" of the zoo, built from ``transformers`` configs (random weights, no hub):
Swin V2 and Swin variants, T5 variants (LongT5, encoder-only classification, LoRA), LLaMA variants (tied
embeddings, MQA with biases and a wide head_dim, llama3 / dynamic RoPE scaling) and MoE decoders
(SwitchTransformers with capacity dropping, OLMoE, GraniteMoE, DeepSeek-V3).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_more.py:<name>``:
it returns ``(model, example_inputs, targets)`` at a tiny size (2 layers, width 32-64, vocab 256,
12 tokens; 32x32 images). Eager attention, no dropout, no cache. Random weights and data, seeded.
Plain ``torch.nn`` models of the same kinds are in kinds_more_nn.py.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import (_LLAMA_LIKE, BATCH, SEQ, VOCAB, LoRALinear, _causal,  # noqa: E402
                     _seq2seq, _vision)
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402

_SWIN_LIKE = dict(embed_dim=16, depths=[2, 2], num_heads=[2, 4], mlp_ratio=2.0, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, drop_path_rate=0.0, attn_implementation="eager")


# Swin
def swinv2():
    """Swin V2 (scaled cosine attention with a learned logit scale, log-spaced continuous position bias
    MLP, post-norm residuals), 32x32 images in 2x2 patches, windows of 4."""
    return _vision("Swinv2Config", "Swinv2ForImageClassification", image=32, image_size=32, patch_size=2,
                   window_size=4, **_SWIN_LIKE)


def swin_pad():
    """Swin on 40x40 images in 4x4 patches: 10x10 tokens padded to 12x12 for windows of 4, then 5x5
    padded to 8x8 (both stages shift every second block over padded windows)."""
    return _vision("SwinConfig", "SwinForImageClassification", image=40, image_size=40, patch_size=4,
                   window_size=4, **_SWIN_LIKE)


def swin_frozen_embed():
    """Swin (32x32, 2x2 patches, windows of 4) with the patch embedding and its norm frozen."""
    model, ins, tgt = _vision("SwinConfig", "SwinForImageClassification", image=32, image_size=32, patch_size=2,
                              window_size=4, **_SWIN_LIKE)
    for p in model.hf.swin.embeddings.parameters():
        p.requires_grad_(False)
    return model, ins, tgt


def swin_amp():
    """Swin (32x32, 2x2 patches, windows of 4) in fp32, for the ``--precision`` rows."""
    return _vision("SwinConfig", "SwinForImageClassification", image=32, image_size=32, patch_size=2,
                   window_size=4, **_SWIN_LIKE)


# T5
_T5_SMALL = dict(d_model=64, d_kv=16, d_ff=96, num_layers=2, num_heads=4, dropout_rate=0.0, use_cache=False,
                 relative_attention_num_buckets=8, attn_implementation="eager")


def t5_small():
    """T5 (ReLU FF, tied and rescaled embeddings, relative position bias), 2+2 layers, d_model 64;
    the model of the ``--precision`` rows."""
    return _seq2seq("T5Config", "T5ForConditionalGeneration", **_T5_SMALL)


def longt5_local():
    """LongT5 with local attention (radius 4: blocked keys, a block-local position bias), 2+2 layers."""
    return _seq2seq("LongT5Config", "LongT5ForConditionalGeneration", encoder_attention_type="local",
                    local_radius=4, **_T5_SMALL)


def longt5_tglobal():
    """LongT5 with transient-global attention (local radius 4, global blocks of 4 tokens summed from the
    sequence and normed), 2+2 layers."""
    return _seq2seq("LongT5Config", "LongT5ForConditionalGeneration", encoder_attention_type="transient-global",
                    local_radius=4, global_block_size=4, **_T5_SMALL)


class _EncoderClassifier(nn.Module):
    """A T5 encoder, mean-pooled over unmasked tokens, then a linear classifier."""

    def __init__(self, enc, width: int, classes: int):
        super().__init__()
        self.enc, self.head = enc, nn.Linear(width, classes)

    def forward(self, input_ids, attention_mask):
        h = self.enc(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1))


def t5_enc_cls():
    """T5 encoder only (gated-GELU, v1.1 style) with a padding mask, mean-pooled, 3 classes."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.T5Config(vocab_size=VOCAB, feed_forward_proj="gated-gelu", **_T5_SMALL)
    model = _EncoderClassifier(tf.T5EncoderModel(conf), 64, 3)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0  # the second sequence is padded
    return model, (_tokens(gen, BATCH, SEQ, VOCAB), mask), (torch.randint(0, 3, (BATCH,), generator=gen),)


def t5_lora():
    """T5 (2+2 layers, d_model 64) frozen, with rank-4 LoRA adapters on every attention's q and v."""
    model, ins, tgt = t5_small()
    for p in model.parameters():
        p.requires_grad_(False)
    for m in list(model.modules()):
        if type(m).__name__ == "T5Attention":
            m.q, m.v = LoRALinear(m.q), LoRALinear(m.v)
    return model, ins, tgt


# LLaMA variants
def llama_tied_mqa():
    """LLaMA with tied input/output embeddings, one KV head (MQA), head_dim 24 (not 64 / 4),
    biases on q/k/v/o and on the MLP."""
    cfg = dict(_LLAMA_LIKE, tie_word_embeddings=True, num_key_value_heads=1, head_dim=24, attention_bias=True,
               mlp_bias=True)
    return _causal("Llama", **cfg)


def llama_rope_llama3():
    """LLaMA with llama3 RoPE scaling (factor 8, low/high frequency bands over 16 original positions)."""
    rope = dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                original_max_position_embeddings=16)
    return _causal("Llama", **dict(_LLAMA_LIKE, rope_parameters=rope))


def llama_rope_dynamic():
    """LLaMA with dynamic NTK RoPE scaling (factor 2 over 8 original positions: the 12 tokens exceed them,
    so the inverse frequencies are recomputed from the sequence length in the forward)."""
    rope = dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)
    return _causal("Llama", **dict(_LLAMA_LIKE, rope_parameters=rope, max_position_embeddings=8))


# MoE
def switch():
    """SwitchTransformers (top-1 router, expert capacity 4 of 24 tokens: the overflow is dropped), sparse
    every second layer, 2+2 layers, d_model 64, 4 experts."""
    return _seq2seq("SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration", d_model=64, d_kv=16,
                    d_ff=96, expert_capacity=4, num_layers=2, num_sparse_encoder_layers=1, num_decoder_layers=2,
                    num_sparse_decoder_layers=1, num_heads=4, num_experts=4, relative_attention_num_buckets=8,
                    router_jitter_noise=0.0, dropout_rate=0.0, use_cache=False, attn_implementation="eager")


def olmoe():
    """OLMoE (q/k norms, 4 experts top-2 without renormalised weights), hidden 64."""
    return _causal("Olmoe", num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, **_LLAMA_LIKE)


def granitemoe():
    """GraniteMoE (parallel-experts linear layers, top-2 of 4, Granite multipliers), hidden 64."""
    return _causal("GraniteMoe", num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=12.0,
                   residual_multiplier=0.22, attention_multiplier=0.0625, logits_scaling=8.0, **_LLAMA_LIKE)


def deepseek_v3():
    """DeepSeek-V3 (multi-head latent attention with low-rank q and kv, decoupled RoPE dims; layer 1 dense,
    layer 2 sigmoid-routed top-2 of 4 experts in 2 groups + a shared expert), hidden 64."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4, moe_intermediate_size=32, n_routed_experts=4,
               n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1,
               q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
               routed_scaling_factor=1.0, rope_interleave=True)
    return _causal("DeepseekV3", **cfg)
