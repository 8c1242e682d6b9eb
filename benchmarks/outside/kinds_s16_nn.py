"""Plain ``torch.nn`` models of the zoo's kinds, written the way users write them today and in idioms the
other probe files do not use: SDPA with ``enable_gqa=True`` and ``nn.RMSNorm`` (a lit-gpt style LLaMA with a
fused qkv, fused gate-up and a tied head), a hand-written T5 (relative position buckets, gated-GELU), MoEs that
gather stacked expert weights by the router's indices or run every expert densely with ``einsum``, an LSTM
with a learned initial state, a whole-bf16 GRU tagger, a hand-written shifted-window Swin block, a DenseNet
with a frozen first block, a CNN with ``F.interpolate`` / ``Dropout2d`` / grouped convolutions, and a ViT on
``nn.MultiheadAttention``.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s16_nn.py:<name>``
at a tiny size (random weights and data, seeded).
"""
from __future__ import annotations

import math

import torch
from torch import nn

F = nn.functional
B, T, V = 2, 12, 256


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _lm(model: nn.Module):
    g = _gen()
    return model, (torch.randint(0, V, (B, T), generator=g),), (torch.randint(0, V, (B, T), generator=g),)


def _images(model: nn.Module, classes: int = 5, size: int = 32, dtype=torch.float32):
    g = _gen()
    x = torch.randn(B, 3, size, size, generator=g).to(dtype)
    return model, (x,), (torch.randint(0, classes, (B,), generator=g),)


# ---------------------------------------------------------------- LLaMA, lit-gpt style
def _rope_cache(seq: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    ang = torch.outer(torch.arange(seq).float(), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class _GQABlock(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, hidden: int):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.norm1, self.norm2 = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)
        self.qkv = nn.Linear(d, (heads + 2 * kv_heads) * self.hd, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.heads * self.hd, self.kv_heads * self.hd, self.kv_heads * self.hd], dim=-1)
        q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class LitLlama(nn.Module):
    def __init__(self, d: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2, hidden: int = 96):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(_GQABlock(d, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, V, bias=False)
        self.head.weight = self.emb.weight  # tied
        cos, sin = _rope_cache(64, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x, self.cos[:t], self.sin[:t])
        return self.head(self.norm(x))


def lit_llama():
    """LLaMA as lit-gpt writes it: fused qkv split, ``nn.RMSNorm``, SDPA with ``enable_gqa=True``, tied head."""
    torch.manual_seed(0)
    return _lm(LitLlama())


# ---------------------------------------------------------------- T5 by hand
def _buckets(rel: torch.Tensor, bidirectional: bool, num: int = 8, max_dist: int = 32) -> torch.Tensor:
    out = torch.zeros_like(rel)
    if bidirectional:
        num //= 2
        out = out + (rel > 0).long() * num
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    exact = num // 2
    large = exact + (torch.log(rel.float() / exact + 1e-6) / math.log(max_dist / exact) * (num - exact)).long()
    large = torch.min(large, torch.full_like(large, num - 1))
    return out + torch.where(rel < exact, rel, large)


class _T5Norm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class _T5Attn(nn.Module):
    def __init__(self, d, heads, bias: bool, bidirectional: bool):
        super().__init__()
        self.h, self.bidirectional = heads, bidirectional
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.rel = nn.Embedding(8, heads) if bias else None

    def bias(self, tq, tk):
        rel = torch.arange(tk)[None, :] - torch.arange(tq)[:, None]
        return self.rel(_buckets(rel, self.bidirectional)).permute(2, 0, 1)[None]

    def forward(self, x, kv, pos_bias, mask=None):
        b, tq, d = x.shape
        tk = kv.shape[1]
        q = self.q(x).view(b, tq, self.h, -1).transpose(1, 2)
        k = self.k(kv).view(b, tk, self.h, -1).transpose(1, 2)
        v = self.v(kv).view(b, tk, self.h, -1).transpose(1, 2)
        s = q @ k.transpose(-1, -2) + pos_bias
        if mask is not None:
            s = s.masked_fill(mask, torch.finfo(s.dtype).min)
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(b, tq, d))


class _T5FF(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.wi0, self.wi1, self.wo = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)

    def forward(self, x):
        return self.wo(F.gelu(self.wi0(x), approximate="tanh") * self.wi1(x))


