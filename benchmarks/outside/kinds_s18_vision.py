"""Outside models of ``transformers`` vision, audio and video families no earlier probe file covers (round 18),
random weights, no hub: image classifiers (MobileNet-v1, MobileNet-v2, ConvNeXt v1, DINOv3-ConvNeXt, PVT v1, ViT-MSN,
DINOv2 with registers, Data2Vec-vision, I-JEPA, TextNet, PP-LCNet, Perceiver with Fourier positions, SigLIP,
AIMv2 and ViTDet towers with a linear head), dense prediction (Swin2SR super-resolution, GLPN / DPT / Depth
Anything depth, UperNet + ConvNeXt segmentation, VitPose heatmaps), self-supervised pretraining losses (ViT-MAE with
its noise as an input), video (VideoMAE, ViViT), ImageGPT, audio (SEW, UniSpeech, UniSpeech-SAT, Data2Vec-audio,
Wav2Vec2-BERT, Moonshine ASR, CLAP audio tower) and usage variants (ViT in fp16, a CNN with a frozen stem and
BatchNorm in train mode, segmentation with ``ignore_index=255``).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s18_vision.py:<name>``
at the size of hf_more.py (2 layers or stages, hidden 32-64; images 32-64 px; audio 1600-4000 samples; batch 2).
Eager attention, no dropout, seeded. Factories return ``(model, inputs, targets)`` (the named cross-entropy loss
on class targets, MSE on float ones) or ``(model, inputs, targets, loss)`` with a callable loss.
"""
from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import _VIT_LIKE, BATCH, VOCAB, Logits, _vision  # noqa: E402
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402


def _images(gen, size: int = 32, channels: int = 3):
    return torch.randn(BATCH, channels, size, size, generator=gen)


def _classes(gen, classes: int = 5):
    return torch.randint(0, classes, (BATCH,), generator=gen)


class _PooledHead(nn.Module):
    """A backbone's ``pooler_output`` (or mean of ``last_hidden_state`` over tokens) -> a linear classifier."""

    def __init__(self, hf, width: int, classes: int = 5, key: str = "pixel_values", pooled: bool = True):
        super().__init__()
        self.hf, self.head, self.key, self.pooled = hf, nn.Linear(width, classes), key, pooled

    def forward(self, x):
        out = self.hf(**{self.key: x})
        if self.pooled:
            feats = out.pooler_output
        else:
            feats = out.last_hidden_state
            feats = feats.mean(dim=(2, 3)) if feats.dim() == 4 else feats.mean(1)
        return self.head(feats.flatten(1))


class _Field(nn.Module):
    """``forward(x)`` -> the named field of the Hugging Face output (``reconstruction``, ``predicted_depth``,
    ``heatmaps``, ``loss``)."""

    def __init__(self, hf, field: str, key: str = "pixel_values"):
        super().__init__()
        self.hf, self.field, self.key = hf, field, key

    def forward(self, x):
        return getattr(self.hf(**{self.key: x}), self.field)


def _l1(out, y):
    return F.l1_loss(out, y)


# image classification
def mobilenet_v1():
    """MobileNet-v1 (13 depthwise-separable blocks, ReLU6, TensorFlow 'SAME' padding, BatchNorm), width 0.25,
    32x32 images."""
    return _vision("MobileNetV1Config", "MobileNetV1ForImageClassification", image_size=32, depth_multiplier=0.25,
                   min_depth=8, classifier_dropout_prob=0.0)


def mobilenet_v2():
    """MobileNet-v2 (inverted residuals with linear bottlenecks, ReLU6, 'SAME' padding), width 0.35, 32x32."""
    return _vision("MobileNetV2Config", "MobileNetV2ForImageClassification", image_size=32, depth_multiplier=0.35,
                   min_depth=8, classifier_dropout_prob=0.0)


def convnext_v1():
    """ConvNeXt v1 (4x4 patchify stem, depthwise 7x7, channels-last LayerNorm, layer scale gamma), 32x32."""
    return _vision("ConvNextConfig", "ConvNextForImageClassification", hidden_sizes=[16, 32], depths=[1, 1],
                   num_stages=2, layer_scale_init_value=0.1, drop_path_rate=0.0)


