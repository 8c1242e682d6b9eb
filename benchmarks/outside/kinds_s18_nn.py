"""Session 18's plain-PyTorch probe idioms, written the way practitioners write them and not yet used by the other
probe files: hand-written decoders in the nanoGPT / torchtitan / Qwen styles (a model computing its own loss with
``ignore_index=-1`` and a reverse-tied head, complex RoPE with ``repeat_interleave`` GQA and a z-loss, rotate-half
RoPE with ``expand`` + ``reshape`` GQA, a float32 softmax and an ``F.linear`` tied head, a qkv ``unbind`` in a
whole-bf16 model, ``torch.autocast`` regions inside the forward, SDPA with a boolean left-padding mask and
``enable_gqa``, fp32 norms in a bf16 body), parameter-efficient training (hand LoRA, prompt tuning, BitFit),
MoEs (``topk`` + ``one_hot`` + ``einsum`` with a dict-returned aux loss, a per-expert loop with a fixed capacity
and ``index_add``, top-2 capacity dispatch through ``scatter`` / ``gather`` with a drop slot), a T5 relative bias
given to SDPA as a float mask with ``scale=1``, CNNs (a torchvision-style ResNet with in-place ``+=`` and a
drop-path function, a MobileNet with squeeze-excite through Linear layers, an FC-DenseNet segmenter, an autocast
CNN), recurrent models (a char-RNN whose (h0, c0) are inputs and whose decoder is ``F.linear`` on the embedding, a
bidirectional GRU classifying from its final hidden state, a Bahdanau seq2seq with a ``GRUCell`` decoder, a
ConvLSTM, residual LayerNorm LSTM stacks), a hand Swin on SDPA with ``masked_fill`` masks and padding, and loss
conventions (a loss in a dict returned by the model, ``cross_entropy`` on [B, C, H, W] with ``reduction="sum"``,
class weights, ``ignore_index`` and label smoothing, shifted labels with -100).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s18_nn.py:<name>`` at
a tiny size (random weights and data, seeded): ``(model, inputs, targets[, loss])``.
"""
from __future__ import annotations

import math

import torch
from torch import nn

F = nn.functional
B, T, V, D = 2, 12, 256, 64


def _gen() -> torch.Generator:
    torch.manual_seed(0)  # the weights
    return torch.Generator().manual_seed(0)  # the data


def _ids(g, t: int = T, v: int = V) -> torch.Tensor:
    return torch.randint(0, v, (B, t), generator=g)


def _lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)


# ---------------------------------------------------------------- nanoGPT: the model computes its own loss
class _NanoLayerNorm(nn.Module):
    """nanoGPT's LayerNorm with an optional bias (``F.layer_norm`` on the module's own parameters)."""

    def __init__(self, d, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class _NanoBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.ln_1, self.ln_2 = _NanoLayerNorm(d, False), _NanoLayerNorm(d, False)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q = q.view(b, t, self.h, c // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, c // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, c // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    def __init__(self, d=D, heads=4, layers=2, block=16):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(block, d)
        self.h = nn.ModuleList(_NanoBlock(d, heads) for _ in range(layers))
        self.ln_f = _NanoLayerNorm(d, False)
        self.lm_head = nn.Linear(d, V, bias=False)
        self.wte.weight = self.lm_head.weight  # nanoGPT ties this way round
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def nanogpt_own_loss():
    """nanoGPT: bias-free ``F.layer_norm``, ``c_attn(...).split(C, dim=2)``, SDPA is_causal, ``wte.weight =
    lm_head.weight``, forward(idx, targets) returning (logits, loss) with ``ignore_index=-1`` on padded targets."""
    g = _gen()
    idx = _ids(g)
    tg = _ids(g)
    tg[1, 9:] = -1
    return NanoGPT(), (idx, tg), (), lambda out: out[1]


# ---------------------------------------------------------------- torchtitan LLaMA: complex RoPE, z-loss
def _precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = torch.arange(end, device=freqs.device)
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs).float())


