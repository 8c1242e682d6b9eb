"""Outside models of ``transformers`` families no earlier probe file covers (round 17), random weights, no hub:
dense decoders (BitNet, Persimmon, CodeGen, GPT-Neo, XGLM, Gemma-3n and two Gemma-3n variants, Gemma-4, HRM,
MusicGen), linear-attention / recurrent / hybrid / MoE decoders (Qwen3-Next, Qwen3.5, OLMo-Hybrid, MiniMax,
Kimi-Linear, xLSTM, Zamba, LongCat-Flash, MiniMax-M2, Nemotron-H, DeepSeek-V3.2, Flint, ZAYA), encoder-decoders
(ProphetNet, PEGASUS-X, LED, M2M-100, Speech2Text), encoders (DeBERTa v1, MobileBERT, CANINE, ModernBERT, YOSO),
vision (BiT, CvT, Hiera, SwiftFormer, MobileViT-v2, HGNet-v2, DINOv3-ViT and a variant), audio (SEW-D, AST,
Parakeet CTC) and a time-series classifier (PatchTST).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s17.py:<name>``
at the size of hf_more.py (2 layers, hidden 64, vocab 256, 12 tokens, batch 2; images 32-64 px; MoE cut to
4 experts). Eager attention, no dropout, no cache, seeded.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import (_BART_LIKE, _DROP0, _LLAMA_LIKE, BATCH, SEQ, VOCAB, CausalLM, Logits, _causal,  # noqa: E402
                     _encoder, _lm, _seq2seq, _vision)
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402

_MOE_SMALL = dict(moe_intermediate_size=32, num_experts_per_tok=2)
_BERT_LIKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


# dense decoders
def bitnet():
    """BitNet b1.58 (ReLU² gated MLP, sub-layer RMSNorms before o_proj and down_proj), hidden 64."""
    return _causal("BitNet", **_LLAMA_LIKE)


def persimmon():
    """Persimmon (ReLU² MLP, q/k LayerNorm, fused qkv, partial rotary 50%), hidden 64."""
    return _causal("Persimmon", hidden_size=64, intermediate_size=128, num_attention_heads=4,
                   max_position_embeddings=64, qk_layernorm=True, hidden_dropout=0.0, **_DROP0)


def codegen():
    """CodeGen (qkv fused over mp_num=4 partitions, interleaved partial rotary, parallel block), hidden 64."""
    return _causal("CodeGen", n_embd=64, n_head=4, n_layer=2, rotary_dim=8, n_positions=64, n_ctx=64,
                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, tie_word_embeddings=False,
                   attn_implementation="eager")


def gpt_neo():
    """GPT-Neo (global then local attention with window 4, unscaled attention scores), hidden 64."""
    return _causal("GPTNeo", hidden_size=64, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
                   window_size=4, max_position_embeddings=64, intermediate_size=96, resid_dropout=0.0,
                   embed_dropout=0.0, attention_dropout=0.0, use_cache=False, tie_word_embeddings=False,
                   attn_implementation="eager")


def xglm():
    """XGLM (sinusoidal positions offset by 2, scaled embeddings, pre-LayerNorm), hidden 64."""
    return _causal("XGLM", d_model=64, num_layers=2, attention_heads=4, ffn_dim=96, max_position_embeddings=64,
                   dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0, use_cache=False,
                   tie_word_embeddings=False, attn_implementation="eager")


def gemma3n_text():
    """Gemma-3n text (AltUp 2-way prediction/correction, LAuReL low-rank residual, per-layer token embeddings,
    KV sharing off, top-k activation sparsity on layer 0), hidden 64."""
    cfg = dict(_LLAMA_LIKE, intermediate_size=[96, 96])
    return _causal("Gemma3nText", "Gemma3nForCausalLM", head_dim=16, sliding_window=8, vocab_size_per_layer_input=VOCAB,
                   hidden_size_per_layer_input=16, altup_num_inputs=2, laurel_rank=8, num_kv_shared_layers=0,
                   activation_sparsity_pattern=[0.95, 0.0], layer_types=["sliding_attention", "full_attention"],
                   **cfg)


# linear-attention, recurrent, hybrid and MoE decoders
def qwen3_next():
    """Qwen3-Next (Gated DeltaNet layer in torch chunked form, then a gated full-attention layer; 4 experts top-2
    with a shared expert), hidden 64."""
    return _causal("Qwen3Next", head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                   linear_num_value_heads=4, layer_types=["linear_attention", "full_attention"], num_experts=4,
                   shared_expert_intermediate_size=32, **_MOE_SMALL, **_LLAMA_LIKE)


def minimax():
    """MiniMax-01 (lightning linear attention with block decay, then softmax attention; 4 experts top-2)."""
    return _causal("MiniMax", head_dim=16, num_local_experts=4, num_experts_per_tok=2, block_size=4,
                   layer_types=["linear_attention", "full_attention"], **_LLAMA_LIKE)


def kimi_linear():
    """Kimi-Linear (Kimi delta attention with short convs, then MLA; 4 experts top-2 with a shared expert)."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k != "max_position_embeddings"}
    cfg["num_key_value_heads"] = 4
    return _causal("KimiLinear", num_experts=4, num_experts_per_token=2, moe_intermediate_size=32,
                   num_shared_experts=1, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8,
                   v_head_dim=16, linear_head_dim=16, linear_num_heads=4, head_dim=16,
                   linear_attn_config={"kda_layers": [1], "full_attn_layers": [2], "num_heads": 4, "head_dim": 16,
                                       "short_conv_kernel_size": 4},
                   first_k_dense_replace=1, moe_layer_freq=1, pad_token_id=0, **cfg)


