"""Session 19's scale probe: the issue's model families at MODERATE size (4 layers, width 256, 64-128 tokens,
vocab 2048; CNNs on 64x64 images at batch 8; RNNs of width 256 over 64 steps), where graphs have thousands of
operators, the ordering MIP meets its time limits and layout is harder than at the tiny probe size.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s19_scale.py:<name>``
(random weights and data, seeded; eager attention, no dropout, no cache): ``(model, inputs, targets[, loss])``.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import LoRALinear, Logits, Seq2SeqLM  # noqa: E402
from roam_tvm.zoo.families import CausalLM, _gen, _quiet, _tokens  # noqa: E402

F = nn.functional
VOCAB = 2048
_DEC = dict(hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=2,
            max_position_embeddings=256, attention_dropout=0.0, use_cache=False, tie_word_embeddings=False,
            attn_implementation="eager")


def _tf():
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    return tf


def _dec(name: str, batch: int = 2, seq: int = 128, layers: int = 4, **cfg):
    tf = _tf()
    gen = _gen()
    conf = getattr(tf, f"{name}Config")(vocab_size=VOCAB, num_hidden_layers=layers, **{**_DEC, **cfg})
    model = CausalLM(getattr(tf, f"{name}ForCausalLM")(conf))
    return model, (_tokens(gen, batch, seq, VOCAB),), (_tokens(gen, batch, seq, VOCAB),)


# ---------------------------------------------------------------- decoders
def sc_llama():
    """LLaMA, 4 layers, hidden 256, 8 heads / 2 KV heads (GQA), MLP 688, vocab 2048, 2 x 128 tokens."""
    return _dec("Llama")


def sc_llama_small():
    """LLaMA, 2 layers, hidden 128, 4 heads / 2 KV heads, MLP 344, vocab 2048, 2 x 64 tokens (the calibration row)."""
    return _dec("Llama", seq=64, layers=2, hidden_size=128, intermediate_size=344, num_attention_heads=4)


def sc_qwen2():
    """Qwen2 (q/k/v biases), 4 layers, hidden 256, GQA 8/2, MLP 688, vocab 2048, 2 x 128 tokens."""
    return _dec("Qwen2")


def sc_mistral_swa():
    """Mistral with a sliding window of 64 over 128 tokens, 4 layers, hidden 256, GQA 8/2."""
    return _dec("Mistral", sliding_window=64)


def sc_gemma2():
    """Gemma-2 (pre/post norms, attention + final logit soft-capping, alternating sliding window 64), 4 layers,
    hidden 256, head_dim 32, 2 x 128 tokens."""
    return _dec("Gemma2", head_dim=32, sliding_window=64, query_pre_attn_scalar=32,
                attn_logit_softcapping=50.0, final_logit_softcapping=30.0)


def sc_mixtral():
    """Mixtral MoE: 8 experts, top-2, 4 layers, hidden 256, expert MLP 688, 2 x 64 tokens."""
    return _dec("Mixtral", seq=64, num_local_experts=8, num_experts_per_tok=2, router_aux_loss_coef=0.0)


def sc_llama_lora():
    """Frozen LLaMA of sc_llama's size with trainable rank-8 LoRA adapters on q/k/v/o (only adapters train)."""
    model, ins, tgt = _dec("Llama")
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.hf.model.layers:
        att = layer.self_attn
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(att, n, LoRALinear(getattr(att, n), r=8, alpha=16.0))
    return model, ins, tgt


# ---------------------------------------------------------------- encoder-decoder
def sc_t5():
    """T5 (relative position buckets, ReLU FF, tied rescaled embeddings), d_model 256, 4+4 layers, 8 heads,
    d_ff 512, vocab 2048, 2 x 64 encoder / 2 x 32 decoder tokens."""
    tf = _tf()
    gen = _gen()
    conf = tf.T5Config(vocab_size=VOCAB, d_model=256, d_kv=32, d_ff=512, num_layers=4, num_decoder_layers=4,
                       num_heads=8, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                       dropout_rate=0.0, use_cache=False, attn_implementation="eager")
    model = Seq2SeqLM(tf.T5ForConditionalGeneration(conf))
    ins = (_tokens(gen, 2, 64, VOCAB), _tokens(gen, 2, 32, VOCAB))
    return model, ins, (_tokens(gen, 2, 32, VOCAB),)


# ---------------------------------------------------------------- vision
def sc_swin():
    """Swin, 64x64 images in 4x4 patches, windows of 4, depths (2, 2, 2), embed 48, heads (3, 6, 12), batch 4."""
    tf = _tf()
    gen = _gen()
    conf = tf.SwinConfig(image_size=64, patch_size=4, window_size=4, embed_dim=48, depths=[2, 2, 2],
                         num_heads=[3, 6, 12], mlp_ratio=4.0, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0, drop_path_rate=0.0, num_labels=10,
                         attn_implementation="eager")
    model = Logits(tf.SwinForImageClassification(conf), "pixel_values")
    x = torch.randn(4, 3, 64, 64, generator=gen)
    return model, (x,), (torch.randint(0, 10, (4,), generator=gen),)