def _apply_rotary(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    fc = freqs_cis[None, :, None, :]  # [1, T, 1, hd/2] for [B, T, H, hd/2]
    return torch.view_as_real(xq_ * fc).flatten(3).type_as(xq), torch.view_as_real(xk_ * fc).flatten(3).type_as(xk)


class _RsqrtNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


class _TitanBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.wq = nn.Linear(d, heads * self.hd, bias=False)
        self.wk = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, d, bias=False)
        self.w1, self.w2, self.w3 = nn.Linear(d, ffn, bias=False), nn.Linear(ffn, d, bias=False), \
            nn.Linear(d, ffn, bias=False)
        self.attention_norm, self.ffn_norm = _RsqrtNorm(d), _RsqrtNorm(d)

    def forward(self, x, freqs_cis):
        b, t, _ = x.shape
        h = self.attention_norm(x)
        xq = self.wq(h).view(b, t, self.h, self.hd)
        xk = self.wk(h).view(b, t, self.kv, self.hd)
        xv = self.wv(h).view(b, t, self.kv, self.hd)
        xq, xk = _apply_rotary(xq, xk, freqs_cis)
        rep = self.h // self.kv
        xk, xv = xk.repeat_interleave(rep, dim=2), xv.repeat_interleave(rep, dim=2)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2),
                                             is_causal=True)
        x = x + self.wo(out.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class TitanLlama(nn.Module):
    def __init__(self, d=D, heads=4, kv_heads=2, layers=2, ffn=96, max_seq=32):
        super().__init__()
        self.tok_embeddings = nn.Embedding(V, d)
        self.layers = nn.ModuleDict({str(i): _TitanBlock(d, heads, kv_heads, ffn) for i in range(layers)})
        self.norm, self.output = _RsqrtNorm(d), nn.Linear(d, V, bias=False)
        self.register_buffer("freqs_cis", _precompute_freqs_cis(d // heads, max_seq), persistent=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        fc = self.freqs_cis[: tokens.shape[1]]
        for layer in self.layers.values():
            h = layer(h, fc)
        return self.output(self.norm(h)).float()


def _ce_zloss(logits, labels):
    flat = logits.flatten(0, 1)
    ce = F.cross_entropy(flat, labels.flatten(0, 1), ignore_index=-100)
    keep = (labels.flatten() != -100).to(flat.dtype)
    z = (torch.logsumexp(flat, dim=-1).pow(2) * keep).sum() / keep.sum()
    return ce + 1e-4 * z


def titan_llama_zloss():
    """torchtitan LLaMA: ``torch.polar`` freqs buffer + ``view_as_complex``, GQA by ``repeat_interleave(dim=2)``,
    ``torch.rsqrt`` norm on ``x.float()`` then ``type_as``, layers in an ``nn.ModuleDict``; CE + z-loss, -100."""
    g = _gen()
    labels = _ids(g)
    labels[0, :3] = -100
    return TitanLlama(), (_ids(g),), (labels,), _ce_zloss


# ---------------------------------------------------------------- Qwen-style: rotate_half, expand GQA, tied F.linear
def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _repeat_kv(x, n: int):
    b, h, t, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, h, n, t, d).reshape(b, h * n, t, d)


class _QwenAttn(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.hd, bias=True)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=True)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=True)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, -1, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, -1, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, -1, self.hd).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        k, v = _repeat_kv(k, self.h // self.kv), _repeat_kv(v, self.h // self.kv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd) + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.o_proj(torch.matmul(w, v).transpose(1, 2).reshape(b, t, -1))


class _QwenLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.self_attn = _QwenAttn(d, heads, kv_heads)
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
        self.gate_up_proj = nn.Linear(d, 2 * ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        gate, up = self.gate_up_proj(self.post_attention_layernorm(x)).chunk(2, dim=-1)
        return x + self.down_proj(F.silu(gate) * up)


class QwenHand(nn.Module):
    def __init__(self, d=D, heads=4, kv_heads=1, layers=2, ffn=96):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, d)
        nn.init.normal_(self.embed_tokens.weight, std=0.02)
        self.layers = nn.ModuleList(_QwenLayer(d, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = nn.RMSNorm(d, eps=1e-6)
        hd = d // heads
        self.register_buffer("inv_freq", 1.0 / (1e6 ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd)),
                             persistent=False)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        x = self.embed_tokens(input_ids)
        freqs = torch.arange(t, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = torch.full((t, t), float("-inf")).triu(1)[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return F.linear(self.norm(x), self.embed_tokens.weight)  # tied head


def _shifted_lm_loss(logits, labels):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                           ignore_index=-100)


def qwen_rotate_half_tied():
    """Qwen-style by hand: q/k/v biases, rotate_half with ``torch.cat``, MQA by ``expand`` + ``reshape``,
    ``softmax(dtype=float32)``, fused gate_up ``chunk``, ``F.linear(x, emb.weight)`` head; shifted -100 labels."""
    g = _gen()
    ids = _ids(g)
    labels = ids.clone()
    labels[1, 8:] = -100
    return QwenHand(), (ids,), (labels,), _shifted_lm_loss


# ---------------------------------------------------------------- qkv unbind, whole bf16
class _UnbindBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d, bias=False), nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.h, d // self.h).unbind(dim=2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).flatten(2))
        return x + self.fc2(F.relu(self.fc1(self.norm2(x))).square())


class UnbindLM(nn.Module):
    def __init__(self, d=D, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.Sequential(*(_UnbindBlock(d, heads) for _ in range(layers)))
        self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, V, bias=False)

    def forward(self, ids):
        return self.head(self.norm(self.blocks(self.emb(ids))))


def unbind_qkv_bf16():
    """A whole-bf16 LM (``model.to(torch.bfloat16)``): qkv ``view(b, t, 3, h, d).unbind(2)``, ``nn.RMSNorm``,
    SDPA is_causal, ReLU² MLP; the loss on ``logits.float()``."""
    g = _gen()
    return UnbindLM().to(torch.bfloat16), (_ids(g),), (_ids(g),), _lm_loss


# ---------------------------------------------------------------- autocast inside the forward
class _AutocastBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q, k, v = (z.view(b, t, self.h, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = self.out(y.transpose(1, 2).reshape(b, t, d))
        x = x + a.float()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            m = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x + m.float()


class AutocastLM(nn.Module):
    def __init__(self, d=D, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(_AutocastBlock(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, V)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))  # float32 head outside autocast


def autocast_region_lm():
    """``with torch.autocast("cpu", dtype=torch.bfloat16):`` around each block's attention and MLP inside the
    forward, residual stream / norms / head in float32 (``.float()`` after each region)."""
    g = _gen()
    return AutocastLM(), (_ids(g),), (_ids(g),)


# ---------------------------------------------------------------- SDPA with a boolean left-padding mask
class _BoolMaskBlock(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv = nn.Linear(d, (heads + 2 * kv_heads) * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 2 * 96, bias=False), nn.Linear(96, d, bias=False)

    def forward(self, x, cos, sin, allowed):
        b, t, d = x.shape
        q, k, v = torch.split(self.qkv(self.n1(x)), [self.h * self.hd, self.kv * self.hd, self.kv * self.hd], -1)
        q = q.unflatten(-1, (self.h, self.hd)).transpose(1, 2)
        k = k.unflatten(-1, (self.kv, self.hd)).transpose(1, 2)
        v = v.unflatten(-1, (self.kv, self.hd)).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        gate, up = self.up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class LeftPadLM(nn.Module):
    def __init__(self, d=D, heads=4, kv_heads=2, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d, padding_idx=0)
        self.blocks = nn.ModuleList(_BoolMaskBlock(d, heads, kv_heads) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, V, bias=False)
        hd = d // heads
        self.register_buffer("inv", 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd), persistent=False)

    def forward(self, ids, attention_mask):
        t = ids.shape[1]
        pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # left padding: positions start at 0
        ang = pos[..., None].float() * self.inv
        ang = torch.cat([ang, ang], -1)
        cos, sin = ang.cos()[:, None], ang.sin()[:, None]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        allowed = causal[None, None] & attention_mask.bool()[:, None, None, :]
        allowed = allowed | torch.eye(t, dtype=torch.bool)  # a padded query still sees itself (no NaN rows)
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, cos, sin, allowed)
        return self.head(self.norm(x))


def sdpa_bool_left_pad():
    """SDPA with a boolean ``attn_mask`` (causal & left-padding keys, eye kept) and ``enable_gqa=True``; qkv by
    ``torch.split`` + ``unflatten``, positions from the mask's ``cumsum``; -100 labels on the padding."""
    g = _gen()
    ids = _ids(g).clamp(min=1)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, :5] = 0
    ids = ids.masked_fill(mask == 0, 0)
    labels = _ids(g).masked_fill(mask == 0, -100)
    return LeftPadLM(), (ids, mask), (labels,), _lm_loss


# ---------------------------------------------------------------- bf16 body with fp32 norms
class _Fp32RMSNorm(nn.Module):
    """Kept in float32 in a bf16 model: normalises in float32, returns the input's dtype."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (h * self.weight).to(x.dtype)


class _MixedBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.n1, self.n2 = _Fp32RMSNorm(d), _Fp32RMSNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.gate_up, self.down = nn.Linear(d, 192, bias=False), nn.Linear(96, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).chunk(3, -1)
        q, k, v = (z.view(b, t, self.h, -1).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        gate, up = self.gate_up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class MixedDtypeLM(nn.Module):
    def __init__(self, d=D, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(_MixedBlock(d, heads) for _ in range(layers))
        self.norm, self.head = _Fp32RMSNorm(d), nn.Linear(d, V, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def bf16_body_fp32_norms():
    """``model.to(torch.bfloat16)`` then every norm module ``.float()`` again (mixed-dtype parameters): the norms
    compute in float32 and return bf16."""
    g = _gen()
    model = MixedDtypeLM().to(torch.bfloat16)
    for m in model.modules():
        if isinstance(m, _Fp32RMSNorm):
            m.float()
    return model, (_ids(g),), (_ids(g),), _lm_loss


# ---------------------------------------------------------------- parameter-efficient training
class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update ``B @ A`` scaled by alpha / r."""

    def __init__(self, base: nn.Linear, r: int = 4, alpha: float = 8.0):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        if self.base.bias is not None:
            self.base.bias.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.randn(base.out_features, r) * 0.01)  # as if resumed (zeros at start)
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


def _inject_lora(model: nn.Module, names=("wq", "wv")) -> nn.Module:
    for p in model.parameters():
        p.requires_grad_(False)
    for mod in list(model.modules()):
        for n in names:
            child = getattr(mod, n, None)
            if isinstance(child, nn.Linear):
                setattr(mod, n, LoRALinear(child))
    return model


def lora_hand_titan():
    """Hand-written LoRA (``LoRALinear`` wrapping frozen ``nn.Linear``, ``x @ A.t() @ B.t() * alpha/r``) injected
    by ``setattr`` on wq / wv of the torchtitan LLaMA; every other parameter ``requires_grad_(False)``."""
    g = _gen()
    model = _inject_lora(TitanLlama())
    return model, (_ids(g),), (_ids(g),), _lm_loss


class PromptTuned(nn.Module):
    """A frozen LM with 4 trainable soft-prompt vectors concatenated before the token embeddings."""

    def __init__(self, lm: QwenHand, n_prompt: int = 4):
        super().__init__()
        self.lm, self.n = lm, n_prompt
        for p in self.lm.parameters():
            p.requires_grad_(False)
        self.prompt = nn.Parameter(lm.embed_tokens.weight[:n_prompt].clone() + 0.01)

    def forward(self, ids):
        lm = self.lm
        x = torch.cat([self.prompt.expand(ids.shape[0], -1, -1), lm.embed_tokens(ids)], dim=1)
        t = x.shape[1]
        freqs = torch.arange(t, dtype=torch.float32)[:, None] * lm.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = torch.full((t, t), float("-inf")).triu(1)[None, None]
        for layer in lm.layers:
            x = layer(x, cos, sin, mask)
        return F.linear(lm.norm(x), lm.embed_tokens.weight)[:, self.n:]


def prompt_tuning_frozen():
    """Prompt tuning: a frozen hand Qwen whose only trainable tensor is a soft prompt ``torch.cat``-ed before the
    embeddings; the prompt positions' logits sliced off."""
    g = _gen()
    return PromptTuned(QwenHand()), (_ids(g),), (_ids(g),), _lm_loss


class _EncBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, attn_mask=None, scale=None):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.h, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class BitFitEncoder(nn.Module):
    def __init__(self, d=D, heads=4, layers=2, classes=3):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.pos = nn.Parameter(torch.randn(1, T, d) * 0.02)
        self.blocks = nn.ModuleList(_EncBlock(d, heads) for _ in range(layers))
        self.ln, self.cls = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, ids):
        x = self.emb(ids) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.cls(self.ln(x)[:, 0])