def xlstm():
    """xLSTM-7B style (mLSTM blocks, native chunkwise autograd kernel, gate soft-caps), hidden 64."""
    _quiet()
    return _causal("xLSTM", hidden_size=64, embedding_dim=64, num_blocks=2, num_heads=4, chunk_size=4,
                   mode="train", chunkwise_kernel="chunkwise--native_autograd", autocast_kernel_dtype="float32",
                   use_cache=False, tie_word_embeddings=False)


def longcat_flash():
    """LongCat-Flash (two MLA blocks per layer, shortcut MoE with 2 zero-computation experts), 4 experts top-2."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k not in ("intermediate_size",)}
    cfg["num_key_value_heads"] = 4
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    conf = tf.LongcatFlashConfig(vocab_size=VOCAB, num_layers=2, ffn_hidden_size=96, q_lora_rank=32, kv_lora_rank=16,
                                 qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16, head_dim=8, moe_topk=2,
                                 n_routed_experts=4, zero_expert_num=2, expert_ffn_hidden_size=32,
                                 routed_scaling_factor=1.0, **cfg)
    return _lm(CausalLM(tf.LongcatFlashForCausalLM(conf)))


def minimax_m2():
    """MiniMax-M2 (sigmoid router with a score-correction bias, q/k RMSNorm over all heads), 4 experts top-2."""
    return _causal("MiniMaxM2", head_dim=16, num_local_experts=4, num_experts_per_tok=2, **_LLAMA_LIKE)


def nemotron_h():
    """Nemotron-H (Mamba-2 mixer layer, attention layer, ReLU² MLP layer, MoE layer; 4 experts top-2)."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k != "intermediate_size"}
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    conf = tf.NemotronHConfig(vocab_size=VOCAB, layers_block_type=["mamba", "attention", "mlp", "moe"],
                              intermediate_size=96, head_dim=16, ssm_state_size=16, mamba_num_heads=4,
                              mamba_head_dim=32, n_groups=1, conv_kernel=4, expand=2, chunk_size=4,
                              use_mamba_kernels=False, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                              moe_intermediate_size=32, moe_shared_expert_intermediate_size=32, hidden_dropout=0.0,
                              **cfg)
    return _lm(CausalLM(tf.NemotronHForCausalLM(conf)))


