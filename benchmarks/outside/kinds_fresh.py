"""Outside models of architectures no other outside file covers, built from ``transformers`` configs
(random weights, no hub): state-space LMs (Mamba's selective scan, Mamba2's chunked scan, the Bamba
hybrid, RWKV's time mixing), ALiBi (MPT) and multi-query attention (GPT-BigCode), DeBERTa-v2's
disentangled relative attention, ConvBERT's span-dynamic convolution, Funnel's pooled encoder, CLIP's
two towers under a contrastive loss, Segformer's efficient attention with a per-pixel loss, MobileViT's
unfolded patches, a wav2vec2-Conformer audio classifier and TimeSformer's divided space-time attention;
then FNet's FFT mixing, XLNet's relative shift, Longformer's sliding-window chunks, RoFormer / ESM rotary
encoders, MPNet's relative buckets, SqueezeBERT's grouped conv1d, LeViT, PoolFormer, Falcon-Mamba, HuBERT,
BigBird's block-sparse and Reformer's LSH attention; then RecurrentGemma's RG-LRU, the Jamba / Zamba2 /
Falcon-H1 hybrids, DiffLlama, DINOv2, PVTv2, FocalNet, EfficientNet, WavLM and Nystromformer.
Plain ``torch.nn`` models (a GNN, a Perceiver) are in kinds_fresh_nn.py.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_fresh.py:<name>``:
it returns ``(model, example_inputs, targets[, loss])`` at a tiny size (2 layers, width 32-64, vocab 256,
12 tokens; 32x32 images). Eager attention, no dropout, no cache. Random weights and data, seeded.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import _DROP0, BATCH, SEQ, VOCAB, Logits, _causal, _encoder, _vision  # noqa: E402
from roam_tvm.zoo.families import _gen, _quiet  # noqa: E402

F = nn.functional
_BERT_LIKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


# state-space and recurrent LMs
def mamba():
    """Mamba (causal depthwise conv1d, selective scan over 12 steps in PyTorch's slow path), hidden 32."""
    return _causal("Mamba", hidden_size=32, state_size=8, expand=2, conv_kernel=4, use_cache=False,
                   tie_word_embeddings=False)


def mamba2():
    """Mamba2 (chunked SSD scan: cumsum, segment sums, exp of masked differences; grouped RMSNorm), hidden 32."""
    return _causal("Mamba2", hidden_size=32, state_size=8, expand=2, head_dim=8, num_heads=8, n_groups=1,
                   chunk_size=4, conv_kernel=4, use_cache=False, tie_word_embeddings=False)


def bamba():
    """Bamba hybrid (Mamba2 mixer layer then an attention layer with RoPE/GQA), hidden 64."""
    return _causal("Bamba", hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                   attn_layer_indices=[1], mamba_n_heads=8, mamba_d_head=16, mamba_d_state=8, mamba_n_groups=1,
                   mamba_chunk_size=4, mamba_expand=2, max_position_embeddings=64, **_DROP0)


def rwkv():
    """RWKV-4 (token shift, time-mixing WKV recurrence in PyTorch's CPU path, channel mixing), hidden 32."""
    return _causal("Rwkv", hidden_size=32, attention_hidden_size=32, intermediate_size=64, context_length=64,
                   use_cache=False, tie_word_embeddings=False)


# attention variants
def mpt():
    """MPT (ALiBi biases instead of positions, no biases, fused qkv), hidden 64."""
    return _causal("Mpt", d_model=64, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64, use_cache=False,
                   attn_config={"alibi": True, "attn_pdrop": 0}, resid_pdrop=0.0, emb_pdrop=0.0)


def gpt_bigcode():
    """GPT-BigCode (multi-query attention: one key/value head), hidden 64."""
    return _causal("GPTBigCode", n_embd=64, n_layer=2, n_head=4, n_positions=64, multi_query=True,
                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, attn_implementation="eager")


# encoders
def deberta_v2():
    """DeBERTa-v2 masked LM (disentangled c2p/p2c attention over log-bucketed relative positions), hidden 64."""
    return _encoder("DebertaV2Config", "DebertaV2ForMaskedLM", None, relative_attention=True,
                    position_buckets=8, max_relative_positions=16, pos_att_type=["p2c", "c2p"],
                    position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True, **_BERT_LIKE)


def convbert():
    """ConvBERT masked LM (span-based dynamic convolution via unfold next to half-width attention), hidden 64."""
    return _encoder("ConvBertConfig", "ConvBertForMaskedLM", None, embedding_size=64, head_ratio=2, conv_kernel_size=3,
                    num_groups=1, **_BERT_LIKE)


def funnel():
    """Funnel Transformer classifier (mean-pooled query blocks 12 -> 6 tokens, relative shift attention)."""
    return _encoder("FunnelConfig", "FunnelForSequenceClassification", 3, num_labels=3, block_sizes=[1, 1],
                    d_model=64, n_head=4, d_head=16, d_inner=96, hidden_dropout=0.0, attention_dropout=0.0,
                    activation_dropout=0.0)


# two towers
class _Clip(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, pixel_values):
        return self.hf(input_ids=input_ids, pixel_values=pixel_values).logits_per_image


def _contrastive(logits_per_image, labels):
    """CLIP's symmetric loss: cross-entropy over images and over texts."""
    return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_image.t(), labels)) / 2