class HandT5(nn.Module):
    def __init__(self, d=64, heads=4, ff=96, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.enc = nn.ModuleList(nn.ModuleDict(dict(n1=_T5Norm(d), att=_T5Attn(d, heads, i == 0, True),
                                                    n2=_T5Norm(d), ff=_T5FF(d, ff))) for i in range(layers))
        self.dec = nn.ModuleList(nn.ModuleDict(dict(n1=_T5Norm(d), att=_T5Attn(d, heads, i == 0, False),
                                                    n2=_T5Norm(d), cross=_T5Attn(d, heads, False, True),
                                                    n3=_T5Norm(d), ff=_T5FF(d, ff))) for i in range(layers))
        self.enc_norm, self.dec_norm = _T5Norm(d), _T5Norm(d)
        self.head = nn.Linear(d, V, bias=False)

    def forward(self, src, tgt):
        x = self.emb(src)
        bias = self.enc[0]["att"].bias(src.shape[1], src.shape[1])
        for blk in self.enc:
            h = blk["n1"](x)
            x = x + blk["att"](h, h, bias)
            x = x + blk["ff"](blk["n2"](x))
        mem = self.enc_norm(x)
        y = self.emb(tgt)
        t = tgt.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        sbias = self.dec[0]["att"].bias(t, t)
        for blk in self.dec:
            h = blk["n1"](y)
            y = y + blk["att"](h, h, sbias, causal)
            y = y + blk["cross"](blk["n2"](y), mem, 0.0)
            y = y + blk["ff"](blk["n3"](y))
        return self.head(self.dec_norm(y) * (64 ** -0.5))


def hand_t5():
    """A T5 written by hand: bucketed relative position bias (log, min, where), gated-GELU FF, RMS norms."""
    torch.manual_seed(0)
    g = _gen()
    ins = (torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T - 4), generator=g))
    return HandT5(), ins, (torch.randint(0, V, (B, T - 4), generator=g),)


# ---------------------------------------------------------------- MoE
class GatherMoE(nn.Module):
    """Top-2 routing that gathers each token's experts' stacked weights (``w1[idx]``) and runs a bmm."""

    def __init__(self, d=64, hidden=48, experts=4, k=2):
        super().__init__()
        self.k = k
        self.emb = nn.Embedding(V, d)
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, V)

    def forward(self, idx):
        x = self.emb(idx)
        b, t, d = x.shape
        flat = x.reshape(-1, d)
        w, sel = self.router(flat).softmax(-1).topk(self.k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        h = torch.bmm(flat.repeat_interleave(self.k, 0)[:, None], self.w1[sel.reshape(-1)])
        out = torch.bmm(F.gelu(h), self.w2[sel.reshape(-1)])[:, 0].view(-1, self.k, d)
        y = (out * w[..., None]).sum(1).view(b, t, d)
        return self.head(self.norm(x + y))


def moe_gather_weights():
    """MoE that indexes stacked expert weights by the router's top-2 indices (gather, then bmm)."""
    torch.manual_seed(0)
    return _lm(GatherMoE())


class DenseEinsumMoE(nn.Module):
    """Every expert runs on every token (``einsum`` over stacked weights); a top-2 mask weights them."""

    def __init__(self, d=64, hidden=48, experts=4, k=2):
        super().__init__()
        self.k = k
        self.emb = nn.Embedding(V, d)
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)
        self.head = nn.Linear(d, V)

    def forward(self, idx):
        x = self.emb(idx)
        probs = self.router(x).softmax(-1)
        top, sel = probs.topk(self.k, dim=-1)
        gates = torch.zeros_like(probs).scatter(-1, sel, top)
        h = F.silu(torch.einsum("btd,edh->bteh", x, self.w1))
        y = torch.einsum("bteh,ehd,bte->btd", h, self.w2, gates)
        return self.head(x + y)


def moe_dense_einsum():
    """MoE computed densely with einsum over stacked expert weights, gated by a scattered top-2 mask."""
    torch.manual_seed(0)
    return _lm(DenseEinsumMoE())


# ---------------------------------------------------------------- RNNs
class LearnedInitLSTM(nn.Module):
    def __init__(self, d=32, hidden=48, layers=2, classes=5):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=layers, batch_first=True)
        self.h0 = nn.Parameter(torch.zeros(layers, 1, hidden))
        self.c0 = nn.Parameter(torch.zeros(layers, 1, hidden))
        self.fc = nn.Linear(hidden, classes)

    def forward(self, idx):
        b = idx.shape[0]
        _, (h, _) = self.lstm(self.emb(idx), (self.h0.expand(-1, b, -1).contiguous(),
                                              self.c0.expand(-1, b, -1).contiguous()))
        return self.fc(h[-1])