def dinov3_convnext():
    """DINOv3 ConvNeXt backbone (pooled + LayerNorm output) with a linear head, 2 stages, 32x32 images."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.DINOv3ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], layer_scale_init_value=0.1,
                                   image_size=32, stage_names=["stem", "stage1", "stage2"], out_features=["stage2"])
    model = _PooledHead(tf.DINOv3ConvNextModel(conf), 32)
    return model, (_images(gen),), (_classes(gen),)


def pvt_v1():
    """PVT v1 (spatial-reduction attention with strided-conv keys/values, per-stage learned positions and
    interpolation, CLS token in the last stage), 2 stages, 32x32 images."""
    return _vision("PvtConfig", "PvtForImageClassification", image_size=32, num_encoder_blocks=2, depths=[1, 1],
                   sequence_reduction_ratios=[2, 1], hidden_sizes=[32, 64], patch_sizes=[4, 2], strides=[4, 2],
                   num_attention_heads=[1, 2], mlp_ratios=[2, 2])


def vit_msn():
    """ViT-MSN (ViT encoder, head on the CLS token), 32x32 images in 8x8 patches, hidden 64."""
    return _vision("ViTMSNConfig", "ViTMSNForImageClassification", **_VIT_LIKE)


def dinov2_registers():
    """DINOv2 with 4 register tokens (layer scale, interpolated positions, CLS + mean patch head), 32x32 images."""
    return _vision("Dinov2WithRegistersConfig", "Dinov2WithRegistersForImageClassification", image_size=32,
                   patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                   num_register_tokens=4, attn_implementation="eager")


def data2vec_vision():
    """Data2Vec-vision (BEiT layout with one relative position bias shared by all layers, mean pooling), 32x32."""
    return _vision("Data2VecVisionConfig", "Data2VecVisionForImageClassification", use_relative_position_bias=False,
                   use_shared_relative_position_bias=True, use_mean_pooling=True, layer_scale_init_value=0.1,
                   drop_path_rate=0.0, **_VIT_LIKE)


def ijepa():
    """I-JEPA (ViT without CLS token, mean-pooled patch tokens into the classifier), 32x32 images."""
    return _vision("IJepaConfig", "IJepaForImageClassification", **_VIT_LIKE)


def textnet():
    """TextNet (re-parameterisable conv + BatchNorm blocks with 3x3 / 1x3 / 3x1 kernels), 2 stages, 32x32."""
    return _vision("TextNetConfig", "TextNetForImageClassification", stem_out_channels=16, hidden_sizes=[16, 16, 32],
                   conv_layer_kernel_sizes=[[[3, 3], [1, 3]], [[3, 1], [3, 3]]],
                   conv_layer_strides=[[1, 2], [2, 1]], depths=[2, 2], image_size=[32, 32],
                   stage_names=["stem", "stage1", "stage2"], out_features=["stage2"])


def pplcnet():
    """PP-LCNet (depthwise-separable blocks with hardswish, squeeze-excitation with hardsigmoid, 1x1 expansion
    head), its 5 stages at width 0.25 with one block each (two in stage 4), 32x32 images."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.PPLCNetConfig(num_labels=5, scale=0.25,
                            block_configs=[[[3, 16, 32, 1, False]], [[3, 32, 64, 2, False]], [[3, 64, 128, 2, False]],
                                           [[3, 128, 256, 2, False], [5, 256, 256, 1, False]],
                                           [[5, 256, 512, 2, True]]],
                            depths=[1, 1, 1, 2, 1], class_expand=64, hidden_dropout_prob=0.0)
    model = _Field(tf.PPLCNetForImageClassification(conf), "last_hidden_state")  # its logits' field name
    return model, (_images(gen),), (_classes(gen),)