# encoder-decoders
def prophetnet():
    """ProphetNet (n-gram 2 predicting stream, relative position buckets in the decoder's main and predict
    streams), the main-stream logits; 2+2 layers, hidden 64."""
    return _seq2seq("ProphetNetConfig", "ProphetNetForConditionalGeneration", hidden_size=64, encoder_ffn_dim=96,
                    decoder_ffn_dim=96, num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=4,
                    num_decoder_attention_heads=4, max_position_embeddings=64, ngram=2, num_buckets=8,
                    relative_max_distance=16, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                    use_cache=False, pad_token_id=0, decoder_start_token_id=2)


def pegasus_x():
    """PEGASUS-X (staggered block-local encoder attention with 4 global tokens, block 4), 2+2 layers, d_model 64."""
    cfg = dict(_BART_LIKE, num_global_tokens=4, block_size=4, stagger_local_blocks=True)
    cfg.pop("attn_implementation")
    return _seq2seq("PegasusXConfig", "PegasusXForConditionalGeneration", **cfg)


def led():
    """LED (Longformer encoder with sliding window 4 + global first token, BART decoder), 2+2 layers, d_model 64."""
    cfg = dict(_BART_LIKE, attention_window=[4, 4], max_encoder_position_embeddings=64,
               max_decoder_position_embeddings=64)
    cfg.pop("max_position_embeddings")
    cfg.pop("attn_implementation")
    return _seq2seq("LEDConfig", "LEDForConditionalGeneration", **cfg)


def m2m100():
    """M2M-100 (sinusoidal positions from a padding-aware cumsum, scaled embeddings, pre-LayerNorm), 2+2 layers."""
    return _seq2seq("M2M100Config", "M2M100ForConditionalGeneration", encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                    **_BART_LIKE)


class _SpeechSeq2Seq(nn.Module):
    """``forward(input_features, decoder_input_ids)`` -> the decoder's logits."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_features, decoder_input_ids):
        return self.hf(input_features=input_features, decoder_input_ids=decoder_input_ids, use_cache=False).logits


def speech2text():
    """Speech2Text (two strided conv1d + GLU subsampling, sinusoidal positions), 16 features x 32 frames, 2+2 layers."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Speech2TextConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=96,
                                decoder_ffn_dim=96, conv_channels=32, input_feat_per_channel=16,
                                max_source_positions=64, max_target_positions=64, dropout=0.0, attention_dropout=0.0,
                                activation_dropout=0.0, use_cache=False, pad_token_id=1, decoder_start_token_id=2,
                                attn_implementation="eager")
    model = _SpeechSeq2Seq(tf.Speech2TextForConditionalGeneration(conf))
    ins = (torch.randn(BATCH, 32, 16, generator=gen), _tokens(gen, BATCH, SEQ - 4, VOCAB))
    return model, ins, (_tokens(gen, BATCH, SEQ - 4, VOCAB),)


# encoders
def deberta():
    """DeBERTa v1 (disentangled c2p/p2c attention with relative embeddings, XSoftmax), masked LM, hidden 64."""
    return _encoder("DebertaConfig", "DebertaForMaskedLM", None, relative_attention=True, max_relative_positions=16,
                    pos_att_type=["c2p", "p2c"], position_biased_input=False, **_BERT_LIKE)


def mobilebert():
    """MobileBERT (trigram input embedding, bottleneck 32, NoNorm, 2 stacked FFNs per layer), masked LM."""
    return _encoder("MobileBertConfig", "MobileBertForMaskedLM", None, embedding_size=32, true_hidden_size=32,
                    intra_bottleneck_size=32, num_feedforward_networks=2,
                    **dict(_BERT_LIKE, intermediate_size=64))