def lstm_learned_init():
    """A 2-layer LSTM classifier whose initial (h0, c0) are trainable parameters; classifies from h[-1]."""
    torch.manual_seed(0)
    g = _gen()
    return LearnedInitLSTM(), (torch.randint(0, V, (B, T), generator=g),), (torch.randint(0, 5, (B,), generator=g),)


class GRUTagger(nn.Module):
    def __init__(self, d=32, hidden=32, tags=7):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.gru = nn.GRU(d, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, idx):
        y, _ = self.gru(self.emb(idx))
        return self.out(y).transpose(1, 2)  # [B, tags, T] for cross_entropy's class dim 1


def gru_tagger_bf16():
    """A bidirectional 2-layer GRU tagger cast whole to bfloat16; logits [B, tags, T] against [B, T] tags."""
    torch.manual_seed(0)
    g = _gen()
    return (GRUTagger().to(torch.bfloat16), (torch.randint(0, V, (B, T), generator=g),),
            (torch.randint(0, 7, (B, T), generator=g),))


# ---------------------------------------------------------------- Swin by hand
def _windows(x: torch.Tensor, w: int) -> torch.Tensor:
    b, h, wd, c = x.shape
    x = x.view(b, h // w, w, wd // w, w, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, w * w, c)


def _unwindow(x: torch.Tensor, w: int, b: int, h: int, wd: int) -> torch.Tensor:
    x = x.view(b, h // w, wd // w, w, w, -1).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, h, wd, -1)


class _SwinBlock(nn.Module):
    def __init__(self, d, heads, window, shift, res):
        super().__init__()
        self.heads, self.w, self.shift = heads, window, shift
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("index", rel[..., 0] * (2 * window - 1) + rel[..., 1], persistent=False)
        if shift:
            img = torch.zeros(1, res, res, 1)
            cnt = 0
            for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                    img[:, hs, ws] = cnt
                    cnt += 1
            m = _windows(img, window)[..., 0]
            mask = (m[:, None] - m[:, :, None]).ne(0).float() * -100.0
            self.register_buffer("mask", mask, persistent=False)
        else:
            self.mask = None

    def forward(self, x):
        b, h, w, c = x.shape
        y = self.n1(x)
        if self.shift:
            y = torch.roll(y, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = _windows(y, self.w)
        n = win.shape[1]
        q, k, v = self.qkv(win).view(-1, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        s = (q * (c // self.heads) ** -0.5) @ k.transpose(-1, -2)
        s = s + self.table[self.index.reshape(-1)].view(n, n, -1).permute(2, 0, 1)[None]
        if self.mask is not None:
            nw = self.mask.shape[0]
            s = s.view(-1, nw, self.heads, n, n) + self.mask[None, :, None]
            s = s.view(-1, self.heads, n, n)
        out = self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(-1, n, c))
        out = _unwindow(out, self.w, b, h, w)
        if self.shift:
            out = torch.roll(out, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + out
        return x + self.mlp(self.n2(x))


class HandSwin(nn.Module):
    def __init__(self, d=32, classes=5):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.stage1 = nn.Sequential(_SwinBlock(d, 2, 4, 0, 8), _SwinBlock(d, 2, 4, 2, 8))
        self.merge_norm, self.merge = nn.LayerNorm(4 * d), nn.Linear(4 * d, 2 * d, bias=False)
        self.stage2 = nn.Sequential(_SwinBlock(2 * d, 4, 4, 0, 4))
        self.norm, self.head = nn.LayerNorm(2 * d), nn.Linear(2 * d, classes)

    def forward(self, img):
        x = self.stage1(self.patch(img).permute(0, 2, 3, 1))
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        x = self.stage2(self.merge(self.merge_norm(x)))
        return self.head(self.norm(x).mean(dim=(1, 2)))


def hand_swin():
    """A Swin written by hand: window partition by view/permute, shifted windows with torch.roll and a -100
    mask buffer, a relative position bias table indexed by a buffer, patch merging by strided slices."""
    torch.manual_seed(0)
    return _images(HandSwin())


# ---------------------------------------------------------------- CNNs
class _Dense(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.bn1, self.c1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.bn2, self.c2 = nn.BatchNorm2d(4 * growth), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats: list[torch.Tensor]):
        x = self.c1(F.relu(self.bn1(torch.cat(feats, 1))))
        return self.c2(F.relu(self.bn2(x)))


class FrozenStemDenseNet(nn.Module):
    def __init__(self, growth=8, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.block1 = nn.ModuleList(_Dense(16 + i * growth, growth) for i in range(3))
        self.trans = nn.Sequential(nn.BatchNorm2d(16 + 3 * growth), nn.ReLU(),
                                   nn.Conv2d(16 + 3 * growth, 20, 1, bias=False), nn.AvgPool2d(2))
        self.block2 = nn.ModuleList(_Dense(20 + i * growth, growth) for i in range(3))
        self.bn, self.fc = nn.BatchNorm2d(20 + 3 * growth), nn.Linear(20 + 3 * growth, classes)
        for p in list(self.stem.parameters()) + list(self.block1.parameters()):
            p.requires_grad_(False)

    def forward(self, x):
        feats = [self.stem(x)]
        for layer in self.block1:
            feats.append(layer(feats))
        feats = [self.trans(torch.cat(feats, 1))]
        for layer in self.block2:
            feats.append(layer(feats))
        x = F.relu(self.bn(torch.cat(feats, 1)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def densenet_frozen_block():
    """A DenseNet (concat of feature lists) whose stem and first dense block are frozen."""
    torch.manual_seed(0)
    return _images(FrozenStemDenseNet())


class InterpNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.Hardswish(),
                                  nn.Conv2d(16, 32, 3, 2, 1, groups=4), nn.BatchNorm2d(32), nn.SiLU(inplace=True),
                                  nn.Dropout2d(0.1))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.mid = nn.Conv2d(32, 16, 3, padding=1)
        self.out = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        h = self.mid(self.up(self.down(x)))
        h = F.interpolate(h, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return self.out(F.relu(h))


def cnn_interpolate_seg():
    """A segmentation CNN: Hardswish, grouped conv, in-place SiLU, Dropout2d, nearest Upsample, bilinear
    ``F.interpolate`` back to the input size; [B, C, H, W] logits against [B, H, W] labels."""
    torch.manual_seed(0)
    g = _gen()
    x = torch.randn(B, 3, 32, 32, generator=g)
    return InterpNet(), (x,), (torch.randint(0, 4, (B, 32, 32), generator=g),)


class MHAViT(nn.Module):
    def __init__(self, d=64, heads=4, layers=2, classes=5, patch=8, size=32):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, d) * 0.02)
        self.attn = nn.ModuleList(nn.MultiheadAttention(d, heads, batch_first=True) for _ in range(layers))
        self.n1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.n2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
                                 for _ in range(layers))
        self.head = nn.Linear(d, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for attn, n1, n2, mlp in zip(self.attn, self.n1, self.n2, self.mlp):
            h = n1(x)
            x = x + attn(h, h, h, need_weights=False)[0]
            x = x + mlp(n2(x))
        return self.head(x[:, 0])


def vit_mha():
    """A ViT on ``nn.MultiheadAttention`` (batch_first, need_weights=False), a cls token and learned positions."""
    torch.manual_seed(0)
    return _images(MHAViT())


class BincountAuxMoE(nn.Module):
    """A top-2 MoE (dense experts weighted by a scattered mask) with a Switch-style load-balancing loss that
    counts tokens per expert with ``torch.bincount(..., minlength=experts)``, added to the logits."""

    def __init__(self, d=64, hidden=48, experts=4, k=2):
        super().__init__()
        self.k, self.e = k, experts
        self.emb = nn.Embedding(V, d)
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)
        self.head = nn.Linear(d, V)

    def forward(self, idx):
        x = self.emb(idx)
        probs = self.router(x).softmax(-1)
        top, sel = probs.topk(self.k, dim=-1)
        gates = torch.zeros_like(probs).scatter(-1, sel, top)
        y = torch.einsum("bteh,ehd,bte->btd", F.gelu(torch.einsum("btd,edh->bteh", x, self.w1)), self.w2, gates)
        counts = torch.bincount(sel.flatten(), minlength=self.e).to(x.dtype)
        aux = self.e * (counts / sel.numel() * probs.mean((0, 1))).sum()
        return self.head(x + y) + 0.01 * aux


def moe_bincount_aux():
    """MoE whose load-balancing loss counts tokens per expert with ``torch.bincount(minlength=experts)``."""
    torch.manual_seed(0)
    return _lm(BincountAuxMoE())


class GShard(nn.Module):
    """Top-1 with capacity: position in expert by cumsum of the one-hot mask, dispatch/combine einsums."""

    def __init__(self, d=32, hidden=48, experts=4, capacity=4):
        super().__init__()
        self.experts, self.capacity = experts, capacity
        self.emb = nn.Embedding(V, d)
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * 0.1)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * 0.1)
        self.head = nn.Linear(d, V)

    def forward(self, idx):
        x = self.emb(idx)
        b, t, d = x.shape
        tok = x.reshape(-1, d)
        gate, expert = self.router(tok).softmax(-1).max(-1)
        mask = F.one_hot(expert, self.experts).to(tok.dtype)  # [S, E]
        pos = (torch.cumsum(mask, 0) - 1) * mask  # each token's place in its expert's queue
        keep = mask * (pos < self.capacity).to(tok.dtype)
        # [S, C]; a dropped token's slot is clamped (keep zeroes it)
        slot = F.one_hot(pos.sum(-1).long().clamp(max=self.capacity - 1), self.capacity).to(tok.dtype)
        dispatch = keep.unsqueeze(-1) * slot.unsqueeze(1)  # [S, E, C]
        xe = torch.einsum("sec,sd->ecd", dispatch, tok)
        ye = torch.bmm(F.relu(torch.bmm(xe, self.w1)), self.w2)
        y = torch.einsum("sec,ecd->sd", dispatch * gate[:, None, None], ye)
        return self.head((tok + y).view(b, t, d))


def gshard_capacity():
    """GShard-style top-1 MoE with a capacity: positions by cumsum of the one-hot mask, einsum dispatch."""
    torch.manual_seed(0)
    return _lm(GShard())


class SortDispatch(nn.Module):
    """Tokens sorted by expert (stable argsort), run with their experts' gathered weights, added back."""

    def __init__(self, d=32, hidden=48, experts=4):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * 0.1)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * 0.1)
        self.head = nn.Linear(d, V)

    def forward(self, idx):
        x = self.emb(idx)
        b, t, d = x.shape
        tok = x.reshape(-1, d)
        gate, expert = self.router(tok).softmax(-1).max(-1)
        order = torch.argsort(expert, stable=True)
        chosen = expert[order]
        ys = torch.bmm(F.relu(torch.bmm(tok[order][:, None], self.w1[chosen])), self.w2[chosen])[:, 0]
        y = torch.zeros_like(tok).index_add(0, order, ys * gate[order, None])
        return self.head((tok + y).view(b, t, d))


def sort_dispatch():
    """Top-1 MoE that sorts tokens by expert (stable argsort), gathers them and their experts' weights, and
    adds the outputs back with index_add."""
    torch.manual_seed(0)
    return _lm(SortDispatch())


class TimeMajorLSTM(nn.Module):
    def __init__(self, features=8, hidden=16, layers=2):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=layers)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        y, _ = self.lstm(x)  # time-major: [T, B, H]
        return self.out(y[-1]).squeeze(-1)


def lstm_regression():
    """A time-major 2-layer LSTM regressing one value per sequence from its last step (15 steps, batch 4)."""
    torch.manual_seed(0)
    g = _gen()
    return TimeMajorLSTM(), (torch.randn(15, 4, 8, generator=g),), (torch.randn(4, generator=g),)


class OddSizesCNN(nn.Module):
    """Odd spatial sizes through pixel_unshuffle, ceil-mode max and average pools (count_include_pad=False),
    an affine InstanceNorm, replication padding, a grouped conv with a channel shuffle, a transposed conv
    with output_padding and an adaptive pool to a non-divisible size."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(12, 16, 3, padding=1)
        self.norm = nn.InstanceNorm2d(16, affine=True)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.avg = nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        self.pad = nn.ReplicationPad2d((1, 2, 0, 1))
        self.c2 = nn.Conv2d(16, 16, 3, groups=4)
        self.shuffle = nn.ChannelShuffle(4)
        self.up = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.head = nn.Conv2d(8, 3, 1)

    def forward(self, x):
        h = F.relu(self.norm(self.c1(F.pixel_unshuffle(x, 2))))
        h = self.shuffle(self.c2(self.pad(self.avg(self.pool(h)))))
        return F.adaptive_avg_pool2d(self.head(self.up(h)), (5, 7))


def odd_sizes_cnn():
    """A CNN of odd sizes and less common layers (see OddSizesCNN), regressing a 5x7 map (mse)."""
    torch.manual_seed(0)
    g = _gen()
    return OddSizesCNN(), (torch.randn(B, 3, 30, 30, generator=g),), (torch.randn(B, 3, 5, 7, generator=g),)