def perceiver_fourier():
    """Perceiver IO image classifier (Fourier position features concatenated to raw pixels, 16 latents,
    cross-attention then self-attention, decoder query), 16x16 images (d_model 261 = 3 pixels + 2 x 129
    Fourier features)."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.PerceiverConfig(num_latents=16, d_latents=64, d_model=261, num_blocks=1, num_self_attends_per_block=2,
                              num_self_attention_heads=4, num_cross_attention_heads=1,
                              image_size=16, num_labels=5, attention_probs_dropout_prob=0.0)
    model = Logits(tf.PerceiverForImageClassificationFourier(conf), "inputs")
    return model, (_images(gen, 16),), (_classes(gen),)


def siglip_cls():
    """SigLIP vision tower image classifier (no CLS token, mean-pooled patches, tanh-GELU MLP), 32x32 images."""
    import transformers as tf

    _quiet()
    gen = _gen()
    vis = dict(image_size=32, patch_size=8, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
               num_attention_heads=4)
    conf = tf.SiglipConfig(vision_config=vis, text_config=dict(vocab_size=VOCAB, hidden_size=32,
                           intermediate_size=64, num_hidden_layers=1, num_attention_heads=4), num_labels=5,
                           attn_implementation="eager")
    model = Logits(tf.SiglipForImageClassification(conf), "pixel_values")
    return model, (_images(gen),), (_classes(gen),)


def aimv2_vision():
    """AIMv2 vision tower (RMSNorm, SwiGLU, attention-pooling head with a learned query) + linear head, 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Aimv2VisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                image_size=32, patch_size=8, use_head=True, attn_implementation="eager")
    model = _PooledHead(tf.Aimv2VisionModel(conf), 64)
    return model, (_images(gen),), (_classes(gen),)


def vitdet():
    """ViTDet backbone (windowed attention in layer 0 with decomposed relative positions, global layer 1,
    residual conv block) + linear head on the mean feature map, 32x32 images."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.VitDetConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32,
                           pretrain_image_size=32, patch_size=8, window_block_indices=[0], residual_block_indices=[1],
                           use_relative_position_embeddings=True, window_size=2)
    model = _PooledHead(tf.VitDetModel(conf), 64, pooled=False)
    return model, (_images(gen),), (_classes(gen),)


# dense prediction
def swin2sr():
    """Swin2SR x2 super-resolution (Swin-v2 blocks with log-spaced CPB, shifted windows, pixel-shuffle upsampler,
    image-range mean shift), 16x16 -> 32x32, L1 loss against a target image."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Swin2SRConfig(image_size=16, embed_dim=32, depths=[2], num_heads=[2], window_size=4, mlp_ratio=2.0,
                            upscale=2, drop_path_rate=0.0, upsampler="pixelshuffle")
    model = _Field(tf.Swin2SRForImageSuperResolution(conf), "reconstruction")
    return model, (torch.rand(BATCH, 3, 16, 16, generator=gen),), (torch.rand(BATCH, 3, 32, 32, generator=gen),), _l1


def glpn_depth():
    """GLPN depth estimation (Mix-Transformer encoder, selective feature fusion decoder, sigmoid depth head),
    2 stages, 32x32, L1 loss on ``predicted_depth``."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.GLPNConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                         patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                         drop_path_rate=0.0, decoder_hidden_size=16)
    model = _Field(tf.GLPNForDepthEstimation(conf), "predicted_depth")
    return model, (_images(gen),), (torch.rand(BATCH, 32, 32, generator=gen) * 10,), _l1


def dpt_depth():
    """DPT depth estimation (ViT backbone, reassemble at 4 scales, fusion with residual conv units, transposed-conv
    upsampling), 32x32 images in 8x8 patches, MSE on ``predicted_depth``."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.DPTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=96, backbone_out_indices=[0, 1], neck_hidden_sizes=[16, 32],
                        reassemble_factors=[2, 1], fusion_hidden_size=16, head_hidden_size=16,
                        attn_implementation="eager")
    model = _Field(tf.DPTForDepthEstimation(conf), "predicted_depth")
    with torch.no_grad():
        shape = model(_images(_gen())).shape
    return model, (_images(gen),), (torch.rand(*shape, generator=gen),)