def canine():
    """CANINE-s (8 hashed char embeddings, local attention, strided conv downsampling x4, conv upsampling),
    sequence classification, 3 labels."""
    return _encoder("CanineConfig", "CanineForSequenceClassification", 3, num_labels=3, num_hash_functions=4,
                    num_hash_buckets=64, downsampling_rate=4, upsampling_kernel_size=4, local_transformer_stride=4,
                    classifier_dropout=0.0, **_BERT_LIKE)


def modernbert():
    """ModernBERT (alternating local window 4 / global attention with their own RoPE, GeGLU, no biases),
    sequence classification with mean pooling, 3 labels."""
    return _encoder("ModernBertConfig", "ModernBertForSequenceClassification", 3, num_labels=3, hidden_size=64,
                    intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
                    local_attention=4, global_attn_every_n_layers=2, classifier_pooling="mean", pad_token_id=0)


# vision
def bit():
    """BiT (weight-standardised convs, GroupNorm, pre-activation bottlenecks), 32x32 images."""
    return _vision("BitConfig", "BitForImageClassification", embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1],
                   num_groups=8, layer_type="preactivation")


def cvt():
    """CvT (conv token embeddings, depthwise-conv + BatchNorm q/k/v projections, CLS token in the last stage;
    depths 1, 2: transformers indexes its drop-path list by stage)."""
    return _vision("CvtConfig", "CvtForImageClassification", patch_sizes=[7, 3], patch_stride=[4, 2],
                   patch_padding=[2, 1], embed_dim=[32, 64], num_heads=[1, 2], depth=[1, 2], mlp_ratio=[2.0, 2.0],
                   attention_drop_rate=[0.0, 0.0], drop_rate=[0.0, 0.0], drop_path_rate=[0.0, 0.0],
                   qkv_bias=[True, True], cls_token=[False, True], qkv_projection_method=["dw_bn", "dw_bn"],
                   kernel_qkv=[3, 3], padding_kv=[1, 1], stride_kv=[2, 2], padding_q=[1, 1], stride_q=[1, 1])


def hiera():
    """Hiera (mask-unit attention in stage 1, query max-pooling between stages, unroll / reroll), 64x64 images."""
    return _vision("HieraConfig", "HieraForImageClassification", image=64, image_size=[64, 64], embed_dim=16,
                   patch_size=[7, 7], patch_stride=[4, 4], patch_padding=[3, 3], depths=[1, 1], num_heads=[1, 2],
                   num_query_pool=1, query_stride=[2, 2], masked_unit_size=[4, 4],
                   masked_unit_attention=[True, False], mlp_ratio=2.0)


def swiftformer():
    """SwiftFormer (conv encoders + efficient additive attention with a learned global query), 32x32 images."""
    return _vision("SwiftFormerConfig", "SwiftFormerForImageClassification", image_size=32, depths=[1, 1],
                   embed_dims=[16, 32], downsamples=[True, True], mlp_ratio=2)


def mobilevitv2():
    """MobileViT-v2 (separable self-attention: a softmax over a 1-channel context score), 64x64 images."""
    return _vision("MobileViTV2Config", "MobileViTV2ForImageClassification", image=64, image_size=64, patch_size=2,
                   width_multiplier=0.25, n_attn_blocks=[1, 1, 1], base_attn_unit_dims=[32, 48, 64],
                   classifier_dropout_prob=0.0)


def hgnet_v2():
    """HGNet-v2 (stem with a pooled branch, light blocks of 1x1 + depthwise convs, learnable affine), 64x64 images."""
    return _vision("HGNetV2Config", "HGNetV2ForImageClassification", image=64, embedding_size=16,
                   depths=[1, 1], hidden_sizes=[32, 64], stem_channels=[3, 8, 16],
                   stage_in_channels=[16, 32], stage_mid_channels=[8, 16], stage_out_channels=[32, 64],
                   stage_num_blocks=[1, 1], stage_downsample=[False, True], stage_downsample_strides=[2, 2],
                   stage_light_block=[False, True], stage_kernel_size=[3, 5], stage_numb_of_layers=[2, 2],
                   use_learnable_affine_block=True, out_features=["stage2"], out_indices=[2],
                   stage_names=["stem", "stage1", "stage2"])


