"""Architectures a user brings, outside the zoo: one factory per family, random weights.

Each public function is a factory for ``roam-tvm compare --model roam_tvm/zoo/families.py:<name>``
(see ``registry.load_factory``): it returns ``(model, example_inputs, targets)``. The
default is a tiny size (tests, seconds); ``<name>_realistic`` is a realistic size
(benchmark rows). Families: LLaMA / Qwen2 / Mistral (RMSNorm, RoPE, SiLU gating, grouped-query
attention), T5 (relative position bias), DenseNet (``torch.cat`` of growing lists, one-element
ones first), Swin (windowed attention, padding), a mixture of experts (top-k routing,
``index_add`` dispatch), LSTM, GRU and a U-Net with GroupNorm. Hugging Face models come from
``transformers`` configs with eager attention, no dropout and no cache.
"""
from __future__ import annotations

import torch
from torch import nn

F = nn.functional


def _gen(seed: int = 0) -> torch.Generator:
    torch.manual_seed(seed)  # the weights
    return torch.Generator().manual_seed(seed)  # the data


def _tokens(gen, batch, seq, vocab):
    return torch.randint(0, vocab, (batch, seq), generator=gen)


def _quiet():
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


# ------------------------------------------------------------------------------------------
# decoder-only language models (LLaMA family)


class CausalLM(nn.Module):
    """A Hugging Face causal LM whose ``forward(input_ids)`` returns the logits."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids):
        return self.hf(input_ids=input_ids, use_cache=False).logits


def _decoder(kind: str, layers: int, width: int, heads: int, kv_heads: int, ffn: int,
             vocab: int, dtype=torch.float32):
    import transformers as tf

    _quiet()
    cfg_cls, model_cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
                          "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
                          "mistral": (tf.MistralConfig, tf.MistralForCausalLM)}[kind]
    cfg = cfg_cls(vocab_size=vocab, hidden_size=width, intermediate_size=ffn,
                  num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, max_position_embeddings=4096,
                  attention_dropout=0.0, use_cache=False, tie_word_embeddings=False,
                  attn_implementation="eager")
    return CausalLM(model_cls(cfg).to(dtype))


def _lm(kind, batch, seq, **sizes):
    gen = _gen()
    model = _decoder(kind, **sizes)
    vocab = sizes["vocab"]
    return model, (_tokens(gen, batch, seq, vocab),), (_tokens(gen, batch, seq, vocab),)


_LM_TINY = dict(layers=1, width=32, heads=4, kv_heads=2, ffn=48, vocab=64)
# ~1B parameters, like TinyLlama / Llama-3.2-1B
_LM_REAL = dict(layers=16, width=2048, heads=32, kv_heads=8, ffn=5632, vocab=32000)


def llama():
    """LLaMA (RMSNorm, RoPE, SiLU-gated MLP, grouped-query attention), tiny."""
    return _lm("llama", 2, 8, **_LM_TINY)


def qwen2():
    """Qwen2 (LLaMA with q/k/v biases), tiny."""
    return _lm("qwen2", 2, 8, **_LM_TINY)


def mistral():
    """Mistral (LLaMA with a sliding-window mask), tiny."""
    return _lm("mistral", 2, 8, **_LM_TINY)


def llama_realistic():
    """A LLaMA-style model of about 1B parameters at 2,048 tokens."""
    return _lm("llama", 1, 2048, **_LM_REAL)


# ------------------------------------------------------------------------------------------
# T5


class T5LM(nn.Module):
    """``T5ForConditionalGeneration``: ``forward(input_ids, decoder_input_ids)`` -> logits."""

    def __init__(self, cfg):
        super().__init__()
        from transformers import T5ForConditionalGeneration

        self.hf = T5ForConditionalGeneration(cfg)

    def forward(self, input_ids, decoder_input_ids):
        return self.hf(input_ids=input_ids, decoder_input_ids=decoder_input_ids,
                       use_cache=False).logits


def _t5(batch, src, tgt, layers, width, heads, ffn, vocab):
    from transformers import T5Config

    _quiet()
    gen = _gen()
    cfg = T5Config(vocab_size=vocab, d_model=width, d_kv=width // heads, d_ff=ffn,
                   num_layers=layers, num_heads=heads, dropout_rate=0.0, use_cache=False,
                   relative_attention_num_buckets=32 if width >= 256 else 8,
                   attn_implementation="eager")
    model = T5LM(cfg)
    ins = (_tokens(gen, batch, src, vocab), _tokens(gen, batch, tgt, vocab))
    return model, ins, (_tokens(gen, batch, tgt, vocab),)


def t5():
    """T5 encoder-decoder (relative position bias), tiny."""
    return _t5(2, 8, 6, layers=1, width=32, heads=4, ffn=48, vocab=64)


def t5_realistic():
    """T5-base (12+12 layers, d_model 768) on 512 source / 128 target tokens."""
    return _t5(4, 512, 128, layers=12, width=768, heads=12, ffn=3072, vocab=32128)


# ------------------------------------------------------------------------------------------
# DenseNet


class DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv, BN-ReLU-3x3 conv over the concatenation of every earlier output."""

    def __init__(self, c_in, growth, bottleneck=4):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(c_in)
        self.conv1 = nn.Conv2d(c_in, bottleneck * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bottleneck * growth)
        self.conv2 = nn.Conv2d(bottleneck * growth, growth, 3, padding=1, bias=False)

    def forward(self, features):
        h = torch.cat(features, 1)  # a one-element list for a block's first layer
        h = self.conv1(F.relu(self.norm1(h)))
        return self.conv2(F.relu(self.norm2(h)))