def bitfit_bias_only():
    """BitFit: ``p.requires_grad_(name.endswith("bias"))`` over ``named_parameters`` (only biases train, the
    classifier too) on a pre-LN SDPA encoder classifying from token 0."""
    g = _gen()
    model = BitFitEncoder()
    for n, p in model.named_parameters():
        p.requires_grad_(n.endswith("bias") or n.startswith("cls."))
    return model, (_ids(g),), (torch.randint(0, 3, (B,), generator=g),)


# ---------------------------------------------------------------- MoE
class _OneHotMoE(nn.Module):
    """Top-2 by ``torch.topk``, combine weights by ``F.one_hot`` + ``einsum``, dense experts by ``einsum``;
    returns the output, a Switch load-balancing loss and the router z-loss."""

    def __init__(self, d, hidden, experts=4, k=2):
        super().__init__()
        self.e, self.k = experts, k
        self.router = nn.Linear(d, experts, bias=False)
        self.w_gate = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w_up = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w_down = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)

    def forward(self, x):  # [S, D]
        logits = self.router(x)
        probs = logits.softmax(-1)
        topw, topi = torch.topk(probs, self.k, dim=-1)
        topw = topw / topw.sum(-1, keepdim=True)
        onehot = F.one_hot(topi, self.e).to(x.dtype)  # [S, k, E]
        combine = torch.einsum("sk,ske->se", topw, onehot)
        h = F.silu(torch.einsum("sd,edh->seh", x, self.w_gate)) * torch.einsum("sd,edh->seh", x, self.w_up)
        y = torch.einsum("seh,ehd,se->sd", h, self.w_down, combine)
        frac = onehot.sum(1).mean(0)  # tokens routed to each expert
        aux = self.e * (frac * probs.mean(0)).sum() / self.k
        z = torch.logsumexp(logits, -1).pow(2).mean()
        return y, aux, z