class _DenseLayer(nn.Module):
    def __init__(self, cin, growth, bn_size=4):
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats):
        x = torch.cat(feats, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class _DenseNet(nn.Module):
    def __init__(self, blocks, growth=16, classes=10):
        super().__init__()
        c = 2 * growth
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.blocks, self.trans = nn.ModuleList(), nn.ModuleList()
        for i, n in enumerate(blocks):
            layers = nn.ModuleList()
            for _ in range(n):
                layers.append(_DenseLayer(c, growth))
                c += growth
            self.blocks.append(layers)
            if i < len(blocks) - 1:
                self.trans.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                                nn.AvgPool2d(2)))
                c //= 2
        self.norm, self.fc = nn.BatchNorm2d(c), nn.Linear(c, classes)

    def forward(self, x):
        x = self.stem(x)
        for i, layers in enumerate(self.blocks):
            feats = [x]
            for layer in layers:
                feats.append(layer(feats))
            x = torch.cat(feats, 1)
            if i < len(self.trans):
                x = self.trans[i](x)
        x = F.adaptive_avg_pool2d(F.relu(self.norm(x)), 1).flatten(1)
        return self.fc(x)


def _images(model, batch=8, size=64, classes=10):
    g = _gen()
    return model, (torch.randn(batch, 3, size, size, generator=g),), (torch.randint(0, classes, (batch,), generator=g),)


def sc_densenet_small():
    """DenseNet-BC (BN-ReLU-1x1-BN-ReLU-3x3 bottlenecks, concatenated features, growth 16), blocks (4, 8, 8),
    64x64 images, batch 8."""
    torch.manual_seed(0)
    return _images(_DenseNet((4, 8, 8)))


def sc_densenet121():
    """DenseNet-121-shaped (blocks (6, 12, 24, 16), growth 16), 64x64 images, batch 8."""
    torch.manual_seed(0)
    return _images(_DenseNet((6, 12, 24, 16)))


class _Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class _ResNet18(nn.Module):
    def __init__(self, width=32, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers, c = [], width
        for i, mult in enumerate((1, 2, 4, 8)):
            out = width * mult
            layers += [_Basic(c, out, 1 if i == 0 else 2), _Basic(out, out, 1)]
            c = out
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1).flatten(1))


def sc_resnet18():
    """ResNet-18-shaped (basic blocks (2, 2, 2, 2), widths 32-256, 1x1 projection shortcuts), 64x64, batch 8."""
    torch.manual_seed(0)
    return _images(_ResNet18())


# ---------------------------------------------------------------- recurrent
class _RnnLM(nn.Module):
    def __init__(self, cell, vocab=VOCAB, d=256, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = cell(d, d, num_layers=layers, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.rnn(self.emb(ids))[0])


def _rnn_lm(cell):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _RnnLM(cell)
    return model, (torch.randint(0, VOCAB, (8, 64), generator=g),), (torch.randint(0, VOCAB, (8, 64), generator=g),)


def sc_lstm_lm():
    """nn.LSTM language model: 2 layers, hidden 256, batch-first 8 x 64 tokens, vocab 2048, Linear head."""
    return _rnn_lm(nn.LSTM)


def sc_gru_lm():
    """nn.GRU language model: 2 layers, hidden 256, batch-first 8 x 64 tokens, vocab 2048, Linear head."""
    return _rnn_lm(nn.GRU)


class _Tagger(nn.Module):
    def __init__(self, vocab=VOCAB, d=128, hidden=256, tags=17):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, ids):
        return self.out(self.rnn(self.emb(ids))[0])


def sc_bilstm_tagger():
    """Bidirectional 2-layer LSTM tagger (embed 128, hidden 256 per direction, 17 tags), 8 x 64 tokens."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _Tagger()
    return model, (torch.randint(0, VOCAB, (8, 64), generator=g),), (torch.randint(0, 17, (8, 64), generator=g),)


def _dense_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """Every expert on every token, weighted by its routing weight (0 where not picked): the same sum with static
    shapes and O(tokens x intermediate) activations per expert, instead of gathering each (token, expert) pair's
    weights (``batched_mm``: O(tokens x top_k x expert parameters))."""
    w = (F.one_hot(top_k_index, self.num_experts).to(top_k_weights.dtype) * top_k_weights[..., None]).sum(1)
    out = torch.zeros_like(hidden_states)
    for e in range(self.num_experts):
        gate, up = F.linear(hidden_states, self.gate_up_proj[e]).chunk(2, dim=-1)
        out = out + F.linear(self.act_fn(gate) * up, self.down_proj[e]) * w[:, e:e + 1]
    return out


def sc_mixtral_dense_experts():
    """sc_mixtral with each MixtralExperts' forward replaced by a dense all-experts loop (a user's own static-shape
    MoE; also the memory the planned step would have if the importer ran experts this way)."""
    import types

    model, ins, tgt = sc_mixtral()
    for mod in model.modules():
        if type(mod).__name__ == "MixtralExperts":
            mod.forward = types.MethodType(_dense_experts_forward, mod)
    return model, ins, tgt