class DenseNet(nn.Module):
    def __init__(self, blocks=(6, 12, 24, 16), growth=32, stem=64, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.ModuleList()
        self.transitions = nn.ModuleList()
        c = stem
        for i, n in enumerate(blocks):
            self.blocks.append(nn.ModuleList(DenseLayer(c + j * growth, growth) for j in range(n)))
            c += n * growth
            if i + 1 < len(blocks):
                self.transitions.append(nn.Sequential(
                    nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                    nn.AvgPool2d(2, 2)))
                c //= 2
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.stem(x)
        for i, block in enumerate(self.blocks):
            feats = [x]
            for layer in block:
                feats.append(layer(feats))
            x = torch.cat(feats, 1)
            if i < len(self.transitions):
                x = self.transitions[i](x)
        return self.fc(F.relu(self.norm(x)).mean((2, 3)))


def _densenet(batch, image, classes, **kw):
    gen = _gen()
    model = DenseNet(classes=classes, **kw)
    x = torch.randn(batch, 3, image, image, generator=gen)
    return model, (x,), (torch.randint(0, classes, (batch,), generator=gen),)


def densenet():
    """DenseNet, two blocks of two layers, 32x32 images, tiny."""
    return _densenet(2, 32, 5, blocks=(2, 2), growth=4, stem=8)


def densenet_realistic():
    """DenseNet-121 at 224x224, batch 16."""
    return _densenet(16, 224, 1000)


# ------------------------------------------------------------------------------------------
# Swin


class SwinClassifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        from transformers import SwinForImageClassification

        self.hf = SwinForImageClassification(cfg)

    def forward(self, pixel_values):
        return self.hf(pixel_values=pixel_values).logits


def _swin(batch, image, classes, **kw):
    from transformers import SwinConfig

    _quiet()
    gen = _gen()
    cfg = SwinConfig(image_size=image, num_labels=classes, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, drop_path_rate=0.0,
                     attn_implementation="eager", **kw)
    model = SwinClassifier(cfg)
    x = torch.randn(batch, 3, image, image, generator=gen)
    return model, (x,), (torch.randint(0, classes, (batch,), generator=gen),)


def swin():
    """Swin, tiny: 8x8 then 4x4 patches in 3x3 windows (shifted in every second block),
    so both stages pad their windows."""
    return _swin(2, 32, 5, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 2],
                 window_size=3)


def swin_realistic():
    """Swin-T at 224x224, batch 16."""
    return _swin(16, 224, 1000, patch_size=4, embed_dim=96, depths=[2, 2, 6, 2],
                 num_heads=[3, 6, 12, 24], window_size=7)


# ------------------------------------------------------------------------------------------
# mixture of experts


class MoELayer(nn.Module):
    """Top-k routing with static shapes: each token keeps its top-k experts' gates; each
    expert takes its ``capacity`` highest-gated tokens, gathered by index and added back
    with ``index_add``."""

    def __init__(self, width, ffn, experts, k, capacity):
        super().__init__()
        self.router = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(width, ffn), nn.SiLU(), nn.Linear(ffn, width))
            for _ in range(experts))
        self.k, self.capacity = k, capacity

    def forward(self, x):  # x: (tokens, width)
        probs = torch.softmax(self.router(x), dim=-1)
        top_p, top_i = torch.topk(probs, self.k, dim=-1)
        keep = torch.zeros_like(probs).scatter(1, top_i, 1.0)  # routing mask, no gradient
        gates = probs * keep / top_p.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            w, idx = torch.topk(gates[:, e], self.capacity)
            out = out.index_add(0, idx, expert(x[idx]) * w[:, None])
        return x + out