class OneHotMoELM(nn.Module):
    def __init__(self, d=D, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.norms = nn.ModuleList(nn.RMSNorm(d) for _ in range(layers))
        self.moes = nn.ModuleList(_OneHotMoE(d, 48) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, V, bias=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids).flatten(0, 1)
        aux = z = x.new_zeros(())
        for norm, moe in zip(self.norms, self.moes):
            y, a, zz = moe(norm(x))
            x, aux, z = x + y, aux + a, z + zz
        return {"logits": self.head(self.norm(x)).view(b, t, -1), "aux_loss": aux, "router_z_loss": z}


def _moe_dict_loss(out, labels):
    return _lm_loss(out["logits"], labels) + 0.01 * out["aux_loss"] + 1e-3 * out["router_z_loss"]


def moe_onehot_einsum_dict():
    """Top-2 MoE via ``torch.topk`` + ``F.one_hot`` + ``einsum`` (SwiGLU experts computed densely), returning a
    dict {logits, aux_loss, router_z_loss}; the loss callable adds both auxiliary terms."""
    g = _gen()
    return OneHotMoELM(), (_ids(g),), (_ids(g),), _moe_dict_loss


class _Expert(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(hidden, d, bias=False), \
            nn.Linear(d, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class CapacityLoopMoE(nn.Module):
    """Token-choice top-2 gates; each expert (a loop over ``nn.ModuleList``) takes its ``capacity`` highest-gated
    tokens by ``topk`` (fixed shapes), runs on ``x[idx]``, and adds back with ``index_add``."""

    def __init__(self, d=D, hidden=48, experts=4, k=2, capacity=8):
        super().__init__()
        self.k, self.cap = k, capacity
        self.emb = nn.Embedding(V, d)
        self.norm1 = nn.LayerNorm(d)
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(_Expert(d, hidden) for _ in range(experts))
        self.norm2, self.head = nn.LayerNorm(d), nn.Linear(d, V)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids).reshape(b * t, -1)
        h = self.norm1(x)
        probs = self.gate(h).softmax(-1)
        topw, topi = probs.topk(self.k, -1)
        gates = torch.zeros_like(probs).scatter(1, topi, topw)  # [S, E], zero where not chosen
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            w, idx = gates[:, e].topk(self.cap)  # the expert's top tokens (weight 0 if it was not chosen)
            out = out.index_add(0, idx, expert(h[idx]) * w[:, None])
        return self.head(self.norm2(x + out)).view(b, t, -1)


def moe_capacity_loop():
    """MoE as a Python loop over ``nn.ModuleList`` experts, each taking a fixed capacity of tokens by ``topk`` of
    its gate column, ``h[idx]`` gather, ``index_add`` back (24 tokens, capacity 8, top-2 of 4)."""
    g = _gen()
    return CapacityLoopMoE(), (_ids(g),), (_ids(g),)


class ScatterDispatchMoE(nn.Module):
    """GShard top-2 with capacity: slots from a ``cumsum`` over the flattened (choice-major) one-hot mask,
    tokens ``scatter``-ed into an [E * C + 1, D] buffer (the last row takes the dropped ones), experts by
    ``bmm`` on the [E, C, D] view, outputs read back with ``torch.gather`` and weighted."""

    def __init__(self, d=D, hidden=48, experts=4, k=2, capacity=6):
        super().__init__()
        self.e, self.k, self.cap = experts, k, capacity
        self.emb = nn.Embedding(V, d)
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, V)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids).reshape(b * t, -1)
        s, d = x.shape
        probs = self.router(x).softmax(-1)
        topw, topi = probs.topk(self.k, -1)  # [S, k]
        mask = F.one_hot(topi.t().reshape(-1), self.e)  # [k*S, E], first choices first
        pos = (mask.cumsum(0) - 1)[torch.arange(self.k * s), topi.t().reshape(-1)]  # place in the queue
        keep = pos < self.cap
        slot = torch.where(keep, topi.t().reshape(-1) * self.cap + pos, torch.full_like(pos, self.e * self.cap))
        buf = x.new_zeros(self.e * self.cap + 1, d)
        src = x.repeat(self.k, 1)
        buf = buf.scatter(0, slot[:, None].expand(-1, d), src)
        xe = buf[:-1].view(self.e, self.cap, d)
        ye = torch.bmm(F.gelu(torch.bmm(xe, self.w1)), self.w2).reshape(self.e * self.cap, d)
        ye = torch.cat([ye, ye.new_zeros(1, d)], 0)
        back = torch.gather(ye, 0, slot[:, None].expand(-1, d)).view(self.k, s, d)
        w = (topw.t() * keep.view(self.k, s).to(x.dtype))[..., None]
        y = (back * w).sum(0)
        return self.head(self.norm(x + y)).view(b, t, -1)


def moe_scatter_gather_capacity():
    """GShard-style top-2 MoE with capacity 6: ``cumsum`` slots, ``scatter`` into a buffer with a drop row,
    ``bmm`` experts, ``torch.gather`` back; dropped tokens pass through the residual only."""
    g = _gen()
    return ScatterDispatchMoE(), (_ids(g),), (_ids(g),)


# ---------------------------------------------------------------- T5 relative bias into SDPA
class T5BiasEncoder(nn.Module):
    """An encoder whose T5 relative-position bias (bucket ids precomputed into a buffer, one ``nn.Embedding``
    shared by every layer) plus a key-padding ``finfo.min`` mask is SDPA's float ``attn_mask``, ``scale=1.0``."""

    def __init__(self, d=D, heads=4, layers=2, classes=3, buckets=16, max_dist=32):
        super().__init__()
        self.emb = nn.Embedding(V, d, padding_idx=0)
        self.rel = nn.Embedding(buckets, heads)
        self.blocks = nn.ModuleList(_EncBlock(d, heads) for _ in range(layers))
        self.ln, self.cls = nn.LayerNorm(d), nn.Linear(d, classes)
        rel = torch.arange(T)[None, :] - torch.arange(T)[:, None]
        half = buckets // 2
        sign = (rel > 0).long() * half
        n = rel.abs()
        exact = half // 2
        large = exact + (torch.log(n.float().clamp(min=1) / exact) / math.log(max_dist / exact)
                         * (half - exact)).long()
        large = large.clamp(max=half - 1)
        self.register_buffer("bucket", sign + torch.where(n < exact, n, large), persistent=False)

    def forward(self, ids, pad):
        bias = self.rel(self.bucket).permute(2, 0, 1)[None]  # [1, H, T, T]
        mask = bias.masked_fill(pad[:, None, None, :], torch.finfo(bias.dtype).min)
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, attn_mask=mask, scale=1.0)
        keep = (~pad)[..., None].to(x.dtype)
        return self.cls((self.ln(x) * keep).sum(1) / keep.sum(1))


def t5_bias_sdpa_mask():
    """T5 bucketed relative bias (buffer of bucket ids, shared ``nn.Embedding``) + padding as SDPA's float
    ``attn_mask`` with ``scale=1.0``; masked mean pooling, 3 classes."""
    g = _gen()
    pad = torch.arange(T)[None] >= torch.tensor([T, 7])[:, None]
    ids = _ids(g).clamp(min=1).masked_fill(pad, 0)
    return T5BiasEncoder(), (ids, pad), (torch.randint(0, 3, (B,), generator=g),)


# ---------------------------------------------------------------- CNNs
def _drop_path(x, p: float = 0.0, training: bool = False):
    if p == 0.0 or not training:
        return x
    keep = 1 - p
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
    return x * mask / keep