def depth_anything():
    """Depth Anything (DINOv2 backbone with 14x14 patches, DPT neck, ReLU depth head), 28x28 images, MSE on
    ``predicted_depth``."""
    import transformers as tf

    _quiet()
    gen = _gen()
    backbone = tf.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                               image_size=28, patch_size=14, out_features=["stage1", "stage2"],
                               reshape_hidden_states=False, apply_layernorm=True)
    conf = tf.DepthAnythingConfig(backbone_config=backbone, patch_size=14, reassemble_hidden_size=32,
                                  reassemble_factors=[2, 1], neck_hidden_sizes=[16, 32], fusion_hidden_size=16,
                                  head_hidden_size=8)
    model = _Field(tf.DepthAnythingForDepthEstimation(conf), "predicted_depth")
    with torch.no_grad():
        shape = model(_images(_gen(), 28)).shape
    return model, (_images(gen, 28),), (torch.rand(*shape, generator=gen),)


def _upernet(ignore: bool):
    import transformers as tf

    _quiet()
    gen = _gen()
    backbone = tf.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2,
                                 out_features=["stage1", "stage2"], drop_path_rate=0.0)
    conf = tf.UperNetConfig(backbone_config=backbone, hidden_size=16, pool_scales=[1, 2], auxiliary_in_channels=32,
                            auxiliary_channels=16, use_auxiliary_head=False, num_labels=4)
    model = Logits(tf.UperNetForSemanticSegmentation(conf), "pixel_values")
    y = torch.randint(0, 4, (BATCH, 32, 32), generator=gen)
    if ignore:
        y[:, :4] = 255
        y[0, :, -6:] = 255
    return model, (_images(gen),), (y,)


def upernet_convnext():
    """UperNet (ConvNeXt backbone, pyramid pooling with adaptive pools 1 and 2, FPN, bilinear upsampling to the
    image), per-pixel cross-entropy over class dim 1, 32x32 images, 4 classes."""
    return _upernet(False)


def upernet_ignore255():
    """UperNet + ConvNeXt as upernet_convnext with ``ignore_index=255`` void pixels in the masks
    (``F.cross_entropy(logits, mask, ignore_index=255)``)."""
    model, ins, tgt = _upernet(True)
    return model, ins, tgt, lambda out, y: F.cross_entropy(out, y, ignore_index=255)


def vitpose():
    """VitPose (ViT backbone on 32x24 person crops, simple decoder: ReLU + bilinear x4 + 3x3 conv), MSE on
    4 keypoint heatmaps."""
    import transformers as tf

    _quiet()
    gen = _gen()
    backbone = tf.VitPoseBackboneConfig(image_size=[32, 24], patch_size=[8, 8], hidden_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, mlp_ratio=2, out_indices=[2])
    conf = tf.VitPoseConfig(backbone_config=backbone, num_labels=4, use_simple_decoder=True)
    hf = tf.VitPoseForPoseEstimation(conf)
    model = _Field(hf, "heatmaps")
    x = torch.randn(BATCH, 3, 32, 24, generator=gen)
    with torch.no_grad():
        shape = model(x).shape
    return model, (x,), (torch.rand(*shape, generator=gen),)


# pretraining with the model's own loss
class _MAELoss(nn.Module):
    """ViT-MAE pretraining: ``forward(pixel_values, noise)`` -> the model's own masked-patch MSE loss (the noise
    that chooses the masked patches is an input, so the step is deterministic)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, pixel_values, noise):
        return self.hf(pixel_values=pixel_values, noise=noise).loss


def vitmae_pretrain():
    """ViT-MAE pretraining (argsort of the given noise, gather of the kept 50% patches, mask tokens, 1-layer
    decoder, normalised-pixel MSE on masked patches only), 32x32 images, the model's own loss."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.ViTMAEConfig(mask_ratio=0.5, decoder_hidden_size=32, decoder_num_hidden_layers=1,
                           decoder_num_attention_heads=4, decoder_intermediate_size=64, norm_pix_loss=True,
                           **_VIT_LIKE)
    model = _MAELoss(tf.ViTMAEForPreTraining(conf))
    ins = (_images(gen), torch.rand(BATCH, 16, generator=gen))
    return model, ins, (), lambda out: out