class _PooledHead(nn.Module):
    """A backbone's ``pooler_output`` -> a linear classifier."""

    def __init__(self, hf, width: int, classes: int):
        super().__init__()
        self.hf, self.head = hf, nn.Linear(width, classes)

    def forward(self, pixel_values):
        return self.head(self.hf(pixel_values=pixel_values).pooler_output)


def dinov3_vit():
    """DINOv3 ViT (2-D axial RoPE on patch tokens, 2 register tokens, layer scale, gated MLP) + linear head on
    the pooled CLS token, 32x32 images in 8x8 patches."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.DINOv3ViTConfig(image_size=32, patch_size=8, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                              num_attention_heads=4, num_register_tokens=2, use_gated_mlp=True,
                              attn_implementation="eager")
    model = _PooledHead(tf.DINOv3ViTModel(conf), 64, 5)
    return model, (torch.randn(BATCH, 3, 32, 32, generator=gen),), (torch.randint(0, 5, (BATCH,), generator=gen),)


# audio
def sew_d():
    """SEW-D (conv feature extractor, squeeze x2 then upsample, DeBERTa-v2 disentangled attention), utterance
    classification of 1600 raw samples, 3 labels."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.SEWDConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                         conv_dim=[16, 16, 16], conv_stride=[5, 2, 2], conv_kernel=[10, 3, 3],
                         num_feat_extract_layers=3,
                         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, squeeze_factor=2,
                         position_buckets=16, max_position_embeddings=64, hidden_dropout=0.0, activation_dropout=0.0,
                         attention_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0, apply_spec_augment=False,
                         classifier_proj_size=16, num_labels=3)
    model = Logits(tf.SEWDForSequenceClassification(conf), "input_values")
    return model, (torch.randn(BATCH, 1600, generator=gen),), (torch.randint(0, 3, (BATCH,), generator=gen),)


def ast():
    """Audio Spectrogram Transformer (overlapping 16x16 patches of a 32x64 spectrogram, CLS + distillation
    tokens), 4 labels."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.ASTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96, patch_size=16,
                        frequency_stride=8, time_stride=8, max_length=64, num_mel_bins=32, num_labels=4,
                        attn_implementation="eager")
    model = Logits(tf.ASTForAudioClassification(conf), "input_values")
    return model, (torch.randn(BATCH, 64, 32, generator=gen),), (torch.randint(0, 4, (BATCH,), generator=gen),)


def parakeet_ctc():
    """Parakeet CTC (FastConformer: depthwise-separable conv subsampling x8, relative-position attention,
    conv module with BatchNorm), per-frame logits over 32 tokens, 16 mel bins x 64 frames."""
    import transformers as tf

    _quiet()
    gen = _gen()
    enc = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
               conv_kernel_size=9, subsampling_factor=8, subsampling_conv_channels=16, num_mel_bins=16, dropout=0.0,
               dropout_positions=0.0, layerdrop=0.0, activation_dropout=0.0, attention_dropout=0.0,
               max_position_embeddings=64)
    conf = tf.ParakeetCTCConfig(vocab_size=32, encoder_config=enc)
    model = Logits(tf.ParakeetForCTC(conf), "input_features")
    x = torch.randn(BATCH, 64, 16, generator=gen)
    with torch.no_grad():
        frames = model(x).shape[1]
    return model, (x,), (torch.randint(0, 32, (BATCH, frames), generator=gen),)


# second batch: variants and families with unusual layers
def gemma3n_text_noclip():
    """Gemma-3n text as gemma3n_text but with ``altup_coef_clip`` unset (None; the config's validator refuses it
    as an argument), so AltUp does not clamp a weight's ``.data`` in place in the forward: the rest is probed."""
    model, ins, tgt = gemma3n_text()
    object.__setattr__(model.hf.config, "altup_coef_clip", None)
    for layer in model.hf.model.layers:
        object.__setattr__(layer.altup.config, "altup_coef_clip", None)
    return model, ins, tgt