class MoELM(nn.Module):
    def __init__(self, vocab, width, ffn, experts, k, capacity, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(MoELayer(width, ffn, experts, k, capacity)
                                    for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids):
        b, t = input_ids.shape
        h = self.embed(input_ids).reshape(b * t, -1)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h)).reshape(b, t, -1)


def _moe(batch, seq, **kw):
    gen = _gen()
    model = MoELM(**kw)
    vocab = kw["vocab"]
    return model, (_tokens(gen, batch, seq, vocab),), (_tokens(gen, batch, seq, vocab),)


def moe():
    """Mixture of experts, 4 experts, top-2, tiny. Each expert's capacity is every token
    (those not routed to it have gate 0), so no token is dropped on an fp32 near-tie."""
    return _moe(2, 8, vocab=32, width=16, ffn=24, experts=4, k=2, capacity=16, layers=1)


def moe_realistic():
    """A small MoE: 4 layers of 8 experts (top-2), width 512, 2,048 tokens."""
    return _moe(4, 512, vocab=32000, width=512, ffn=2048, experts=8, k=2, capacity=512,
                layers=4)


# ------------------------------------------------------------------------------------------
# recurrent networks


class RNNClassifier(nn.Module):
    def __init__(self, cell, features, hidden, layers, classes):
        super().__init__()
        self.rnn = getattr(nn, cell)(features, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def _rnn(cell, batch, steps, features, hidden, layers, classes):
    gen = _gen()
    model = RNNClassifier(cell, features, hidden, layers, classes)
    x = torch.randn(batch, steps, features, generator=gen)
    return model, (x,), (torch.randint(0, classes, (batch,), generator=gen),)


def lstm():
    """Two-layer LSTM over 5 steps, tiny."""
    return _rnn("LSTM", 2, 5, 8, 16, 2, 4)


def gru():
    """Two-layer GRU over 5 steps, tiny."""
    return _rnn("GRU", 2, 5, 8, 16, 2, 4)


def lstm_realistic():
    """Two-layer LSTM classifier, hidden 1,024, batch 32 x 128 steps of 256 features."""
    return _rnn("LSTM", 32, 128, 256, 1024, 2, 10)


def gru_realistic():
    """Two-layer GRU classifier, hidden 1,024, batch 32 x 128 steps of 256 features."""
    return _rnn("GRU", 32, 128, 256, 1024, 2, 10)


# ------------------------------------------------------------------------------------------
# U-Net with GroupNorm


def _block(c_in, c_out, groups):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.GroupNorm(groups, c_out),
                         nn.SiLU(), nn.Conv2d(c_out, c_out, 3, padding=1),
                         nn.GroupNorm(groups, c_out), nn.SiLU())


class UNet(nn.Module):
    """Encoder-decoder with skip connections (``torch.cat``), GroupNorm, nearest upsampling."""

    def __init__(self, channels=(64, 128, 256, 512), c_in=3, c_out=3, groups=8):
        super().__init__()
        self.down = nn.ModuleList()
        c = c_in
        for w in channels:
            self.down.append(_block(c, w, groups))
            c = w
        self.up = nn.ModuleList(_block(channels[i + 1] + channels[i], channels[i], groups)
                                for i in reversed(range(len(channels) - 1)))
        self.out = nn.Conv2d(channels[0], c_out, 1)

    def forward(self, x):
        skips = []
        for i, block in enumerate(self.down):
            if i:
                x = F.max_pool2d(x, 2)
            x = block(x)
            skips.append(x)
        skips.pop()
        for block in self.up:
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            x = block(torch.cat([x, skips.pop()], 1))
        return self.out(x)


def _unet(batch, image, **kw):
    gen = _gen()
    model = UNet(**kw)
    x = torch.randn(batch, 3, image, image, generator=gen)
    return model, (x,), (torch.randn(batch, 3, image, image, generator=gen),), "mse"


def unet():
    """U-Net, three levels, GroupNorm with 2 groups, 16x16 images, tiny (mse loss)."""
    return _unet(2, 16, channels=(4, 8, 16), groups=2)


def unet_realistic():
    """U-Net, four levels (64-512 channels), GroupNorm with 8 groups, batch 8 at 128x128 (mse loss)."""
    return _unet(8, 128, channels=(64, 128, 256, 512), groups=8)


TINY = ["llama", "qwen2", "mistral", "t5", "densenet", "swin", "moe", "lstm", "gru", "unet"]
