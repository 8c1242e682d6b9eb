"""Outside models of architectures no other outside file covers, a third round (see kinds_fresh.py):
RecurrentGemma's RG-LRU scan, the Jamba / Zamba2 / Falcon-H1 hybrids of Mamba and attention, DiffLlama's
differential attention, DINOv2 (interpolated position embeddings), PVTv2, FocalNet, EfficientNet, WavLM
(gated relative position bias) and Nystromformer (landmark attention, iterative pseudo-inverse).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_fresh3.py:<name>``
returning ``(model, example_inputs, targets)`` at a tiny size from a ``transformers`` config (random weights,
no hub, eager attention, no dropout, no cache), seeded.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import _DROP0, BATCH, VOCAB, Logits, _causal, _vision  # noqa: E402
from kinds_fresh import _BERT_LIKE  # noqa: E402
from roam_tvm.zoo.families import _gen, _quiet  # noqa: E402


def recurrent_gemma():
    """RecurrentGemma (Griffin: RG-LRU recurrent blocks with a conv1d, then a local-attention block)."""
    return _causal("RecurrentGemma", hidden_size=64, intermediate_size=96, num_attention_heads=4,
                   num_key_value_heads=1, lru_width=64, attention_window_size=8, conv1d_width=4,
                   block_types=["recurrent", "attention"], logits_soft_cap=30.0, final_w_init_variance_scale=1.0,
                   use_cache=False, attn_implementation="eager")


def jamba():
    """Jamba hybrid (Mamba layer, then attention; MoE of 4 experts top-2 on the second layer), hidden 64."""
    return _causal("Jamba", hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                   num_experts=4, num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
                   attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2,
                   mamba_dt_rank=8, use_mamba_kernels=False, max_position_embeddings=64, **_DROP0)


def zamba2():
    """Zamba2 hybrid (Mamba2 layers with a shared attention block re-applied, LoRA on the shared MLP)."""
    return _causal("Zamba2", hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=4,
                   mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_ngroups=1, mamba_headdim=16,
                   chunk_size=4, layers_block_type=["mamba", "hybrid"], hybrid_layer_ids=[1],
                   num_mem_blocks=1, use_shared_attention_adapter=False, adapter_rank=8, use_mem_rope=True,
                   max_position_embeddings=64, attention_dropout=0.0, use_cache=False, tie_word_embeddings=False,
                   attn_implementation="eager")


def falcon_h1():
    """Falcon-H1 (attention and a Mamba2 mixer in parallel in every layer, muP multipliers), hidden 64."""
    return _causal("FalconH1", hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=16, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_n_heads=8,
                   mamba_d_head=16, mamba_d_ssm=128, mamba_n_groups=1, mamba_chunk_size=4, max_position_embeddings=64, **_DROP0)


def diffllama():
    """DiffLlama (differential attention: the difference of two softmax maps, a learned lambda), hidden 64."""
    return _causal("DiffLlama", hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                   max_position_embeddings=64, **_DROP0)


def dinov2():
    """DINOv2 (layer scale, position embeddings bicubic-interpolated to the 32x32 grid), hidden 64."""
    return _vision("Dinov2Config", "Dinov2ForImageClassification", image_size=64, patch_size=8, hidden_size=64,
                   num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, layerscale_value=0.1,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0)


def pvt_v2():
    """PVTv2 (overlapping patch embeddings, spatial-reduction attention, depthwise-conv MLP), 32x32 images."""
    return _vision("PvtV2Config", "PvtV2ForImageClassification", num_encoder_blocks=2, depths=[1, 1],
                   sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
                   num_attention_heads=[1, 2], mlp_ratios=[2, 2], hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0, drop_path_rate=0.0)


def focalnet():
    """FocalNet (focal modulation: gated depthwise-conv context levels instead of attention), 32x32 images."""
    return _vision("FocalNetConfig", "FocalNetForImageClassification", image_size=32, patch_size=4, embed_dim=16,
                   depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3], hidden_dropout_prob=0.0,
                   drop_path_rate=0.0)


def efficientnet_hf():
    """EfficientNet from transformers (MBConv with squeeze-excitation, swish, depth/width multipliers)."""
    return _vision("EfficientNetConfig", "EfficientNetForImageClassification", image_size=32, width_coefficient=0.25,
                   depth_coefficient=0.25, hidden_dim=320, dropout_rate=0.0, drop_connect_rate=0.0)


def wavlm():
    """WavLM classifier (gated relative position bias in attention, conv feature encoder), 4 classes."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=8,
                          num_conv_pos_embedding_groups=4, num_buckets=16, max_bucket_distance=32,
                          hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                          layerdrop=0.0, final_dropout=0.0, mask_time_prob=0.0, num_labels=4,
                          classifier_proj_size=16, vocab_size=VOCAB)
    model = Logits(tf.WavLMForSequenceClassification(conf), "input_values")
    return model, (torch.randn(BATCH, 400, generator=gen),), (torch.randint(0, 4, (BATCH,), generator=gen),)


def nystromformer():
    """Nyströmformer masked LM (landmark attention with an iterative pseudo-inverse), 16 tokens, 4 landmarks."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.NystromformerConfig(vocab_size=VOCAB, num_landmarks=4, segment_means_seq_len=16, conv_kernel_size=3,
                                  pad_token_id=1, **_BERT_LIKE)
    model = Logits(tf.NystromformerForMaskedLM(conf))
    return model, (torch.randint(2, VOCAB, (BATCH, 16), generator=gen),), \
        (torch.randint(0, VOCAB, (BATCH, 16), generator=gen),)