def clip():
    """CLIP (a text tower and a ViT tower, learned temperature) under the symmetric contrastive loss, batch 4."""
    import transformers as tf

    _quiet()
    gen = _gen()
    text = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=SEQ, attention_dropout=0.0)
    vision = dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, attention_dropout=0.0)
    conf = tf.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    conf._attn_implementation = "eager"
    model = _Clip(tf.CLIPModel(conf))
    batch = 4
    ids = torch.randint(0, VOCAB, (batch, SEQ), generator=gen)
    return model, (ids, torch.randn(batch, 3, 32, 32, generator=gen)), (torch.arange(batch),), _contrastive


# vision
def segformer():
    """Segformer (overlapping patch embeddings, reduced-key attention, Mix-FFN depthwise conv, all-MLP decoder),
    per-pixel cross-entropy on the 8x8 logits of 32x32 images."""
    model, (x,), _ = _vision("SegformerConfig", "SegformerForSemanticSegmentation", num_channels=3,
                             num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                             patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                             decoder_hidden_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                             classifier_dropout_prob=0.0, drop_path_rate=0.0)
    gen = torch.Generator().manual_seed(1)
    return model, (x,), (torch.randint(0, 5, (BATCH, 8, 8), generator=gen),), F.cross_entropy


def mobilevit():
    """MobileViT-XXS-like (inverted residuals, unfold to patches -> transformer -> fold back), 32x32 images."""
    return _vision("MobileViTConfig", "MobileViTForImageClassification", image_size=32, patch_size=2,
                   hidden_sizes=[32, 32, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 48], num_attention_heads=2,
                   mlp_ratio=2.0, expand_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                   classifier_dropout_prob=0.0, attn_implementation="eager")


def timesformer():
    """TimeSformer (divided attention: over 4 frames, then over each frame's 16 patches), 4x3x32x32 video."""
    return _video("TimesformerConfig", "TimesformerForVideoClassification", image_size=32, patch_size=8,
                  num_frames=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0)


def _video(cfg_name: str, model_name: str, classes: int = 5, **cfg):
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = getattr(tf, cfg_name)(num_labels=classes, **cfg)
    model = Logits(getattr(tf, model_name)(conf), "pixel_values")
    x = torch.randn(BATCH, cfg["num_frames"], 3, cfg["image_size"], cfg["image_size"], generator=gen)
    return model, (x,), (torch.randint(0, classes, (BATCH,), generator=gen),)


