"""Outside models of ``transformers`` vision families and VLM vision towers no earlier probe file covers (round 20),
random weights, no hub, as a user brings them for image classification or dense prediction: VLM vision towers with
a linear head (SigLIP-2 NaFlex patches with a padding mask, Pixtral 2-D RoPE over two images of different sizes,
Qwen2-VL and Qwen2.5-VL towers with 3-D patch embedding, windowed attention and the patch merger, Idefics2 with
a patch attention mask, InternVL with QK-norm and layer scale, MLCD 2-D RoPE, Owlv2, MetaCLIP-2, BLIP),
SAM's image encoder (windowed + global attention with decomposed relative positions, conv neck), SAM-2's
Hiera-Det (query pooling, windowed positional background), YOLOS detection tokens with a class + box loss,
ViTMatte alpha matting on a ViTDet backbone, RT-DETR's ResNet-vd backbone, video (VideoPrism factorised
space-time encoder, V-JEPA 2 with an attentive pooler), TIPSv2, GroupViT grouping blocks (straight-through hard
assignment) and LayoutLMv3 (text tokens + 2-D boxes + image patches).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s20_vision.py:<name>``
at the size of hf_more.py (2 layers or stages, hidden 64; images 32-64 px; video 4 frames; batch 2). Eager
attention, no dropout, seeded. Factories return ``(model, inputs, targets)`` (the named cross-entropy loss on class
targets, MSE on float ones) or ``(model, inputs, targets, loss)`` with a callable loss.
"""
from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import BATCH, VOCAB, Logits  # noqa: E402
from kinds_s18_vision import _classes, _PooledHead  # noqa: E402 - the same heads as round 18
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402


def _images(gen, size: int = 32, channels: int = 3, width: int | None = None):
    return torch.randn(BATCH, channels, size, size if width is None else width, generator=gen)


# VLM vision towers
class _NaFlex(nn.Module):
    """SigLIP-2 NaFlex: images of different aspect ratios cut into 8x8 patches, padded to 16 patches per image with
    ``pixel_attention_mask``; ``spatial_shapes`` (the processor's output) is fixed for the batch."""

    def __init__(self, hf, shapes, classes: int = 5):
        super().__init__()
        self.hf, self.shapes = hf, shapes
        self.head = nn.Linear(hf.config.hidden_size, classes)

    def forward(self, patches, mask):
        shapes = torch.tensor(self.shapes, dtype=torch.long)
        out = self.hf(pixel_values=patches, pixel_attention_mask=mask, spatial_shapes=shapes)
        return self.head(out.pooler_output)


def siglip2_naflex():
    """SigLIP-2 vision tower with NaFlex inputs (4x4 and 3x4 patch grids padded to 16, positional embeddings
    resized per image with antialiased bilinear interpolation, masked attention-pooling head) + linear head."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Siglip2VisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                  patch_size=8, num_patches=16, attn_implementation="eager")
    model = _NaFlex(tf.Siglip2VisionModel(conf), [[4, 4], [3, 4]])
    patches = torch.randn(BATCH, 16, 3 * 64, generator=gen)
    mask = torch.ones(BATCH, 16, dtype=torch.long)
    mask[1, 12:] = 0
    patches[1, 12:] = 0
    return model, (patches, mask), (_classes(gen),)


class _Pixtral(nn.Module):
    """Pixtral's tower over a padded batch of two images of different sizes (``image_sizes`` fixed): all patches in
    one sequence with a block-diagonal mask, mean per image -> linear head."""

    def __init__(self, hf, sizes, classes: int = 5):
        super().__init__()
        self.hf, self.sizes = hf, sizes
        self.head = nn.Linear(hf.config.hidden_size, classes)
        self.counts = [(h // hf.config.patch_size) * (w // hf.config.patch_size) for h, w in sizes]

    def forward(self, x):
        hidden = self.hf(pixel_values=x, image_sizes=self.sizes).last_hidden_state[0]
        pooled = torch.stack([part.mean(0) for part in hidden.split(self.counts)])
        return self.head(pooled)


def pixtral_vision():
    """Pixtral vision tower (Conv2d patches cropped per image size, 2-D axial RoPE, block-diagonal attention over
    a 32x32 and a 32x24 image, RMSNorm, SwiGLU) + per-image mean -> linear head."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.PixtralVisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                  image_size=32, patch_size=8, head_dim=16, attn_implementation="eager")
    model = _Pixtral(tf.PixtralVisionModel(conf), [(32, 32), (32, 24)])
    return model, (_images(gen),), (_classes(gen),)