# video
def videomae():
    """VideoMAE video classifier (3-D tubelet embedding 2x8x8, fixed sinusoidal positions, mean-pooled
    fc_norm head), 4 frames of 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.VideoMAEConfig(image_size=32, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=64,
                             num_hidden_layers=2, num_attention_heads=4, intermediate_size=96, use_mean_pooling=True,
                             num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                             attn_implementation="eager")
    model = Logits(tf.VideoMAEForVideoClassification(conf), "pixel_values")
    return model, (torch.randn(BATCH, 4, 3, 32, 32, generator=gen),), (_classes(gen),)


def vivit():
    """ViViT video classifier (Conv3d tubelets 2x8x8, CLS token, learned positions, fast-GELU), 4 frames of 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.VivitConfig(image_size=32, num_frames=4, tubelet_size=[2, 8, 8], hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=96, num_labels=5, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = Logits(tf.VivitForVideoClassification(conf), "pixel_values")
    return model, (torch.randn(BATCH, 4, 3, 32, 32, generator=gen),), (_classes(gen),)


def imagegpt():
    """ImageGPT causal image modelling (GPT-2 blocks, ImageGPT's own LayerNorm without mean subtraction, SOS token,
    vocab of 16 colour clusters + 1), 8x8 images as 64 tokens."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.ImageGPTConfig(vocab_size=17, n_positions=64, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
                             embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, attn_implementation="eager")
    model = Logits(tf.ImageGPTForCausalImageModeling(conf), "input_ids")
    ids = _tokens(gen, BATCH, 64, 16)
    return model, (ids,), (_tokens(gen, BATCH, 64, 16),)


# audio
_W2V_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  conv_dim=[16, 16, 16], conv_stride=[5, 2, 2], conv_kernel=[10, 3, 3], num_feat_extract_layers=3,
                  num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_dropout=0.0,
                  activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0,
                  layerdrop=0.0, apply_spec_augment=False)


def _audio_cls(cfg_name: str, model_name: str, samples: int = 1600, **cfg):
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = getattr(tf, cfg_name)(classifier_proj_size=16, num_labels=3, **dict(_W2V_SMALL, **cfg))
    model = Logits(getattr(tf, model_name)(conf), "input_values")
    return model, (torch.randn(BATCH, samples, generator=gen),), (torch.randint(0, 3, (BATCH,), generator=gen),)


def _audio_ctc(cfg_name: str, model_name: str, samples: int = 1600, **cfg):
    """Per-frame CTC-head logits with per-frame token targets (cross-entropy; no CTC loss)."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = getattr(tf, cfg_name)(vocab_size=32, **dict(_W2V_SMALL, **cfg))
    model = Logits(getattr(tf, model_name)(conf), "input_values")
    x = torch.randn(BATCH, samples, generator=gen)
    with torch.no_grad():
        frames = model(x).shape[1]
    return model, (x,), (torch.randint(0, 32, (BATCH, frames), generator=gen),)


def sew():
    """SEW (conv feature extractor, squeeze x2 by pooling then upsample, post-LayerNorm BERT layers), utterance
    classification of 1600 samples, 3 labels."""
    return _audio_cls("SEWConfig", "SEWForSequenceClassification", squeeze_factor=2)


def unispeech_ctc():
    """UniSpeech (wav2vec2-style, group-norm feature extractor, conv positions) CTC head, per-frame token targets,
    1600 samples."""
    return _audio_ctc("UniSpeechConfig", "UniSpeechForCTC")


def unispeech_sat():
    """UniSpeech-SAT (layer-norm feature extractor, stable-layer-norm pre-LN encoder) with a weighted layer sum
    into the utterance classifier, 1600 samples, 3 labels."""
    return _audio_cls("UniSpeechSatConfig", "UniSpeechSatForSequenceClassification", feat_extract_norm="layer",
                      do_stable_layer_norm=True, use_weighted_layer_sum=True)


def data2vec_audio():
    """Data2Vec-audio (layer-norm conv extractor, 5 stacked positional conv layers), CTC head logits, per-frame
    token targets, 1600 samples."""
    return _audio_ctc("Data2VecAudioConfig", "Data2VecAudioForCTC", num_conv_pos_embeddings=4,
                      conv_pos_kernel_size=5)


def wav2vec2_bert():
    """Wav2Vec2-BERT (80-dim stacked log-mel features projected in, conformer layers with relative_key attention
    and a depthwise conv module), utterance classifier, 2 x 16 frames of 160 features, 3 labels."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Wav2Vec2BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                 feature_projection_input_dim=160, final_dropout=0.0, layerdrop=0.0,
                                 apply_spec_augment=False, conv_depthwise_kernel_size=5, conformer_conv_dropout=0.0,
                                 left_max_position_embeddings=8, right_max_position_embeddings=4,
                                 classifier_proj_size=16, num_labels=3, attn_implementation="eager")
    model = Logits(tf.Wav2Vec2BertForSequenceClassification(conf), "input_features")
    return model, (torch.randn(BATCH, 16, 160, generator=gen),), (torch.randint(0, 3, (BATCH,), generator=gen),)


class _AudioSeq2Seq(nn.Module):
    def __init__(self, hf, key: str = "input_values"):
        super().__init__()
        self.hf, self.key = hf, key

    def forward(self, audio, decoder_input_ids):
        return self.hf(**{self.key: audio}, decoder_input_ids=decoder_input_ids, use_cache=False).logits


def moonshine():
    """Moonshine ASR (raw audio -> conv stem with tanh and GroupNorm, partial-rotary encoder, SwiGLU decoder with
    cross-attention), 2400 samples, 8 decoder tokens, vocab 256."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.MoonshineConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, encoder_num_hidden_layers=2,
                              decoder_num_hidden_layers=2, encoder_num_attention_heads=4,
                              decoder_num_attention_heads=4, encoder_num_key_value_heads=4,
                              decoder_num_key_value_heads=4, max_position_embeddings=64, use_cache=False,
                              pad_token_id=0, decoder_start_token_id=1, attn_implementation="eager")
    model = _AudioSeq2Seq(tf.MoonshineForConditionalGeneration(conf))
    ins = (torch.randn(BATCH, 2400, generator=gen), _tokens(gen, BATCH, 8, VOCAB))
    return model, ins, (_tokens(gen, BATCH, 8, VOCAB),)


