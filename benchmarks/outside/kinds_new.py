"""Outside models "of the kinds" of the zoo that kinds_more.py / hf_more.py did not cover, built from
``transformers`` configs (random weights, no hub): decoders (Qwen2 with q/k/v biases, Mistral with a sliding
window shorter than the sequence, Starcoder2, Nemotron, GLM, GLM-4, Helium, SmolLM3 with NoPE layers, Olmo3),
MoE decoders (Qwen3-MoE, PhiMoE, JetMoE, DBRX, DeepSeek-V2), NLLB-MoE, FLAN-T5 / ByT5 style T5s, Swin
backbones (MaskFormer-Swin, Donut-Swin), frozen backbones with trainable heads, an LM loss with label
smoothing and ``ignore_index=-100``, and models returning a dict or an HF ``ModelOutput``.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_new.py:<name>``:
it returns ``(model, example_inputs, targets[, loss])`` at a tiny size (2 layers, width 32-64, vocab 256,
12 tokens; 32x32 images). Eager attention, no dropout, no cache. Random weights and data, seeded.
Plain ``torch.nn`` models of the same kinds are in kinds_new_nn.py.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import (_LLAMA_LIKE, BATCH, SEQ, VOCAB, _causal, _seq2seq, _vision)  # noqa: E402
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402

F = nn.functional
_SWIN_LIKE = dict(embed_dim=16, depths=[2, 2], num_heads=[2, 4], mlp_ratio=2.0, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, drop_path_rate=0.0)


# dense decoders
def qwen2():
    """Qwen2 (biases on q/k/v only, GQA 4:2), hidden 64; the model of the ``--precision`` rows."""
    return _causal("Qwen2", **_LLAMA_LIKE)


def mistral_swa():
    """Mistral with a sliding window of 4 over 12 tokens (the mask drops keys older than the window)."""
    return _causal("Mistral", sliding_window=4, head_dim=16, **_LLAMA_LIKE)


def starcoder2():
    """Starcoder2 (LayerNorm with bias, gelu_pytorch_tanh MLP with biases, sliding window 8), hidden 64."""
    return _causal("Starcoder2", sliding_window=8, residual_dropout=0.0, embedding_dropout=0.0,
                   use_bias=True, **_LLAMA_LIKE)


def nemotron():
    """Nemotron (squared-ReLU MLP without a gate, LayerNorm1p, partial rotary 0.5), hidden 64."""
    return _causal("Nemotron", partial_rotary_factor=0.5, head_dim=16, **_LLAMA_LIKE)


def glm():
    """GLM (fused gate-up MLP, interleaved partial rotary, q/k/v biases), hidden 64."""
    return _causal("Glm", pad_token_id=0, head_dim=16, partial_rotary_factor=0.5, **_LLAMA_LIKE)


def glm4():
    """GLM-4 (GLM plus post-attention and post-MLP sandwich norms), hidden 64."""
    return _causal("Glm4", pad_token_id=0, head_dim=16, partial_rotary_factor=0.5, **_LLAMA_LIKE)


def helium():
    """Helium (LLaMA-like, RMSNorm with its own epsilon, untied head), hidden 64."""
    return _causal("Helium", head_dim=16, **_LLAMA_LIKE)


def smollm3():
    """SmolLM3 (every second layer without RoPE: ``no_rope_layers``), hidden 64."""
    return _causal("SmolLM3", pad_token_id=0, no_rope_layers=[1, 0], **_LLAMA_LIKE)


def olmo3():
    """Olmo3 (q/k norms over all heads, sliding-window layer then a full-attention layer), hidden 64."""
    return _causal("Olmo3", sliding_window=4, layer_types=["sliding_attention", "full_attention"], **_LLAMA_LIKE)


# MoE decoders
def qwen3_moe():
    """Qwen3-MoE (q/k norms, 4 experts top-2 with renormalised weights, every layer sparse), hidden 64."""
    return _causal("Qwen3Moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16,
                   decoder_sparse_step=1, norm_topk_prob=True, **_LLAMA_LIKE)


def phimoe():
    """PhiMoE (sparsemixer top-2 routing of 4 experts, LayerNorm, q/k/v biases), hidden 64."""
    return _causal("Phimoe", num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.0,
                   input_jitter_noise=0.0, hidden_dropout=0.0, **_LLAMA_LIKE)


def jetmoe():
    """JetMoE (mixture-of-attention-heads experts and MoE MLP, top-2 of 4 each), hidden 64."""
    return _causal("JetMoe", hidden_size=64, num_key_value_heads=2, kv_channels=16, intermediate_size=96,
                   num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64, use_cache=False,
                   tie_word_embeddings=False, attention_dropout=0.0, attn_implementation="eager")


def dbrx():
    """DBRX (fused Wqkv with clipping, LayerNorm without bias, 4 GLU experts top-2), d_model 64."""
    return _causal("Dbrx", d_model=64, n_heads=4, n_layers=2, max_seq_len=64, use_cache=False,
                   tie_word_embeddings=False, attn_implementation="eager",
                   attn_config=dict(kv_n_heads=2, clip_qkv=8.0, rope_theta=10000.0, attn_pdrop=0.0),
                   ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2), resid_pdrop=0.0,
                   emb_pdrop=0.0)


def deepseek_v2():
    """DeepSeek-V2 (multi-head latent attention, kv LoRA rank 16, no q LoRA; layer 2 softmax top-2 of 4
    experts + a shared expert), hidden 64."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4, moe_intermediate_size=32, n_routed_experts=4,
               n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1, q_lora_rank=None,
               kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, topk_method="greedy")
    return _causal("DeepseekV2", **cfg)