class _QwenTower(nn.Module):
    """A Qwen-VL vision tower on (B, 3, H, W) images: the processor's patchify (each image repeated over the
    temporal patch, 2x2 merge blocks contiguous) done in the forward, fixed ``grid_thw``, the merger's tokens
    mean-pooled per image -> linear head."""

    def __init__(self, hf, image: int, classes: int = 5):
        super().__init__()
        cfg = hf.config
        self.hf, self.p, self.t, self.m = hf, cfg.patch_size, cfg.temporal_patch_size, cfg.spatial_merge_size
        self.grid = image // self.p
        width = getattr(cfg, "out_hidden_size", None) or cfg.hidden_size
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        b, c, h, w = x.shape
        g, m, p, t = self.grid, self.m, self.p, self.t
        x = x.unsqueeze(1).expand(b, t, c, h, w)
        x = x.reshape(b, t, c, g // m, m, p, g // m, m, p)
        x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(b * g * g, c * t * p * p)
        grid = torch.tensor([[1, g, g]] * b, dtype=torch.long)
        out = self.hf(hidden_states=x, grid_thw=grid).pooler_output
        return self.head(out.reshape(b, -1, out.shape[-1]).mean(1))


def qwen2_vl_vision():
    """Qwen2-VL vision tower (Conv3d patch embed over 2 temporal copies, 2-D vision RoPE, per-image attention from
    ``grid_thw``, QuickGELU MLP, 2x2 patch merger MLP) on 32x32 images + linear head."""
    import transformers as tf
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

    _quiet()
    gen = _gen()
    conf = tf.Qwen2VLVisionConfig(depth=2, embed_dim=64, hidden_size=64, num_heads=4, mlp_ratio=2, patch_size=8,
                                  temporal_patch_size=2, spatial_merge_size=2, attn_implementation="eager")
    model = _QwenTower(Qwen2VisionTransformerPretrainedModel(conf), 32)
    return model, (_images(gen),), (_classes(gen),)


def qwen2_5_vl_vision():
    """Qwen2.5-VL vision tower (window attention over 2x2 windows of merged units in layer 0 with the window
    permutation and its argsort inverse, full attention in layer 1, RMSNorm, SwiGLU, patch merger) on 64x64
    images + linear head."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Qwen2_5_VLVisionConfig(depth=2, hidden_size=64, intermediate_size=96, num_heads=4, patch_size=8,
                                     temporal_patch_size=2, spatial_merge_size=2, window_size=32, out_hidden_size=64,
                                     fullatt_block_indexes=[1], attn_implementation="eager")
    model = _QwenTower(tf.Qwen2_5_VisionTransformerPretrainedModel(conf), 64)
    return model, (_images(gen, 64),), (_classes(gen),)


class _Idefics2(nn.Module):
    def __init__(self, hf, classes: int = 5):
        super().__init__()
        self.hf, self.head = hf, nn.Linear(hf.config.hidden_size, classes)

    def forward(self, x, patch_mask):
        out = self.hf(pixel_values=x, patch_attention_mask=patch_mask).last_hidden_state
        keep = patch_mask.flatten(1).unsqueeze(-1).to(out.dtype)
        return self.head((out * keep).sum(1) / keep.sum(1))


def idefics2_vision():
    """Idefics2 vision tower (SigLIP-like, bucketised fractional position ids per image from
    ``patch_attention_mask``, padded patches masked out of attention) with the second image's last patch column
    padding, masked mean -> linear head, 32x32."""
    import transformers as tf
    from transformers.models.idefics2.modeling_idefics2 import Idefics2VisionTransformer

    _quiet()
    gen = _gen()
    conf = tf.Idefics2VisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                   image_size=32, patch_size=8, attn_implementation="eager")
    conf._attn_implementation = "eager"
    model = _Idefics2(Idefics2VisionTransformer(conf))
    x = _images(gen)
    x[1, :, :, 24:] = 0
    mask = torch.ones(BATCH, 4, 4, dtype=torch.bool)
    mask[1, :, 3] = False
    return model, (x, mask), (_classes(gen),)


def internvl_vision():
    """InternVL vision tower (InternViT: QK RMS-norm, layer scale, RMSNorm) + linear head on the mean token, 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.InternVLVisionConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                                   image_size=[32, 32], patch_size=[8, 8], use_qk_norm=True, norm_type="rms_norm",
                                   attn_implementation="eager")
    model = _PooledHead(tf.InternVLVisionModel(conf), 64, pooled=False)
    return model, (_images(gen),), (_classes(gen),)