def yoso():
    """YOSO (LSH attention in its expectation form: 1 - acos(q.k)/pi raised to the hash length), masked LM."""
    return _encoder("YosoConfig", "YosoForMaskedLM", None, use_expectation=True, use_fast_hash=False, hash_code_len=4,
                    num_hash=8, conv_window=None, pad_token_id=1, **_BERT_LIKE)


def zamba():
    """Zamba v1 (Mamba layers with 2 mamba heads, a shared attention + MLP block fed the concatenated original
    embeddings), hidden 64."""
    return _causal("Zamba", hidden_size=64, attention_hidden_size=128, intermediate_size=96, num_attention_heads=4,
                   attention_head_dim=32, num_key_value_heads=4, n_mamba_heads=2, attn_layer_period=2,
                   attn_layer_offset=1, layers_block_type=["mamba", "hybrid"], mamba_d_state=8, mamba_d_conv=4,
                   mamba_expand=2, mamba_dt_rank=8,
                   use_mamba_kernels=False, max_position_embeddings=64, **_DROP0)


class _PatchTSTLogits(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, past_values):
        return self.hf(past_values=past_values).prediction_logits


def patchtst_cls():
    """PatchTST classifier (instance-normalised 3-channel series of 32 steps in patches of 8 stride 4, BatchNorm in
    the encoder, channel-independent attention, mean-pooled), 3 classes."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.PatchTSTConfig(num_input_channels=3, context_length=32, patch_length=8, patch_stride=4,
                             num_hidden_layers=2, d_model=64, num_attention_heads=4, ffn_dim=96, num_targets=3,
                             pooling_type="mean", use_cls_token=False, scaling="std")
    model = _PatchTSTLogits(tf.PatchTSTForClassification(conf))
    return model, (torch.randn(BATCH, 32, 3, generator=gen),), (torch.randint(0, 3, (BATCH,), generator=gen),)


def dinov3_vit_norescale():
    """DINOv3 ViT as dinov3_vit but ``pos_embed_rescale=None``: no random rescaling of the RoPE patch
    coordinates in training mode, so the rest of the model is probed."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.DINOv3ViTConfig(image_size=32, patch_size=8, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                              num_attention_heads=4, num_register_tokens=2, use_gated_mlp=True, pos_embed_rescale=None,
                              attn_implementation="eager")
    model = _PooledHead(tf.DINOv3ViTModel(conf), 64, 5)
    return model, (torch.randn(BATCH, 3, 32, 32, generator=gen),), (torch.randint(0, 5, (BATCH,), generator=gen),)


def gemma3n_text_plain():
    """Gemma-3n text with neither the AltUp weight clamp (as gemma3n_text_noclip) nor the Gaussian top-k activation
    sparsity (its ``Normal.icdf`` needs ``erfinv``): AltUp, LAuReL and per-layer embeddings alone."""
    cfg = dict(_LLAMA_LIKE, intermediate_size=[96, 96])
    model, ins, tgt = _causal("Gemma3nText", "Gemma3nForCausalLM", head_dim=16, sliding_window=8,
                              vocab_size_per_layer_input=VOCAB, hidden_size_per_layer_input=16, altup_num_inputs=2,
                              laurel_rank=8, num_kv_shared_layers=0, activation_sparsity_pattern=[0.0, 0.0],
                              layer_types=["sliding_attention", "full_attention"], **cfg)
    object.__setattr__(model.hf.config, "altup_coef_clip", None)
    for layer in model.hf.model.layers:
        object.__setattr__(layer.altup.config, "altup_coef_clip", None)
    return model, ins, tgt