# encoder-decoders
_T5_SMALL = dict(d_model=64, d_kv=16, d_ff=96, num_layers=2, num_heads=4, dropout_rate=0.0, use_cache=False,
                 relative_attention_num_buckets=8, attn_implementation="eager")


def flan_t5():
    """FLAN-T5 style T5 v1.1 (gated-GELU FF, untied lm_head without rescaling), 2+2 layers, d_model 64."""
    return _seq2seq("T5Config", "T5ForConditionalGeneration", feed_forward_proj="gated-gelu",
                    tie_word_embeddings=False, **_T5_SMALL)


def byt5():
    """ByT5 style T5 (a byte-sized vocabulary of 256, a deep encoder of 3 layers and a 1-layer decoder,
    gated-GELU), d_model 64."""
    cfg = dict(_T5_SMALL, num_layers=3, num_decoder_layers=1)
    return _seq2seq("T5Config", "T5ForConditionalGeneration", feed_forward_proj="gated-gelu",
                    tie_word_embeddings=False, **cfg)


def nllb_moe():
    """NLLB-MoE (top-2 routed experts every second layer with capacity, pre-norm), 2+2 layers, d_model 64."""
    return _seq2seq("NllbMoeConfig", "NllbMoeForConditionalGeneration", d_model=64, encoder_layers=2,
                    decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=96,
                    decoder_ffn_dim=96, num_experts=4, expert_capacity=8, encoder_sparse_step=2,
                    decoder_sparse_step=2, router_ignore_padding_tokens=False, encoder_layerdrop=0.0,
                    decoder_layerdrop=0.0, dropout=0.0, attention_dropout=0.0,
                    activation_dropout=0.0, moe_token_dropout=0.0, max_position_embeddings=64, use_cache=False,
                    pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                    attn_implementation="eager")


# Swin backbones
class _PooledBackbone(nn.Module):
    """An HF backbone's last feature map, mean-pooled, then a linear classifier."""

    def __init__(self, hf, width: int, classes: int = 5):
        super().__init__()
        self.hf, self.head = hf, nn.Linear(width, classes)

    def forward(self, pixel_values):
        out = self.hf(pixel_values=pixel_values)
        feats = out.feature_maps[-1] if hasattr(out, "feature_maps") else out.last_hidden_state
        return self.head(feats.flatten(2).mean(-1) if feats.dim() == 4 else feats.mean(1))


def _backbone(cfg_name: str, model_name: str, width: int, **cfg):
    import transformers as tf

    _quiet()
    gen = _gen()
    model = _PooledBackbone(getattr(tf, model_name)(getattr(tf, cfg_name)(**cfg)), width)
    x = torch.randn(BATCH, 3, 32, 32, generator=gen)
    return model, (x,), (torch.randint(0, 5, (BATCH,), generator=gen),)


def maskformer_swin():
    """MaskFormer-Swin backbone (feature maps of both stages out, 32x32 in 2x2 patches, windows of 4)."""
    return _backbone("MaskFormerSwinConfig", "MaskFormerSwinBackbone", 32, image_size=32, patch_size=2,
                     window_size=4, out_features=["stage1", "stage2"], **_SWIN_LIKE)


def donut_swin():
    """Donut-Swin encoder (Swin without a pooler head, 32x32 in 2x2 patches, windows of 4), mean-pooled."""
    return _backbone("DonutSwinConfig", "DonutSwinModel", 32, image_size=32, patch_size=2, window_size=4,
                     **_SWIN_LIKE)