class _BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, cout, stride, drop):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.drop = drop

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out = _drop_path(out, self.drop, self.training)
        out += identity
        out = self.relu(out)
        return out


class HandResNet(nn.Module):
    def __init__(self, widths=(16, 32, 64), classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            layers += [_BasicBlock(cin, w, 1 if i == 0 else 2, 0.0), _BasicBlock(w, w, 1, 0.0)]
            cin = w
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, _BasicBlock):
                nn.init.constant_(m.bn2.weight, 0.1)  # near zero-init residual

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet_inplace_add():
    """A torchvision-style CIFAR ResNet by hand: ``nn.ReLU(inplace=True)`` reused, ``out += identity``, 1x1
    downsample shortcuts, a drop-path function returning ``x`` at rate 0, ``torch.flatten(avgpool(x), 1)``."""
    g = _gen()
    return HandResNet(), (torch.randn(B, 3, 32, 32, generator=g),), (torch.randint(0, 10, (B,), generator=g),)


def _make_divisible(v, divisor=8):
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


class _SELinear(nn.Module):
    def __init__(self, c, reduction=4):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(c, _make_divisible(c // reduction)), nn.ReLU(inplace=True),
                                nn.Linear(_make_divisible(c // reduction), c), nn.Sigmoid())

    def forward(self, x):
        b, c, _, _ = x.size()
        y = F.adaptive_avg_pool2d(x, 1).view(b, c)
        return x * self.fc(y).view(b, c, 1, 1).expand_as(x)


class _DWSep(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.dw = nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                                nn.ReLU6(inplace=True))
        self.se = _SELinear(cin)
        self.pw = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))

    def forward(self, x):
        return self.pw(self.se(self.dw(x)))


class MobileNetSE(nn.Module):
    def __init__(self, width_mult=0.75, classes=10):
        super().__init__()
        cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2)]
        c0 = _make_divisible(32 * width_mult)
        self.stem = nn.Sequential(nn.Conv2d(3, c0, 3, 2, 1, bias=False), nn.BatchNorm2d(c0), nn.ReLU6(inplace=True))
        blocks, cin = [], c0
        for _, cout, s in cfg:
            cout = _make_divisible(cout * width_mult)
            blocks.append(_DWSep(cin, cout, s))
            cin = cout
        self.features = nn.Sequential(*blocks)
        self.classifier = nn.Sequential(nn.Dropout(0.0), nn.Linear(cin, classes))

    def forward(self, x):
        x = self.features(self.stem(x))
        return self.classifier(x.mean([2, 3]))


def mobilenet_dwsep_se():
    """MobileNetV1 by hand: depthwise-separable blocks (``groups=cin``), ReLU6(inplace), ``_make_divisible``
    widths, squeeze-excite through Linear layers on a ``view(b, c)`` and ``expand_as``; label smoothing 0.1."""
    g = _gen()
    return MobileNetSE(), (torch.randn(B, 3, 32, 32, generator=g),), (torch.randint(0, 10, (B,), generator=g),), \
        lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1)


class _DenseLayer(nn.Sequential):
    def __init__(self, cin, growth):
        super().__init__(nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, growth, 3, padding=1, bias=True))


class _DenseBlock(nn.Module):
    def __init__(self, cin, growth, n, upsample=False):
        super().__init__()
        self.upsample = upsample
        self.layers = nn.ModuleList(_DenseLayer(cin + i * growth, growth) for i in range(n))

    def forward(self, x):
        new = []
        for layer in self.layers:
            out = layer(x)
            x = torch.cat([x, out], 1)
            new.append(out)
        return torch.cat(new, 1) if self.upsample else x


class Tiramisu(nn.Module):
    """FC-DenseNet: dense blocks, transition down (BN-ReLU-1x1-maxpool), transition up (ConvTranspose2d) with
    the skip concatenated, the up-path blocks returning only their new features."""

    def __init__(self, growth=6, n=2, classes=5):
        super().__init__()
        self.first = nn.Conv2d(3, 16, 3, padding=1)
        c = 16
        self.down_blocks, self.tds, skips = nn.ModuleList(), nn.ModuleList(), []
        for _ in range(2):
            self.down_blocks.append(_DenseBlock(c, growth, n))
            c += growth * n
            skips.append(c)
            self.tds.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c, 1),
                                          nn.MaxPool2d(2)))
        self.bottleneck = _DenseBlock(c, growth, n, upsample=True)
        prev = growth * n
        self.tus, self.up_blocks = nn.ModuleList(), nn.ModuleList()
        for skip in reversed(skips):
            self.tus.append(nn.ConvTranspose2d(prev, prev, 3, stride=2, padding=1, output_padding=1))
            self.up_blocks.append(_DenseBlock(prev + skip, growth, n, upsample=True))
            prev = growth * n
        self.final = nn.Conv2d(prev, classes, 1)

    def forward(self, x):
        x = self.first(x)
        skips = []
        for blk, td in zip(self.down_blocks, self.tds):
            x = blk(x)
            skips.append(x)
            x = td(x)
        x = self.bottleneck(x)
        for tu, blk in zip(self.tus, self.up_blocks):
            x = blk(torch.cat([tu(x), skips.pop()], 1))
        return self.final(x)


def tiramisu_seg_ignore():
    """FC-DenseNet segmentation (``torch.cat`` feature growth, ConvTranspose2d up, skip concat): ``F.cross_entropy``
    on [B, C, H, W] logits with ``ignore_index=255`` on a border and ``label_smoothing=0.05``."""
    g = _gen()
    y = torch.randint(0, 5, (B, 32, 32), generator=g)
    y[:, :2] = 255
    return Tiramisu(), (torch.randn(B, 3, 32, 32, generator=g),), (y,), \
        lambda out, t: F.cross_entropy(out, t, ignore_index=255, label_smoothing=0.05)


class SegNetSmall(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                 nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, classes, 1))

    def forward(self, x):
        return self.dec(self.enc(x))


def seg_ce_sum_weighted():
    """Per-pixel ``F.cross_entropy`` on [B, C, H, W] with class ``weight`` and ``reduction="sum"`` divided by the
    batch size (a user's hand normalisation), nn.Upsample bilinear decoder."""
    g = _gen()
    w = torch.tensor([0.5, 1.0, 2.0, 1.5])
    return SegNetSmall(), (torch.randn(B, 3, 32, 32, generator=g),), \
        (torch.randint(0, 4, (B, 32, 32), generator=g),), \
        lambda out, t: F.cross_entropy(out, t, weight=w, reduction="sum") / out.shape[0]


class AutocastCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.Conv2d(16, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 32, 3, 2, 1, groups=4, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            h = self.body(x)
            h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return self.fc(h.float())


def autocast_cnn_bn():
    """A conv / BatchNorm / grouped-conv body under ``torch.autocast("cpu", dtype=torch.bfloat16)`` inside the
    forward, the classifier outside it in float32."""
    g = _gen()
    return AutocastCNN(), (torch.randn(B, 3, 32, 32, generator=g),), (torch.randint(0, 10, (B,), generator=g),)


# ---------------------------------------------------------------- RNNs
class CharRNN(nn.Module):
    def __init__(self, vocab=96, d=48, layers=2):
        super().__init__()
        self.encoder = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, d, layers, batch_first=True)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, x, h0, c0):
        out, (h, c) = self.rnn(self.encoder(x), (h0, c0))
        return F.linear(out, self.encoder.weight, self.decoder_bias), h, c


def char_rnn_state_in():
    """A char-RNN: Embedding + 2-layer ``nn.LSTM(batch_first=True)`` given (h0, c0) as inputs (carried over from a
    previous batch), decoder tied by ``F.linear(out, emb.weight, bias)``; returns (logits, h, c)."""
    g = _gen()
    x = torch.randint(0, 96, (B, 16), generator=g)
    h0, c0 = torch.randn(2, B, 48, generator=g) * 0.1, torch.randn(2, B, 48, generator=g) * 0.1
    return CharRNN(), (x, h0, c0), (torch.randint(0, 96, (B, 16), generator=g),), \
        lambda out, y: F.cross_entropy(out[0].transpose(1, 2), y)


class BiGRUClassifier(nn.Module):
    def __init__(self, d=32, hidden=32, classes=4):
        super().__init__()
        self.emb = nn.Embedding(V, d, padding_idx=0)
        self.gru = nn.GRU(d, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, ids):
        _, h_n = self.gru(self.emb(ids))  # [layers * 2, B, H]
        h = torch.cat([h_n[-2], h_n[-1]], dim=1)  # last layer, forward and backward
        return self.fc(h)


def bigru_final_hidden():
    """A 2-layer bidirectional ``nn.GRU`` classifier reading only ``h_n``: ``torch.cat([h_n[-2], h_n[-1]], 1)``."""
    g = _gen()
    return BiGRUClassifier(), (_ids(g, 14),), (torch.randint(0, 4, (B,), generator=g),)


class BahdanauSeq2Seq(nn.Module):
    def __init__(self, vocab=64, d=32, hidden=32):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(vocab, d, padding_idx=0), nn.Embedding(vocab, d, padding_idx=0)
        self.encoder = nn.GRU(d, hidden, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.W_enc, self.W_dec = nn.Linear(2 * hidden, hidden, bias=False), nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, 1, bias=False)
        self.cell = nn.GRUCell(d + 2 * hidden, hidden)
        self.out = nn.Linear(hidden + 2 * hidden + d, vocab)

    def forward(self, src, tgt_in, src_pad):
        enc, h_n = self.encoder(self.src_emb(src))  # [B, S, 2H]
        s = torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))
        keys = self.W_enc(enc)
        emb = self.tgt_emb(tgt_in)
        logits = []
        for i in range(tgt_in.shape[1]):
            e = self.v(torch.tanh(keys + self.W_dec(s)[:, None])).squeeze(-1)
            a = e.masked_fill(src_pad, float("-inf")).softmax(-1)
            ctx = torch.bmm(a[:, None], enc).squeeze(1)
            s = self.cell(torch.cat([emb[:, i], ctx], -1), s)
            logits.append(self.out(torch.cat([s, ctx, emb[:, i]], -1)))
        return torch.stack(logits, dim=1)


def seq2seq_bahdanau():
    """Bahdanau seq2seq: bi-GRU encoder, ``nn.GRUCell`` decoder unrolled 8 steps with additive attention
    (``masked_fill(-inf)`` on source padding), ``torch.stack`` of logits; CE ``ignore_index=0`` on [B, V, T]."""
    g = _gen()
    src = torch.randint(1, 64, (B, T), generator=g)
    pad = torch.arange(T)[None] >= torch.tensor([T, 9])[:, None]
    src = src.masked_fill(pad, 0)
    tgt = torch.randint(1, 64, (B, 9), generator=g)
    tgt[1, 6:] = 0
    return BahdanauSeq2Seq(), (src, tgt[:, :-1], pad), (tgt[:, 1:],), \
        lambda out, y: F.cross_entropy(out.permute(0, 2, 1), y, ignore_index=0)