def clap_audio():
    """CLAP audio tower (HTS-AT: Swin over a folded 32x32 mel spectrogram, BatchNorm on mel bins, patch merging)
    + linear head on the pooled output, 3 labels."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.ClapAudioConfig(window_size=4, num_mel_bins=32, spec_size=32, patch_size=4, patch_stride=[4, 4],
                              hidden_size=32, patch_embeds_hidden_size=16, depths=[1, 1], num_attention_heads=[2, 4],
                              hidden_dropout_prob=0.0, enable_fusion=False, mlp_ratio=2.0)
    model = _PooledHead(tf.ClapAudioModel(conf), 32, 3, key="input_features")
    return model, (torch.randn(BATCH, 1, 32, 32, generator=gen),), (torch.randint(0, 3, (BATCH,), generator=gen),)


# usage variants
def vit_msn_fp16():
    """ViT-MSN as vit_msn with the whole model and its images in float16 (``model.half()``)."""
    model, (x,), tgt = vit_msn()
    return model.half(), (x.half(),), tgt


def mobilenet_v2_frozen_stem():
    """MobileNet-v2 with its stem conv + first block frozen (``requires_grad_(False)``) while every BatchNorm,
    frozen ones included, stays in train mode (batch statistics, running stats updated)."""
    model, ins, tgt = mobilenet_v2()
    body = model.hf.mobilenet_v2
    for mod in (body.conv_stem, body.layer[0]):
        mod.requires_grad_(False)
    return model, ins, tgt