def mlcd_vision():
    """MLCD vision tower (CLIP layout with 2-D vision RoPE and a separate class-token position) + linear head on
    the pooled CLS, 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.MLCDVisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                               image_size=32, patch_size=8, attn_implementation="eager")
    model = _PooledHead(tf.MLCDVisionModel(conf), 64)
    return model, (_images(gen),), (_classes(gen),)


def owlv2_vision():
    """OWLv2 vision tower (CLIP ViT with pre-LayerNorm, post-LayerNorm on the CLS pool) + linear head, 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Owlv2VisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                image_size=32, patch_size=8, attn_implementation="eager")
    model = _PooledHead(tf.Owlv2VisionModel(conf), 64)
    return model, (_images(gen),), (_classes(gen),)


def metaclip2_vision():
    """MetaCLIP-2 vision tower with projection (``image_embeds`` of width 32) + linear head, 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.MetaClip2VisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                    image_size=32, patch_size=8, projection_dim=32, attn_implementation="eager")

    class Proj(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf, self.head = tf.MetaClip2VisionModelWithProjection(conf), nn.Linear(32, 5)

        def forward(self, x):
            return self.head(self.hf(pixel_values=x).image_embeds)

    return Proj(), (_images(gen),), (_classes(gen),)


def blip_vision():
    """BLIP vision tower (ViT with CLS, post-LayerNorm pool) + linear head, 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.BlipVisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                               image_size=32, patch_size=8, attn_implementation="eager")
    model = _PooledHead(tf.BlipVisionModel(conf), 64)
    return model, (_images(gen),), (_classes(gen),)


# segmentation / detection / matting backbones
def sam_vision():
    """SAM image encoder (absolute positions, 2x2-window attention in layer 0 with padding and decomposed
    relative positions, global layer 1, conv + LayerNorm2d neck), MSE on its 32-channel embeddings, 48x48 images
    (6x6 patch grid, windows padded)."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.SamVisionConfig(hidden_size=64, output_channels=32, num_hidden_layers=2, num_attention_heads=4,
                              image_size=48, patch_size=8, window_size=4, global_attn_indexes=[1], mlp_dim=96,
                              use_rel_pos=True, attn_implementation="eager")

    class Embeds(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = tf.SamVisionModel(conf)

        def forward(self, x):
            return self.hf(pixel_values=x).last_hidden_state

    model = Embeds()
    with torch.no_grad():
        shape = model(_images(_gen(), 48)).shape
    return model, (_images(gen, 48),), (torch.randn(*shape, generator=gen),)


def sam2_hiera():
    """SAM-2 Hiera-Det backbone (overlapping 7x7 stride-4 patch stem, windowed positional background, query
    max-pooling in stage 2's first, windowed block, then a global block) + linear head on the mean last map, 64x64."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Sam2HieraDetConfig(hidden_size=16, num_attention_heads=1, image_size=[64, 64], blocks_per_stage=[1, 2],
                                 embed_dim_per_stage=[16, 32], num_attention_heads_per_stage=[1, 2],
                                 window_size_per_stage=[4, 4], global_attention_blocks=[2], num_query_pool_stages=1,
                                 window_positional_embedding_background_size=[4, 4], mlp_ratio=2.0,
                                 attn_implementation="eager")

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf, self.head = tf.Sam2HieraDetModel(conf), nn.Linear(32, 5)

        def forward(self, x):
            feats = self.hf(pixel_values=x).last_hidden_state  # (B, H, W, C)
            return self.head(feats.mean(dim=(1, 2)))

    return Head(), (_images(gen, 64),), (_classes(gen),)