# audio
def wav2vec2_conformer():
    """wav2vec2-Conformer classifier (conv feature encoder on 400 raw samples, conv positional embedding,
    Conformer blocks with rotary attention and depthwise conv modules, mean pooling), 4 classes."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Wav2Vec2ConformerConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4,
        conv_depthwise_kernel_size=7, position_embeddings_type="rotary", hidden_dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, final_dropout=0.0,
        mask_time_prob=0.0, num_labels=4, classifier_proj_size=16, vocab_size=VOCAB)
    model = Logits(tf.Wav2Vec2ConformerForSequenceClassification(conf), "input_values")
    x = torch.randn(BATCH, 400, generator=gen)
    return model, (x,), (torch.randint(0, 4, (BATCH,), generator=gen),)


# a second round: mixing without attention, relative attention, sparse attention, hashing
def fnet():
    """FNet masked LM (token mixing by a 2-D FFT's real part instead of attention), hidden 64."""
    return _encoder("FNetConfig", "FNetForMaskedLM", None, hidden_size=64, num_hidden_layers=2,
                    intermediate_size=96, max_position_embeddings=64, hidden_dropout_prob=0.0,
                    use_tpu_fourier_optimizations=False, type_vocab_size=2)


def xlnet():
    """XLNet LM head (two-stream-free relative attention with rel_shift, segment biases), d_model 64."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.XLNetConfig(vocab_size=VOCAB, d_model=64, n_layer=2, n_head=4, d_inner=96, dropout=0.0,
                          use_mems_train=False, mem_len=None)
    model = Logits(tf.XLNetLMHeadModel(conf))
    return model, (torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen),), \
        (torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen),)


def longformer():
    """Longformer masked LM (sliding-window attention of width 4 over 16 tokens, chunked diagonals)."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.LongformerConfig(vocab_size=VOCAB, attention_window=4, pad_token_id=1, **_BERT_LIKE)
    model = Logits(tf.LongformerForMaskedLM(conf))
    return model, (torch.randint(2, VOCAB, (BATCH, 16), generator=gen),), \
        (torch.randint(0, VOCAB, (BATCH, 16), generator=gen),)


def roformer():
    """RoFormer masked LM (rotary positions applied inside BERT-style attention), hidden 64."""
    return _encoder("RoFormerConfig", "RoFormerForMaskedLM", None, embedding_size=64, **_BERT_LIKE)


def mpnet():
    """MPNet masked LM (32 T5-style relative position buckets in a BERT encoder), hidden 64."""
    return _encoder("MPNetConfig", "MPNetForMaskedLM", None, relative_attention_num_buckets=32, pad_token_id=1,
                    **_BERT_LIKE)


def esm():
    """ESM protein masked LM (rotary attention, pre-LayerNorm, token dropout off), hidden 64."""
    return _encoder("EsmConfig", "EsmForMaskedLM", None, pad_token_id=1, mask_token_id=2,
                    position_embedding_type="rotary", token_dropout=False, **_BERT_LIKE)


def squeezebert():
    """SqueezeBERT masked LM (grouped conv1d projections instead of linear layers), hidden 64."""
    return _encoder("SqueezeBertConfig", "SqueezeBertForMaskedLM", None, embedding_size=64, q_groups=2,
                    k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=2, output_groups=2,
                    **_BERT_LIKE)


def levit():
    """LeViT (conv stem, attention with learned biases indexed by offsets, a subsampling attention stage), 64x64 images."""
    return _vision("LevitConfig", "LevitForImageClassification", image=64, image_size=64, patch_size=16,
                   hidden_sizes=[32, 48], num_attention_heads=[2, 3], depths=[1, 1], key_dim=[8, 8],
                   drop_path_rate=0, mlp_ratio=[2, 2], attention_ratio=[2, 2],
                   down_ops=[["Subsample", 8, 32 // 8, 4, 2, 2]])


def poolformer():
    """PoolFormer (average pooling as the token mixer, GroupNorm(1) as LayerNorm), 32x32 images."""
    return _vision("PoolFormerConfig", "PoolFormerForImageClassification", hidden_sizes=[16, 32], depths=[1, 1],
                   num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], drop_path_rate=0)


def falcon_mamba():
    """Falcon-Mamba (Mamba with RMS-normalised B, C and dt before the scan), hidden 32."""
    return _causal("FalconMamba", hidden_size=32, state_size=8, expand=2, conv_kernel=4, use_cache=False,
                   tie_word_embeddings=False)


def hubert():
    """HuBERT classifier (conv feature encoder on 400 raw samples, grouped conv positions, post-norm), 4 classes."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.HubertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=8,
                           num_conv_pos_embedding_groups=4, hidden_dropout=0.0, attention_dropout=0.0,
                           activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, final_dropout=0.0,
                           mask_time_prob=0.0, num_labels=4, classifier_proj_size=16, vocab_size=VOCAB)
    model = Logits(tf.HubertForSequenceClassification(conf), "input_values")
    return model, (torch.randn(BATCH, 400, generator=gen),), (torch.randint(0, 4, (BATCH,), generator=gen),)


def bigbird():
    """BigBird masked LM with block-sparse attention (block 2, 1 random block) over 32 tokens."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.BigBirdConfig(vocab_size=VOCAB, attention_type="block_sparse", block_size=2, num_random_blocks=1,
                            pad_token_id=1, **_BERT_LIKE)
    model = Logits(tf.BigBirdForMaskedLM(conf))
    return model, (torch.randint(2, VOCAB, (BATCH, 32), generator=gen),), \
        (torch.randint(0, VOCAB, (BATCH, 32), generator=gen),)


def reformer():
    """Reformer LM (local attention then LSH attention with 2 hashes, reversible residuals, axial positions)."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.ReformerConfig(vocab_size=VOCAB, hidden_size=32, num_attention_heads=2, attention_head_size=16,
                             attn_layers=["local", "lsh"], feed_forward_size=64, axial_pos_shape=[4, 4],
                             axial_pos_embds_dim=[16, 16], max_position_embeddings=16, lsh_attn_chunk_length=4,
                             local_attn_chunk_length=4, num_buckets=2, num_hashes=2, is_decoder=True,
                             hidden_dropout_prob=0.0, lsh_attention_probs_dropout_prob=0.0,
                             local_attention_probs_dropout_prob=0.0, axial_pos_embds=True, pad_token_id=1, seed=0)
    model = Logits(tf.ReformerModelWithLMHead(conf))
    return model, (torch.randint(2, VOCAB, (BATCH, 16), generator=gen),), \
        (torch.randint(0, VOCAB, (BATCH, 16), generator=gen),)