# frozen backbones + trainable heads
def qwen2_frozen_body():
    """Qwen2 with everything frozen except the final norm and the lm_head."""
    model, ins, tgt = qwen2()
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(("hf.lm_head", "hf.model.norm")))
    return model, ins, tgt


def swin_frozen_stage1():
    """Donut-Swin with the patch embedding and the first stage frozen, stage 2 and the head trained."""
    model, ins, tgt = donut_swin()
    for p in [*model.hf.embeddings.parameters(), *model.hf.encoder.layers[0].parameters()]:
        p.requires_grad_(False)
    return model, ins, tgt


def t5_frozen_encoder():
    """FLAN-T5 style T5 with the shared embedding and the whole encoder frozen (decoder + head trained)."""
    model, ins, tgt = flan_t5()
    for p in [*model.hf.shared.parameters(), *model.hf.encoder.parameters()]:
        p.requires_grad_(False)
    return model, ins, tgt


# losses and outputs
def _lm_loss(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, label_smoothing=0.1)


def qwen2_masked_loss():
    """Qwen2 with an LM loss callable: label smoothing 0.1 and ``ignore_index=-100`` on padded labels."""
    model, ins, (labels,) = qwen2()
    labels = labels.clone()
    labels[0, :3] = -100  # prompt tokens not trained
    labels[1, -2:] = -100  # padding
    return model, ins, (labels,), _lm_loss


class _RawHF(nn.Module):
    """An HF causal LM called with ``return_dict=True``: the forward returns the ``CausalLMOutput``."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids):
        return self.hf(input_ids=input_ids, use_cache=False, return_dict=True)


def helium_model_output():
    """Helium whose forward returns the HF ``ModelOutput`` (the compare reads its ``logits``)."""
    model, ins, tgt = helium()
    return _RawHF(model.hf), ins, tgt


class _DictOut(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids):
        return {"logits": self.hf(input_ids=input_ids, use_cache=False).logits}


def _dict_loss(out, labels):
    return F.cross_entropy(out["logits"].flatten(0, 1), labels.flatten())


def qwen2_dict_out():
    """Qwen2 whose forward returns ``{"logits": ...}`` with a loss callable reading ``out["logits"]``."""
    model, ins, tgt = qwen2()
    return _DictOut(model.hf), ins, tgt, _dict_loss


# newer decoders
def gpt_oss():
    """GPT-OSS (attention sinks, alternating sliding / full layers, clamped SwiGLU experts with biases,
    top-2 of 4), hidden 64."""
    return _causal("GptOss", num_local_experts=4, num_experts_per_tok=2, head_dim=16, sliding_window=4,
                   layer_types=["sliding_attention", "full_attention"], pad_token_id=0, **_LLAMA_LIKE)


def glm4_moe():
    """GLM-4-MoE (layer 1 dense, layer 2 sigmoid-routed top-2 of 4 experts with a shared expert, partial
    rotary, q/k norms off), hidden 64."""
    return _causal("Glm4Moe", n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, n_group=1,
                   topk_group=1, moe_intermediate_size=32, first_k_dense_replace=1, head_dim=16,
                   partial_rotary_factor=0.5, pad_token_id=0, **_LLAMA_LIKE)


def apertus():
    """Apertus (xIELU activation with learned parameters, q/k norms, no MLP gate), hidden 64."""
    return _causal("Apertus", head_dim=16, pad_token_id=0, **_LLAMA_LIKE)


def exaone4():
    """EXAONE-4 (post-norm blocks, q/k norms, hybrid sliding / full layers), hidden 64."""
    return _causal("Exaone4", head_dim=16, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                   pad_token_id=0, **_LLAMA_LIKE)


def ernie4_5_moe():
    """ERNIE-4.5-MoE (top-2 of 4 experts with a shared expert and an expert bias for routing), hidden 64."""
    return _causal("Ernie4_5_Moe", moe_num_experts=4, moe_k=2, moe_intermediate_size=32,
                   moe_num_shared_experts=1, moe_layer_start_index=1, head_dim=16, pad_token_id=0, **_LLAMA_LIKE)


def lfm2():
    """LFM2 (hybrid: gated short-convolution layers (kernel 3, causal) then a GQA attention layer, q/k norms),
    hidden 64."""
    return _causal("Lfm2", layer_types=["conv", "full_attention"], conv_L_cache=3, block_ff_dim=96,
                   block_auto_adjust_ff_dim=False, pad_token_id=0, **_LLAMA_LIKE)