class _Yolos(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, x):
        out = self.hf(pixel_values=x)
        return out.logits, out.pred_boxes


def _det_loss(out, classes, boxes):
    """Fixed assignment (detection token i <-> target i): cross-entropy over classes + no-object, L1 on boxes."""
    logits, pred = out
    return F.cross_entropy(logits.flatten(0, 1), classes.flatten()) + F.l1_loss(pred, boxes)


def yolos_det():
    """YOLOS (ViT with 5 detection tokens, interpolated mid-layer position embeddings, class and box MLP heads)
    under cross-entropy + L1 box loss with a fixed token-target assignment, 32x48 images."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.YolosConfig(image_size=[32, 48], patch_size=8, hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=96, num_detection_tokens=5, num_labels=4,
                          use_mid_position_embeddings=True, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = _Yolos(tf.YolosForObjectDetection(conf))
    tgt = (torch.randint(0, 5, (BATCH, 5), generator=gen), torch.rand(BATCH, 5, 4, generator=gen))
    return model, (torch.randn(BATCH, 3, 32, 48, generator=gen),), tgt, _det_loss


def vitmatte():
    """ViTMatte alpha matting (ViTDet backbone on image + trimap with windowed / global layers, ConvStream
    detail branch, fusion blocks with bilinear upsampling, sigmoid alpha), 64x64 images in 16x16 patches, L1 on
    the alpha."""
    import transformers as tf

    _quiet()
    gen = _gen()
    backbone = tf.VitDetConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=64,
                               pretrain_image_size=64, patch_size=16, num_channels=4, window_block_indices=[0],
                               residual_block_indices=[1], use_relative_position_embeddings=True, window_size=2,
                               out_features=["stage2"])
    conf = tf.VitMatteConfig(backbone_config=backbone, hidden_size=64, convstream_hidden_sizes=[8, 16, 32],
                             fusion_hidden_sizes=[32, 16, 8, 8])
    model = tf.VitMatteForImageMatting(conf)

    class Alphas(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = model

        def forward(self, x):
            return self.hf(pixel_values=x).alphas

    x = torch.cat([_images(gen, 64), torch.randint(0, 3, (BATCH, 1, 64, 64), generator=gen).float() / 2], 1)
    return Alphas(), (x,), (torch.rand(BATCH, 1, 64, 64, generator=gen),), lambda out, y: F.l1_loss(out, y)


def rt_detr_resnet():
    """RT-DETR's ResNet-vd backbone (3-conv deep stem, avg-pool shortcut downsampling, BatchNorm), its two feature
    maps mean-pooled and concatenated -> linear head, 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="bottleneck",
                                 out_features=["stage1", "stage2"], downsample_in_bottleneck=True)

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf, self.head = tf.RTDetrResNetBackbone(conf), nn.Linear(48, 5)

        def forward(self, x):
            maps = self.hf(pixel_values=x).feature_maps
            return self.head(torch.cat([m.mean(dim=(2, 3)) for m in maps], 1))

    return Head(), (_images(gen),), (_classes(gen),)