def deepseek_v32():
    """DeepSeek-V3.2 (MLA plus the lightning indexer's top-4 sparse attention mask, first layer dense, 4 experts
    top-2 with a shared expert), hidden 64."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("DeepseekV32", n_routed_experts=4, n_shared_experts=1, n_group=1, topk_group=1, q_lora_rank=32,
                   kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16, head_dim=8, index_topk=4,
                   index_head_dim=16, index_n_heads=2, first_k_dense_replace=1, **_MOE_SMALL, **cfg)


def musicgen():
    """MusicGen decoder LM (4 codebook embeddings summed, sinusoidal positions, 4 parallel LM heads stacked then
    reshaped to ``[B * K, T, V]``), 2 x 4 codebooks x 12 steps, hidden 64."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.MusicgenDecoderConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, ffn_dim=96,
                                    num_attention_heads=4, num_codebooks=4, max_position_embeddings=64, dropout=0.0,
                                    attention_dropout=0.0, activation_dropout=0.0, pad_token_id=VOCAB,
                                    bos_token_id=VOCAB, use_cache=False, attn_implementation="eager")
    model = CausalLM(tf.MusicgenForCausalLM(conf))
    return model, (_tokens(gen, BATCH * 4, SEQ, VOCAB),), (_tokens(gen, BATCH * 4, SEQ, VOCAB),)


# third batch: 2025-26 decoders
def gemma4_text():
    """Gemma-4 text (per-layer token embeddings, sliding / full layers with their own head dims, no soft-cap),
    hidden 64."""
    return _causal("Gemma4Text", "Gemma4ForCausalLM", head_dim=16, sliding_window=8, vocab_size_per_layer_input=VOCAB,
                   hidden_size_per_layer_input=16, per_layer_config={"01": {"head_dim": 32}},
                   layer_types=["sliding_attention", "full_attention"], **_LLAMA_LIKE)


def qwen3_5_text():
    """Qwen3.5 text (Gated DeltaNet layer then a gated full-attention layer, dense MLP), hidden 64."""
    return _causal("Qwen3_5Text", "Qwen3_5ForCausalLM", head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
                   linear_num_key_heads=2, linear_num_value_heads=4,
                   layer_types=["linear_attention", "full_attention"], **_LLAMA_LIKE)


def olmo_hybrid():
    """OLMo-Hybrid (Gated DeltaNet with negative eigenvalues, then attention), hidden 64."""
    return _causal("OlmoHybrid", linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16,
                   linear_value_head_dim=32, layer_types=["linear_attention", "full_attention"], pad_token_id=0,
                   **_LLAMA_LIKE)


def hrm_text():
    """HRM text (hierarchical reasoning: a high- and a low-level stack iterated H x L cycles, gradients through the
    last cycles only), hidden 64."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k != "num_key_value_heads"}
    return _causal("HrmText", head_dim=16, H_cycles=2, L_cycles=2, L_bp_cycles=[1], num_layers_per_stack=1,
                   embedding_scale=8.0, **cfg)


def flint():
    """Flint (sliding-window attention, first MLP dense then 4 experts top-2 with a shared expert), hidden 64."""
    return _causal("Flint", head_dim=16, sliding_window=5, num_experts=4, shared_expert_intermediate_size=32,
                   mlp_only_layers=[0], **_MOE_SMALL, **_LLAMA_LIKE)


def zaya():
    """ZAYA (compressed convolutional attention, an MLP router over 4 experts top-1), hidden 64."""
    return _causal("Zaya", head_dim=16, num_experts=4, num_experts_per_tok=1, moe_intermediate_size=32,
                   router_hidden_size=16, pad_token_id=0, **_LLAMA_LIKE)