class _ConvLSTMCell(nn.Module):
    def __init__(self, cin, hidden, k=3):
        super().__init__()
        self.hidden = hidden
        self.conv = nn.Conv2d(cin + hidden, 4 * hidden, k, padding=k // 2)

    def forward(self, x, state):
        h, c = state
        i, f, o, g = torch.split(self.conv(torch.cat([x, h], dim=1)), self.hidden, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class ConvLSTMNet(nn.Module):
    def __init__(self, cin=1, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.cell1, self.cell2 = _ConvLSTMCell(cin, hidden), _ConvLSTMCell(hidden, hidden)
        self.head = nn.Conv2d(hidden, cin, 1)

    def forward(self, frames):  # [B, T, C, H, W]
        b, t, _, hh, ww = frames.shape
        s1 = s2 = (frames.new_zeros(b, self.hidden, hh, ww), frames.new_zeros(b, self.hidden, hh, ww))
        for i in range(t):
            s1 = self.cell1(frames[:, i], s1)
            s2 = self.cell2(s1[0], s2)
        return torch.sigmoid(self.head(s2[0]))


def conv_lstm_next_frame():
    """A 2-layer ConvLSTM (one conv on ``cat([x, h])`` split into 4 gates) over 5 frames of 16x16, zero states by
    ``new_zeros``, predicting the next frame; ``F.binary_cross_entropy`` on sigmoid outputs."""
    g = _gen()
    frames = torch.rand(B, 5, 1, 16, 16, generator=g)
    return ConvLSTMNet(), (frames,), (torch.rand(B, 1, 16, 16, generator=g),), \
        lambda out, y: F.binary_cross_entropy(out, y)


class ResidualLSTMStack(nn.Module):
    def __init__(self, feat=10, d=32, layers=3, classes=6):
        super().__init__()
        self.inp = nn.Linear(feat, d)
        self.lstms = nn.ModuleList(nn.LSTM(d, d, batch_first=True) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        h = self.inp(x)
        for lstm, norm in zip(self.lstms, self.norms):
            y, _ = lstm(norm(h))
            h = h + y
        return self.out(h)  # a label per step


def lstm_residual_ln_tagger():
    """Three single-layer ``nn.LSTM`` modules with pre-LayerNorm and residual adds between them (GNMT-style), a
    tag per step: [B, T, C] logits against [B, T] (named cross_entropy)."""
    g = _gen()
    return ResidualLSTMStack(), (torch.randn(B, 14, 10, generator=g),), (torch.randint(0, 6, (B, 14), generator=g),)


# ---------------------------------------------------------------- Swin on SDPA, masked_fill, padding
class _SwinSdpaBlock(nn.Module):
    def __init__(self, d, heads, window, shift):
        super().__init__()
        self.h, self.w, self.shift = heads, window, shift
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.relative_position_bias_table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += window - 1
        rel[:, :, 1] += window - 1
        rel[:, :, 0] *= 2 * window - 1
        self.register_buffer("relative_position_index", rel.sum(-1), persistent=False)

    def _mask(self, hp, wp, device):
        img = torch.zeros((1, hp, wp, 1), device=device)
        cnt = 0
        for hs in (slice(0, -self.w), slice(-self.w, -self.shift), slice(-self.shift, None)):
            for ws in (slice(0, -self.w), slice(-self.w, -self.shift), slice(-self.shift, None)):
                img[:, hs, ws, :] = cnt
                cnt += 1
        mw = img.view(1, hp // self.w, self.w, wp // self.w, self.w, 1).permute(0, 1, 3, 2, 4, 5)
        mw = mw.reshape(-1, self.w * self.w)
        m = mw.unsqueeze(1) - mw.unsqueeze(2)
        return m.masked_fill(m != 0, float(-100.0)).masked_fill(m == 0, float(0.0))

    def forward(self, x):
        b, hgt, wid, c = x.shape
        shortcut = x
        x = self.norm1(x)
        pad_b, pad_r = (self.w - hgt % self.w) % self.w, (self.w - wid % self.w) % self.w
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        hp, wp = hgt + pad_b, wid + pad_r
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = x.view(b, hp // self.w, self.w, wp // self.w, self.w, c).permute(0, 1, 3, 2, 4, 5)
        win = win.reshape(-1, self.w * self.w, c)
        n = win.shape[1]
        q, k, v = self.qkv(win).reshape(-1, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(n, n, -1)
        bias = bias.permute(2, 0, 1).contiguous()[None]  # [1, H, N, N]
        if self.shift:
            nw = (hp // self.w) * (wp // self.w)
            bias = (bias[:, None] + self._mask(hp, wp, x.device)[None, :, None]).expand(b, nw, -1, -1, -1)
            bias = bias.reshape(-1, self.h, n, n)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        y = self.proj(y.transpose(1, 2).reshape(-1, n, c))
        y = y.view(b, hp // self.w, wp // self.w, self.w, self.w, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
        if self.shift:
            y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
        y = y[:, :hgt, :wid, :].contiguous()
        x = shortcut + y
        return x + self.mlp(self.norm2(x))


class SwinSdpa(nn.Module):
    def __init__(self, d=32, classes=5):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, d, 5, 5)  # 30 px -> 6x6 tokens, padded to 8x8 for windows of 4
        self.pos_norm = nn.LayerNorm(d)
        self.blocks = nn.Sequential(_SwinSdpaBlock(d, 2, 4, 0), _SwinSdpaBlock(d, 2, 4, 2))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, img):
        x = self.pos_norm(self.patch_embed(img).permute(0, 2, 3, 1))
        x = self.blocks(x)
        return self.head(self.norm(x).flatten(1, 2).mean(1))


def swin_sdpa_maskfill_pad():
    """A hand Swin block pair on SDPA: 6x6 tokens ``F.pad``-ded to 8x8, ``torch.roll`` shift, the shift mask
    built with ``masked_fill(m != 0, -100)`` in the forward, bias-table gather + mask as SDPA's float mask."""
    g = _gen()
    return SwinSdpa(), (torch.randn(B, 3, 30, 30, generator=g),), (torch.randint(0, 5, (B,), generator=g),)


# ---------------------------------------------------------------- loss conventions
class DictLossClassifier(nn.Module):
    """Returns ``{"loss": ..., "logits": ...}`` from forward(x, labels) as Hugging Face-style user code does."""

    def __init__(self, feat=20, classes=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(feat, 64), nn.SiLU(), nn.LayerNorm(64), nn.Linear(64, 64), nn.SiLU())
        self.head = nn.Linear(64, classes)

    def forward(self, x, labels=None):
        logits = self.head(self.net(x))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels, label_smoothing=0.1)
        return out


def dict_loss_output():
    """A model whose forward(x, labels) returns ``{"logits", "loss"}`` (the loss computed inside, label smoothing),
    no targets: the loss callable is ``lambda out: out["loss"]``."""
    g = _gen()
    return DictLossClassifier(), (torch.randn(8, 20, generator=g), torch.randint(0, 6, (8,), generator=g)), (), \
        lambda out: out["loss"]


class MLMHand(nn.Module):
    """A BERT-style MLM by hand: token + segment + position embeddings, SDPA encoder with a boolean key-padding
    mask, a GELU transform, and a decoder tied to the word embedding with its own bias parameter."""

    def __init__(self, d=D, heads=4, layers=2):
        super().__init__()
        self.word, self.seg, self.pos = nn.Embedding(V, d, padding_idx=0), nn.Embedding(2, d), nn.Embedding(T, d)
        self.emb_ln = nn.LayerNorm(d)
        nn.init.normal_(self.word.weight, std=0.02)
        self.blocks = nn.ModuleList(_EncBlock(d, heads) for _ in range(layers))
        self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
        self.bias = nn.Parameter(torch.zeros(V))

    def forward(self, ids, segments, keep):
        x = self.emb_ln(self.word(ids) + self.seg(segments) + self.pos(torch.arange(ids.shape[1])))
        mask = keep[:, None, None, :]  # True = attend
        for blk in self.blocks:
            x = blk(x, attn_mask=mask)
        return self.transform(x) @ self.word.weight.t() + self.bias


def mlm_tied_bias_ignore():
    """Hand BERT MLM: segment + position embeddings, SDPA with a boolean key mask, decoder ``@ word.weight.t() +
    bias``; labels -100 except at 3 masked positions per row (named cross_entropy on [B, T, V])."""
    g = _gen()
    ids = _ids(g).clamp(min=1)
    keep = torch.arange(T)[None] < torch.tensor([T, 10])[:, None]
    ids = ids.masked_fill(~keep, 0)
    seg = (torch.arange(T) >= 6).long()[None].expand(B, -1).contiguous()
    labels = torch.full((B, T), -100)
    labels[:, [1, 4, 8]] = ids[:, [1, 4, 8]]
    ids = ids.clone()
    ids[:, [1, 4, 8]] = 3  # the [MASK] id
    return MLMHand(), (ids, seg, keep), (labels,), _lm_loss


# ---------------------------------------------------------------- more decoder idioms
class _Conv1D(nn.Module):
    """GPT-2's Conv1D: a [in, out] weight applied by ``torch.addmm(bias, x.view(-1, in), weight)``."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class _GPT2Block(nn.Module):
    def __init__(self, d, heads, t):
        super().__init__()
        self.h = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = _Conv1D(3 * d, d), _Conv1D(d, d)
        self.c_fc, self.mlp_proj = _Conv1D(4 * d, d), _Conv1D(d, 4 * d)
        self.register_buffer("bias", torch.tril(torch.ones(t, t, dtype=torch.bool)).view(1, 1, t, t),
                             persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, -1).permute(0, 2, 1, 3) for z in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5, dtype=q.dtype)
        w = torch.where(self.bias[:, :, :t, :t], w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        a = torch.matmul(nn.functional.softmax(w, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        x = x + self.c_proj(a.view(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2Addmm(nn.Module):
    def __init__(self, d=D, heads=4, layers=2, t=16):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(t, d)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)
        self.h = nn.ModuleList(_GPT2Block(d, heads, t) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))[None]
        for blk in self.h:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.T


def gpt2_conv1d_addmm():
    """GPT-2 by hand: Conv1D as ``torch.addmm(bias, x.view(-1, nx), w)`` with [in, out] weights, a bool tril buffer
    through ``torch.where(mask, w, finfo.min)``, tanh GELU, ``@ wte.weight.T`` head; 16 tokens, shifted labels."""
    g = _gen()
    ids = _ids(g, 16)
    return GPT2Addmm(), (ids,), (ids.clone(),), _shifted_lm_loss


class _CkptBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.w1, self.w2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 192, bias=False), nn.Linear(96, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = F.rms_norm(x, (d,), self.w1, eps=1e-6)
        q, k, v = self.qkv(h).view(b, t, 3, self.h, -1).permute(2, 0, 3, 1, 4)
        x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
        gate, up = self.up(F.rms_norm(x, (d,), self.w2, eps=1e-6)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class CheckpointedLM(nn.Module):
    def __init__(self, d=D, heads=4, layers=3):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(_CkptBlock(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, V, bias=False)

    def forward(self, ids):
        from torch.utils.checkpoint import checkpoint
        x = self.emb(ids)
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False)
        return self.head(F.rms_norm(x, (x.shape[-1],)))


def checkpoint_rms_norm_lm():
    """A hand LM whose blocks run under ``torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)``,
    norms by functional ``F.rms_norm`` (with and without weight), qkv via ``view(...).permute(2, 0, 3, 1, 4)``."""
    g = _gen()
    return CheckpointedLM(), (_ids(g),), (_ids(g),)


class HalfCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.c2, self.bn2 = nn.Conv2d(16, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.c1(x).float()).to(x.dtype))
        x = F.relu(self.bn2(self.c2(x).float()).to(x.dtype))
        return self.fc(x.mean((2, 3)))


def half_cnn_fp32_bn():
    """``model.half()`` then the BatchNorm layers ``.float()`` again (the old apex O2 recipe): convs in fp16, BN
    on ``.float()`` activations cast back; fp16 input, loss on ``out.float()``."""
    g = _gen()
    model = HalfCNN().half()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.float()
    return model, (torch.randn(B, 3, 32, 32, generator=g).half(),), (torch.randint(0, 10, (B,), generator=g),), \
        lambda out, y: F.cross_entropy(out.float(), y)


class _XAttn(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)

    def forward(self, x, mem, mask=None, causal=False):
        b, tq, d = x.shape
        q = self.q(x).view(b, tq, self.h, -1).transpose(1, 2)
        k, v = self.kv(mem).view(b, mem.shape[1], 2, self.h, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return self.o(y.transpose(1, 2).reshape(b, tq, d))


class EncDecHand(nn.Module):
    """Pre-LN encoder-decoder by hand with SDPA: encoder self-attention and decoder cross-attention under a
    boolean source key mask, decoder self-attention ``is_causal``; one embedding shared by both sides and the head."""

    def __init__(self, vocab=128, d=D, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        nn.init.normal_(self.emb.weight, std=d ** -0.5)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        self.enc = nn.ModuleList(nn.ModuleDict(dict(ln1=nn.LayerNorm(d), att=_XAttn(d, heads), ln2=nn.LayerNorm(d),
                                                    ff=nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(),
                                                                     nn.Linear(2 * d, d))))
                                 for _ in range(layers))
        self.dec = nn.ModuleList(nn.ModuleDict(dict(ln1=nn.LayerNorm(d), att=_XAttn(d, heads), ln2=nn.LayerNorm(d),
                                                    cross=_XAttn(d, heads), ln3=nn.LayerNorm(d),
                                                    ff=nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(),
                                                                     nn.Linear(2 * d, d))))
                                 for _ in range(layers))
        self.ln_e, self.ln_d = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, src, tgt):
        keep = (src != 0)[:, None, None, :]
        x = self.emb(src) * math.sqrt(self.emb.embedding_dim) + self.pos[:, : src.shape[1]]
        for blk in self.enc:
            h = blk["ln1"](x)
            x = x + blk["att"](h, h, keep)
            x = x + blk["ff"](blk["ln2"](x))
        mem = self.ln_e(x)
        y = self.emb(tgt) * math.sqrt(self.emb.embedding_dim) + self.pos[:, : tgt.shape[1]]
        for blk in self.dec:
            h = blk["ln1"](y)
            y = y + blk["att"](h, h, causal=True)
            y = y + blk["cross"](blk["ln2"](y), mem, keep)
            y = y + blk["ff"](blk["ln3"](y))
        return F.linear(self.ln_d(y), self.emb.weight)


def encdec_hand_sdpa():
    """A hand encoder-decoder on SDPA (bool source key mask for self and cross attention, causal decoder), one
    shared embedding for source / target / head; CE with ``ignore_index=0`` and ``label_smoothing=0.1``."""
    g = _gen()
    src = torch.randint(1, 128, (B, T), generator=g)
    src[1, 8:] = 0
    tgt = torch.randint(1, 128, (B, 11), generator=g)
    tgt[0, 8:] = 0
    return EncDecHand(), (src, tgt[:, :-1]), (tgt[:, 1:],), \
        lambda out, y: F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), ignore_index=0,
                                       label_smoothing=0.1)