# video
def videoprism():
    """VideoPrism vision tower (factorised encoder: spatial layers per frame, then temporal layers per patch,
    tanh soft-capped attention logits) + linear head on the mean of its tokens, 4 frames of 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.VideoPrismVisionConfig(image_size=32, num_frames=4, tubelet_size=[1, 8, 8], hidden_size=64,
                                     num_attention_heads=4, intermediate_size=96, num_spatial_layers=2,
                                     num_temporal_layers=1, num_auxiliary_layers=1, attn_implementation="eager")
    model = _PooledHead(tf.VideoPrismVisionModel(conf), 64, key="pixel_values_videos", pooled=False)
    return model, (torch.randn(BATCH, 4, 3, 32, 32, generator=gen),), (_classes(gen),)


def vjepa2_cls():
    """V-JEPA 2 video classifier (Conv3d tubelets 2x8x8, 3-D RoPE over (t, h, w), attentive pooler with
    cross-attention from a learned query), 4 frames of 32x32."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.VJEPA2Config(patch_size=8, crop_size=32, frames_per_clip=4, tubelet_size=2, hidden_size=64,
                           num_attention_heads=4, num_hidden_layers=2, mlp_ratio=2, num_pooler_layers=1,
                           pred_hidden_size=32, pred_num_attention_heads=4, pred_num_hidden_layers=1, num_labels=5,
                           attn_implementation="eager")
    model = Logits(tf.VJEPA2ForVideoClassification(conf), "pixel_values_videos")
    return model, (torch.randn(BATCH, 4, 3, 32, 32, generator=gen),), (_classes(gen),)


# others
def tipsv2_vision():
    """TIPSv2 vision tower (DINOv2-like with a register token, layer scale) + linear head on the pooled CLS,
    28x28 images in 14x14 patches."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.Tipsv2VisionConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                                 image_size=28, patch_size=14, attn_implementation="eager")
    model = _PooledHead(tf.Tipsv2VisionModel(conf), 64)
    return model, (_images(gen, 28),), (_classes(gen),)


def groupvit_vision():
    """GroupViT vision tower (8 group tokens, grouping block with hard straight-through assignment -- argmax,
    one-hot scatter, ``y_hard - y_soft.detach() + y_soft`` -- then 4 output groups) + linear head on the pooled
    groups; its assign-attention modules in eval mode so the Gumbel noise is off."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.GroupViTVisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, depths=[1, 1],
                                   num_group_tokens=[8, 0], num_output_groups=[8, 4], num_attention_heads=4,
                                   image_size=32, patch_size=8, assign_mlp_ratio=[0.5, 2])
    model = _PooledHead(tf.GroupViTVisionModel(conf), 64)
    for mod in model.modules():
        if type(mod).__name__ == "GroupViTAssignAttention":
            mod.eval()
    return model, (_images(gen),), (_classes(gen),)


class _LayoutLMv3(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, bbox, pixel_values):
        return self.hf(input_ids=input_ids, bbox=bbox, pixel_values=pixel_values).logits


def layoutlmv3_cls():
    """LayoutLMv3 document classifier (text tokens with 2-D box embeddings + 8x8 image patches in one sequence,
    1-D and 2-D relative position biases), 12 tokens + 32x32 page, 3 classes."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.LayoutLMv3Config(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=96, max_position_embeddings=64, input_size=32, patch_size=8,
                               max_2d_position_embeddings=128, coordinate_size=10, shape_size=12, rel_pos_bins=8,
                               max_rel_pos=16, rel_2d_pos_bins=8, max_rel_2d_pos=32, num_labels=3,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = _LayoutLMv3(tf.LayoutLMv3ForSequenceClassification(conf))
    ids = _tokens(gen, BATCH, 12, VOCAB)
    lo = torch.randint(0, 60, (BATCH, 12, 2), generator=gen)
    box = torch.cat([lo, lo + torch.randint(1, 60, (BATCH, 12, 2), generator=gen)], -1)
    return model, (ids, box, _images(gen)), (torch.randint(0, 3, (BATCH,), generator=gen),)
