"""Session 20's plain-PyTorch probe idioms, written the way practitioners write them in their own model code and not
yet used by the other probe files: in-place writes into activations (``h[ids == pad] = 0.0`` with a scalar, a
learned mask token written by ``h[mask] = self.mask_token``, in-place ``masked_fill_`` of per-row masks and of
attention scores, positions ``mask.cumsum(-1) - 1`` patched by ``masked_fill_``), ``index_fill`` over channels and
tokens, ``scatter_`` with a scalar value (a hand label-smoothed one-hot, a top-k attention mask),
``torch.bucketize`` (time buckets of a float input, relative-position buckets against a boundaries buffer),
``nn.Embedding(padding_idx=..., max_norm=...)`` (renormalising the weight in place in the forward), a sliding-window
mask from ``tril`` / ``triu(diagonal=...)``, ``torch.einsum`` with ellipses, a CLIP InfoNCE with a learnable logit
scale ``exp().clamp(max=100)``, a diffusion U-Net (GroupNorm + SiLU ResBlocks with a sinusoidal timestep embedding,
nearest ``F.interpolate(scale_factor=2)`` skips by ``torch.cat``), a DiT block (``nn.LayerNorm(elementwise_affine=
False)``, adaLN-zero modulation, ``chunk(6)``, an unpatchify ``einsum``), a Swin-V2 window attention (cosine
attention with a clamped logit scale, a continuous position-bias MLP over log-spaced coordinates), an LSTM over an
unsorted ``pack_padded_sequence`` round trip, a Conv1d + GRU speech encoder with a learnable ``h0``, a
super-resolution net (``PixelUnshuffle`` / depthwise-separable / ``PixelShuffle``, bicubic global skip), a frozen
embedding with LoRA A/B parameters, a T5-like seq2seq whose ``_shift_right`` writes in place and whose decoder is
``nn.TransformerDecoderLayer(norm_first=True)`` with ``generate_square_subsequent_mask``, and a top-k MoE that
``scatter``s its gates over a ``torch.stack`` of expert outputs with a ``logsumexp`` z-loss.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s20_nn.py:<name>`` at
a tiny size (random weights and data, seeded): ``(model, inputs, targets[, loss])``.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

F = nn.functional
B, T, V, D = 2, 12, 256, 64
PAD = 0


def _gen() -> torch.Generator:
    torch.manual_seed(0)  # the weights
    return torch.Generator().manual_seed(0)  # the data


def _ids(g, t: int = T, v: int = V, low: int = 1) -> torch.Tensor:
    return torch.randint(low, v, (B, t), generator=g)


def _lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)


class _Block(nn.Module):
    """A pre-LN SDPA encoder block taking an optional SDPA ``attn_mask``."""

    def __init__(self, d=D, heads=4):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, mask=None, causal=False):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


def _padded_ids(g, lengths=(12, 8)):
    ids = _ids(g)
    for i, n in enumerate(lengths):
        ids[i, n:] = PAD
    return ids


# ---------------------------------------------------------------- in-place writes into activations
class MaskAssignScalar(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        self.head = nn.Linear(D, classes)

    def forward(self, ids):
        h = self.emb(ids)
        h[ids == PAD] = 0.0  # the practitioner's way of zeroing padded tokens
        keep = ids != PAD
        mask = keep[:, None, None, :]
        for blk in self.blocks:
            h = blk(h, mask)
        return self.head(h.sum(1) / keep.sum(1, keepdim=True))


def mask_assign_scalar():
    """``h[ids == pad] = 0.0``: an in-place boolean-mask write of a scalar into the embedding output (index_put),
    then a padded SDPA encoder with a bool key mask and a masked mean pool."""
    g = _gen()
    return MaskAssignScalar(), (_padded_ids(g),), (torch.randint(0, 4, (B,), generator=g),)


class MaskTokenMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, D), nn.Parameter(torch.randn(1, T, D) * 0.02)
        self.mask_token = nn.Parameter(torch.randn(D) * 0.02)
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, ids, masked):
        h = self.emb(ids)
        h[masked] = self.mask_token.to(h.dtype)  # BEiT / data2vec style: a learned vector broadcast over rows
        h = h + self.pos
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.ln(h))


def mask_token_assign():
    """BEiT / data2vec masked modelling: ``h[masked] = self.mask_token`` (a learned [D] vector written in place at a
    boolean mask's rows, its gradient the sum over them); labels -100 except at the masked positions."""
    g = _gen()
    ids = _ids(g)
    masked = torch.zeros(B, T, dtype=torch.bool)
    masked[0, [1, 4, 7]] = True
    masked[1, [0, 5, 6, 10]] = True
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    return MaskTokenMLM(), (ids, masked), (labels,), _lm_loss


class _HandAttn(nn.Module):
    def __init__(self, d=D, heads=4):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x, bad):  # bad: [B, 1, T, T] True where a key must not be seen
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, t, self.h, self.hd).transpose(1, 2)
        v = self.v(x).view(b, t, self.h, self.hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
        scores.masked_fill_(bad, torch.finfo(scores.dtype).min)  # in place on an autograd intermediate
        return self.o((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))


class LeftPadInplaceLM(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.emb, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.attn = nn.ModuleList(_HandAttn() for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(D, 2 * D), nn.SiLU(), nn.Linear(2 * D, D))
                                 for _ in range(layers))
        self.n1 = nn.ModuleList(nn.RMSNorm(D) for _ in range(layers))
        self.n2 = nn.ModuleList(nn.RMSNorm(D) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, ids, attention_mask):
        pos = attention_mask.long().cumsum(-1) - 1
        pos.masked_fill_(attention_mask == 0, 1)  # HF GPT-2 / OPT idiom
        h = self.emb(ids) + self.wpe(pos)
        h.masked_fill_(attention_mask[..., None] == 0, 0.0)  # per-row mask, in place
        t = ids.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        bad = ~(causal[None, None] & attention_mask[:, None, None, :].bool())
        bad = bad & ~torch.eye(t, dtype=torch.bool)  # keep the diagonal so pad rows stay finite
        for a, m, n1, n2 in zip(self.attn, self.mlp, self.n1, self.n2):
            h = h + a(n1(h), bad)
            h = h + m(n2(h))
        return self.head(self.norm(h))


def left_pad_inplace_fill():
    """Left-padded hand decoder: positions ``mask.cumsum(-1) - 1`` then ``pos.masked_fill_(mask == 0, 1)``,
    ``h.masked_fill_(mask[..., None] == 0, 0.0)`` and ``scores.masked_fill_(bad, finfo.min)`` in place; -100 on pads."""
    g = _gen()
    ids = _ids(g)
    am = torch.ones(B, T, dtype=torch.long)
    am[1, :4] = 0
    ids[1, :4] = PAD
    labels = ids.clone()
    labels[am == 0] = -100
    return LeftPadInplaceLM(), (ids, am), (labels,), _lm_loss


class IndexFillCNN(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.b1, self.b2 = nn.BatchNorm2d(16), nn.BatchNorm2d(32)
        self.register_buffer("pruned", torch.tensor([2, 5, 11]))  # channels switched off
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = h.index_fill(1, self.pruned, 0.0)
        h = F.relu(self.b2(self.c2(h)))
        h = h.flatten(2).transpose(1, 2)  # [B, HW, C]
        h = h.index_fill(1, torch.tensor([0, 1]), 0.0)  # drop the first two tokens
        return self.fc(h.mean(1))


def index_fill_cnn():
    """``h.index_fill(1, pruned_channels_buffer, 0.0)`` on a conv map and ``index_fill`` over tokens after a
    ``flatten(2).transpose(1, 2)``; BatchNorm CNN classifier, 16x16 images."""
    g = _gen()
    return IndexFillCNN(), (torch.randn(B, 3, 16, 16, generator=g),), (torch.randint(0, 5, (B,), generator=g),)


class TopKAttnClassifier(nn.Module):
    def __init__(self, classes=6, keep=4):
        super().__init__()
        self.keep = keep
        self.emb = nn.Embedding(V, D)
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, classes)

    def forward(self, ids):
        h = self.emb(ids)
        s = self.q(h) @ self.k(h).transpose(1, 2) / math.sqrt(D)
        top = s.topk(self.keep, dim=-1).indices
        keep = torch.zeros_like(s).scatter_(-1, top, 1.0)  # scatter_ of a scalar value
        s = s.masked_fill(keep == 0, float("-inf"))
        h = h + s.softmax(-1) @ self.v(h)
        return self.head(self.ln(h).mean(1))


def _hand_smooth_ce(logits, y, eps=0.1):
    c = logits.shape[-1]
    one_hot = torch.zeros_like(logits).scatter_(1, y.unsqueeze(1), 1.0)
    soft = one_hot * (1 - eps) + eps / c
    return -(soft * F.log_softmax(logits, dim=-1)).sum(-1).mean()


def scatter_value_topk():
    """``torch.zeros_like(s).scatter_(-1, topk_idx, 1.0)`` top-4 key mask then ``masked_fill(-inf)``; a hand
    label-smoothed CE whose one-hot is ``zeros_like(logits).scatter_(1, y[:, None], 1.0)``."""
    g = _gen()
    return TopKAttnClassifier(), (_ids(g),), (torch.randint(0, 6, (B,), generator=g),), _hand_smooth_ce


# ---------------------------------------------------------------- bucketize, embeddings
class BucketizeEncoder(nn.Module):
    def __init__(self, classes=3, heads=4):
        super().__init__()
        self.h = heads
        self.emb = nn.Embedding(V, D)
        self.register_buffer("time_edges", torch.tensor([0.5, 1.0, 2.0, 4.0, 8.0, 16.0]))
        self.register_buffer("rel_edges", torch.tensor([1, 2, 3, 5, 8]))
        self.time_emb = nn.Embedding(7, D)
        self.rel_bias = nn.Embedding(2 * 6, heads)
        self.blocks = nn.ModuleList(_Block(heads=heads) for _ in range(2))
        self.head = nn.Linear(D, classes)

    def forward(self, ids, gaps):
        t = ids.shape[1]
        h = self.emb(ids) + self.time_emb(torch.bucketize(gaps, self.time_edges))
        pos = torch.arange(t)
        rel = pos[None, :] - pos[:, None]
        bucket = torch.bucketize(rel.abs(), self.rel_edges) + (rel > 0).long() * 6
        bias = self.rel_bias(bucket).permute(2, 0, 1)[None]  # [1, H, T, T]
        for blk in self.blocks:
            h = blk(h, bias)
        return self.head(h.mean(1))


def bucketize_positions():
    """``torch.bucketize`` twice: a float input (time gaps) into 7 buckets for an embedding, and ``|j - i|`` against
    a boundaries buffer for a signed T5-like relative bias handed to SDPA as a float mask."""
    g = _gen()
    gaps = torch.rand(B, T, generator=g) * 20
    return BucketizeEncoder(), (_ids(g), gaps), (torch.randint(0, 3, (B,), generator=g),)


class MaxNormEmbed(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.emb = nn.Embedding(V, 32, padding_idx=PAD, max_norm=1.0)
        self.aux = nn.Parameter(torch.randn(V, 16))
        self.mlp = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, ids):
        a = self.emb(ids)  # renorms the looked-up rows of emb.weight in place (no_grad) before the lookup
        b = F.embedding(ids, self.aux, padding_idx=PAD)
        h = torch.cat([a, b], -1)
        keep = (ids != PAD).unsqueeze(-1).float()
        return self.mlp((h * keep).sum(1) / keep.sum(1))


def embedding_max_norm():
    """``nn.Embedding(padding_idx=0, max_norm=1.0)``: the forward renormalises the looked-up weight rows in place;
    plus ``F.embedding(ids, weight, padding_idx=0)`` on a raw parameter (no gradient to row 0)."""
    g = _gen()
    return MaxNormEmbed(), (_padded_ids(g),), (torch.randint(0, 4, (B,), generator=g),)


class SlidingWindowLM(nn.Module):
    def __init__(self, window=4, layers=2):
        super().__init__()
        self.window = window
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(_Block() for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, ids):
        t = ids.shape[1]
        ones = torch.ones(t, t, dtype=torch.bool)
        mask = torch.tril(ones) & torch.triu(ones, diagonal=-(self.window - 1))  # Mistral-style sliding window
        h = self.emb(ids)
        for blk in self.blocks:
            h = blk(h, mask)
        return self.head(self.norm(h))


def sliding_window_tril():
    """Sliding-window causal mask ``tril(ones) & triu(ones, diagonal=-(w-1))`` (window 4 of 12) as SDPA's bool
    ``attn_mask``; shifted LM labels."""
    g = _gen()
    ids = _ids(g)
    labels = torch.cat([ids[:, 1:], torch.full((B, 1), -100)], 1)
    return SlidingWindowLM(), (ids,), (labels,), _lm_loss


class EllipsisEinsum(nn.Module):
    def __init__(self, heads=4, classes=5):
        super().__init__()
        self.h, self.hd = heads, D // heads
        self.emb = nn.Embedding(V, D)
        self.wqkv = nn.Parameter(torch.randn(3, heads, D, D // heads) / math.sqrt(D))
        self.wo = nn.Parameter(torch.randn(heads, D // heads, D) / math.sqrt(D))
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, classes)

    def forward(self, ids):
        x = self.emb(ids)
        for _ in range(2):
            q, k, v = torch.einsum("...td,nhde->n...hte", self.ln(x), self.wqkv).unbind(0)
            s = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(self.hd)
            y = torch.einsum("...qk,...kd->...qd", s.softmax(-1), v)
            x = x + torch.einsum("...hte,hed->...td", y, self.wo)
        return self.head(x.mean(-2))


def einsum_ellipsis():
    """Attention written entirely in ``torch.einsum`` with ellipses (``...td,nhde->n...hte`` qkv, ``...qd,...kd``
    scores, ``...hte,hed->...td`` output), one weight set applied twice."""
    g = _gen()
    return EllipsisEinsum(), (_ids(g),), (torch.randint(0, 5, (B,), generator=g),)


# ---------------------------------------------------------------- contrastive, diffusion, DiT, Swin-V2
class TinyCLIP(nn.Module):
    def __init__(self, e=32):
        super().__init__()
        self.vis = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.GELU(), nn.Conv2d(16, 32, 3, 2, 1), nn.GELU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, e))
        self.tok = nn.Embedding(V, D)
        self.txt = _Block()
        self.proj = nn.Linear(D, e, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, images, ids):
        im = F.normalize(self.vis(images), dim=-1)
        h = self.txt(self.tok(ids), causal=True)
        eos = ids.argmax(-1)  # the highest id ends each caption, CLIP-style
        tx = F.normalize(self.proj(h[torch.arange(h.shape[0]), eos]), dim=-1)
        scale = self.logit_scale.exp().clamp(max=100)
        logits = scale * im @ tx.t()
        labels = torch.arange(logits.shape[0])
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def clip_infonce_logit_scale():
    """CLIP InfoNCE: two towers, ``F.normalize``, ``logit_scale.exp().clamp(max=100)`` learnable, argmax-EOS text
    pooling, symmetric CE against ``arange`` (4 image-caption pairs); the model returns the loss."""
    g = _gen()
    imgs = torch.randn(4, 3, 16, 16, generator=g)
    ids = torch.randint(1, V - 1, (4, T), generator=g)
    ids[torch.arange(4), torch.tensor([11, 7, 9, 5])] = V - 1
    return TinyCLIP(), (imgs, ids), (), lambda out: out


def _timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class _ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(8, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2, self.c2 = nn.GroupNorm(8, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(F.silu(temb))[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class DiffusionUNet(nn.Module):
    def __init__(self, ch=16, tdim=32):
        super().__init__()
        self.tdim = tdim
        self.tmlp = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inp = nn.Conv2d(3, ch, 3, padding=1)
        self.d1, self.down = _ResBlock(ch, ch, tdim), nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.d2 = _ResBlock(ch, 2 * ch, tdim)
        self.mid = _ResBlock(2 * ch, 2 * ch, tdim)
        self.u2 = _ResBlock(4 * ch, ch, tdim)
        self.up = nn.Conv2d(ch, ch, 3, padding=1)
        self.u1 = _ResBlock(2 * ch, ch, tdim)
        self.out = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(), nn.Conv2d(ch, 3, 3, padding=1))

    def forward(self, x, t):
        temb = self.tmlp(_timestep_embedding(t, self.tdim))
        h1 = self.d1(self.inp(x), temb)
        h2 = self.d2(self.down(h1), temb)
        h = self.mid(h2, temb)
        h = self.u2(torch.cat([h, h2], 1), temb)
        h = self.up(F.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.u1(torch.cat([h, h1], 1), temb)
        return self.out(h)


def diffusion_unet_time():
    """DDPM-style U-Net: sinusoidal timestep embedding of an int64 ``t`` through an MLP, GroupNorm + SiLU ResBlocks
    adding ``temb[:, :, None, None]``, strided-conv down, ``F.interpolate(scale_factor=2, mode="nearest")`` up,
    ``torch.cat`` skips; MSE against the noise, 16x16."""
    g = _gen()
    x = torch.randn(B, 3, 16, 16, generator=g)
    t = torch.randint(0, 1000, (B,), generator=g)
    return DiffusionUNet(), (x, t), (torch.randn(B, 3, 16, 16, generator=g),)


def _modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class _DiTBlock(nn.Module):
    def __init__(self, d, heads=4):
        super().__init__()
        self.n1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.n2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))

    def forward(self, x, c):
        sh_a, sc_a, g_a, sh_m, sc_m, g_m = self.ada(c).chunk(6, dim=1)
        h = _modulate(self.n1(x), sh_a, sc_a)
        x = x + g_a.unsqueeze(1) * self.attn(h, h, h, need_weights=False)[0]
        return x + g_m.unsqueeze(1) * self.mlp(_modulate(self.n2(x), sh_m, sc_m))


class TinyDiT(nn.Module):
    def __init__(self, d=D, p=4, img=16, classes=10):
        super().__init__()
        self.p, self.c = p, 3
        self.x_emb = nn.Conv2d(3, d, p, stride=p)
        self.pos = nn.Parameter(torch.randn(1, (img // p) ** 2, d) * 0.02)
        self.y_emb = nn.Embedding(classes + 1, d)
        self.t_mlp = nn.Sequential(nn.Linear(32, d), nn.SiLU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList(_DiTBlock(d) for _ in range(2))
        self.norm = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))
        self.lin = nn.Linear(d, p * p * 3)

    def forward(self, x, t, y):
        n = x.shape[0]
        h = self.x_emb(x).flatten(2).transpose(1, 2) + self.pos
        c = self.t_mlp(_timestep_embedding(t, 32)) + self.y_emb(y)
        for blk in self.blocks:
            h = blk(h, c)
        shift, scale = self.ada(c).chunk(2, dim=1)
        h = self.lin(_modulate(self.norm(h), shift, scale))
        s = int(h.shape[1] ** 0.5)
        h = h.reshape(n, s, s, self.p, self.p, self.c)
        h = torch.einsum("nhwpqc->nchpwq", h)
        return h.reshape(n, self.c, s * self.p, s * self.p)


def dit_adaln():
    """DiT: ``nn.LayerNorm(elementwise_affine=False)``, adaLN modulation ``x * (1 + scale) + shift`` from
    ``ada(c).chunk(6, dim=1)`` with gates, ``nn.MultiheadAttention(need_weights=False)``, unpatchify by
    ``einsum("nhwpqc->nchpwq")``; MSE on the noise, 16x16 images, class + timestep conditioning."""
    g = _gen()
    x = torch.randn(B, 3, 16, 16, generator=g)
    t = torch.randint(0, 1000, (B,), generator=g)
    y = torch.randint(0, 10, (B,), generator=g)
    return TinyDiT(), (x, t, y), (torch.randn(B, 3, 16, 16, generator=g),)


class _V2WindowAttn(nn.Module):
    def __init__(self, d, ws, heads):
        super().__init__()
        self.ws, self.h = ws, heads
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(heads, 1, 1)))
        self.cpb = nn.Sequential(nn.Linear(2, 64), nn.ReLU(inplace=True), nn.Linear(64, heads, bias=False))
        r = torch.arange(-(ws - 1), ws, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(r, r, indexing="ij")).permute(1, 2, 0).unsqueeze(0)  # [1, 2w-1, 2w-1, 2]
        table = table / (ws - 1) * 8
        table = torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8)
        self.register_buffer("table", table, persistent=False)
        c = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (c[:, :, None] - c[:, None, :]).permute(1, 2, 0) + (ws - 1)
        self.register_buffer("index", rel[..., 0] * (2 * ws - 1) + rel[..., 1], persistent=False)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):  # [nW*B, N, C]
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4)
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * torch.clamp(self.logit_scale, max=math.log(1.0 / 0.01)).exp()
        bias = self.cpb(self.table).view(-1, self.h)[self.index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        attn = attn + 16 * torch.sigmoid(bias).unsqueeze(0)
        return self.proj((attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))


class SwinV2Tiny(nn.Module):
    def __init__(self, d=32, ws=4, classes=5):
        super().__init__()
        self.ws = ws
        self.patch = nn.Conv2d(3, d, 2, stride=2)
        self.attn = nn.ModuleList(_V2WindowAttn(d, ws, 4) for _ in range(2))
        self.n1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(2))  # Swin-V2 post-norm residuals
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d)) for _ in range(2))
        self.n2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(2))
        self.head = nn.Linear(d, classes)

    def forward(self, img):
        x = self.patch(img).permute(0, 2, 3, 1)  # [B, 8, 8, C]
        b, hh, ww, c = x.shape
        w = self.ws
        for i, (a, n1, m, n2) in enumerate(zip(self.attn, self.n1, self.mlp, self.n2)):
            s = x if i == 0 else torch.roll(x, shifts=(-w // 2, -w // 2), dims=(1, 2))
            win = s.view(b, hh // w, w, ww // w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, c)
            y = a(win).view(b, hh // w, ww // w, w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hh, ww, c)
            if i:
                y = torch.roll(y, shifts=(w // 2, w // 2), dims=(1, 2))
            x = x + n1(y)
            x = x + n2(m(x))
        return self.head(x.mean((1, 2)))


def swinv2_cosine_cpb():
    """Swin-V2 windows: cosine attention ``normalize(q) @ normalize(k)^T * clamp(logit_scale, max=log 100).exp()``,
    a continuous position-bias MLP over a log-spaced coordinate table, ``16 * sigmoid``, post-norm residuals, a
    shifted second block (no shift mask); 16x16 images."""
    g = _gen()
    return SwinV2Tiny(), (torch.randn(B, 3, 16, 16, generator=g),), (torch.randint(0, 5, (B,), generator=g),)


# ---------------------------------------------------------------- recurrent
class PackedBiLSTM(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.emb = nn.Embedding(V, 32, padding_idx=PAD)
        self.lstm = nn.LSTM(32, 24, batch_first=True, bidirectional=True)
        self.head = nn.Linear(48, classes)

    def forward(self, ids, lengths):
        packed = pack_padded_sequence(self.emb(ids), lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
        keep = (torch.arange(ids.shape[1])[None] < lengths[:, None]).unsqueeze(-1)
        return self.head((out * keep).sum(1) / lengths[:, None])


def lstm_packed_unsorted():
    """Bidirectional ``nn.LSTM`` over ``pack_padded_sequence(..., enforce_sorted=False)`` (lengths 7, 12, 4: unsorted)
    and back through ``pad_packed_sequence(total_length=T)``; masked mean pool."""
    g = _gen()
    lengths = torch.tensor([7, 12, 4])
    ids = torch.randint(1, V, (3, T), generator=g)
    for i, n in enumerate(lengths.tolist()):
        ids[i, n:] = PAD
    return PackedBiLSTM(), (ids, lengths), (torch.randint(0, 4, (3,), generator=g),)


class ConvGRUSpeech(nn.Module):
    def __init__(self, feats=20, hidden=32, tokens=10):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(feats, 32, 5, stride=2, padding=2), nn.BatchNorm1d(32), nn.GELU(),
                                  nn.Conv1d(32, 32, 3, padding=1, groups=32), nn.Conv1d(32, 32, 1), nn.GELU())
        self.gru = nn.GRU(32, hidden, num_layers=2, batch_first=True)
        self.h0 = nn.Parameter(torch.zeros(2, 1, hidden))
        self.out = nn.Linear(hidden, tokens)

    def forward(self, feats):  # [B, T, F]
        x = self.conv(feats.transpose(1, 2)).transpose(1, 2)
        y, _ = self.gru(x, self.h0.expand(-1, x.shape[0], -1).contiguous())
        return self.out(y).transpose(1, 2)  # [B, C, T'] for the named cross entropy


def speech_conv_gru_h0():
    """Speech encoder: strided Conv1d + BatchNorm1d + depthwise/pointwise Conv1d over ``feats.transpose(1, 2)``, a
    2-layer ``nn.GRU(batch_first=True)`` whose ``h0`` is a parameter ``expand``-ed over the batch; framewise CE on
    [B, C, T']."""
    g = _gen()
    return ConvGRUSpeech(), (torch.randn(B, 24, 20, generator=g),), (torch.randint(0, 10, (B, 12), generator=g),)


# ---------------------------------------------------------------- CNN: super-resolution
class _DWSep(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw, self.pw = nn.Conv2d(c, c, 3, padding=1, groups=c), nn.Conv2d(c, c, 1)

    def forward(self, x):
        return x + self.pw(F.leaky_relu(self.dw(x), 0.2))


class TinySR(nn.Module):
    def __init__(self, c=32, scale=2):
        super().__init__()
        self.unshuffle = nn.PixelUnshuffle(2)
        self.head = nn.Conv2d(12, c, 3, padding=1)
        self.body = nn.Sequential(*(_DWSep(c) for _ in range(3)))
        self.up = nn.Sequential(nn.Conv2d(c, 3 * (2 * scale) ** 2, 3, padding=1), nn.PixelShuffle(2 * scale))
        self.scale = scale

    def forward(self, lr):
        h = self.head(self.unshuffle(lr))
        h = h + self.body(h)
        return self.up(h) + F.interpolate(lr, scale_factor=self.scale, mode="bicubic", align_corners=False)


def sr_unshuffle_bicubic():
    """Super-resolution: ``nn.PixelUnshuffle(2)`` in, depthwise-separable residual blocks (leaky ReLU), ``nn.PixelShuffle
    (4)`` out plus a bicubic ``F.interpolate(scale_factor=2)`` global skip; L1 loss against 32x32 targets."""
    g = _gen()
    lr = torch.rand(B, 3, 16, 16, generator=g)
    hr = torch.rand(B, 3, 32, 32, generator=g)
    return TinySR(), (lr,), (hr,), lambda out, tgt: F.l1_loss(out, tgt)


# ---------------------------------------------------------------- PEFT, seq2seq, MoE
class LoRAEmbedding(nn.Module):
    def __init__(self, base: nn.Embedding, r=4, alpha=8):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.zeros(r, base.num_embeddings))
        self.lora_B = nn.Parameter(torch.randn(base.embedding_dim, r) * 0.02)
        self.scaling = alpha / r

    def forward(self, ids):
        after_a = F.embedding(ids, self.lora_A.T, padding_idx=self.base.padding_idx)
        return self.base(ids) + (after_a @ self.lora_B.T) * self.scaling


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=4, alpha=8):
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))
        self.s = alpha / r

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.A), self.B) * self.s


class LoRAEmbedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = LoRAEmbedding(nn.Embedding(V, D))
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        for blk in self.blocks:
            for p in blk.parameters():
                p.requires_grad_(False)
            blk.qkv = LoRALinear(blk.qkv)
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        self.norm.requires_grad_(False)
        self.head.requires_grad_(False)

    def forward(self, ids):
        h = self.emb(ids)
        for blk in self.blocks:
            h = blk(h, causal=True)
        return self.head(self.norm(h))


def lora_embedding_frozen():
    """PEFT-style LoRA on a frozen ``nn.Embedding`` (``F.embedding(ids, lora_A.T) @ lora_B.T * scaling``, A zeros) and
    on the frozen qkv Linears (B zeros); everything else frozen; shifted -100 LM labels."""
    g = _gen()
    ids = _ids(g)
    labels = torch.cat([ids[:, 1:], torch.full((B, 1), -100)], 1)
    return LoRAEmbedLM(), (ids,), (labels,), _lm_loss


class HandSeq2Seq(nn.Module):
    def __init__(self, d=D, heads=4, start=1):
        super().__init__()
        self.start = start
        self.shared = nn.Embedding(V, d, padding_idx=PAD)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True,
                                                                    norm_first=True), 2, enable_nested_tensor=False)
        self.dec = nn.ModuleList(nn.TransformerDecoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu",
                                                            batch_first=True, norm_first=True) for _ in range(2))
        self.norm = nn.LayerNorm(d)

    def _shift_right(self, labels):
        shifted = labels.new_zeros(labels.shape)
        shifted[..., 1:] = labels[..., :-1].clone()
        shifted[..., 0] = self.start
        shifted.masked_fill_(shifted == -100, PAD)
        return shifted

    def forward(self, src, labels):
        src_pad = src == PAD
        mem = self.enc(self.shared(src), src_key_padding_mask=src_pad)
        dec_in = self._shift_right(labels)
        t = dec_in.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.shared(dec_in)
        for layer in self.dec:
            h = layer(h, mem, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=src_pad)
        logits = F.linear(self.norm(h) * h.shape[-1] ** -0.5, self.shared.weight)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def t5_shift_right_decoder():
    """T5-like seq2seq by hand: ``_shift_right`` (``new_zeros``, slice assignment, ``masked_fill_(== -100, pad)``),
    ``nn.TransformerEncoder`` + ``nn.TransformerDecoderLayer(norm_first=True)`` loop with ``generate_square_subsequent
    _mask`` and a source key padding mask, tied ``F.linear`` head; the model returns its CE (-100 labels)."""
    g = _gen()
    src = _padded_ids(g, (12, 9))
    labels = torch.randint(2, V, (B, 10), generator=g)
    labels[1, 7:] = -100
    return HandSeq2Seq(), (src, labels), (), lambda out: out


class StackScatterMoE(nn.Module):
    def __init__(self, d=D, experts=4, k=2):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
                                     for _ in range(experts))

    def forward(self, x):
        logits = self.router(x)  # [B, T, E]
        topv, topi = torch.topk(logits, self.k, dim=-1)
        gates = torch.zeros_like(logits).scatter(-1, topi, F.softmax(topv, dim=-1))
        outs = torch.stack([e(x) for e in self.experts], dim=-2)  # [B, T, E, D]
        y = torch.einsum("bte,bted->btd", gates, outs)
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        return y, z


class StackScatterMoELM(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.attn = nn.ModuleList(_Block() for _ in range(layers))
        self.moe = nn.ModuleList(StackScatterMoE() for _ in range(layers))
        self.ln = nn.ModuleList(nn.RMSNorm(D) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, ids):
        h, zs = self.emb(ids), []
        for a, m, n in zip(self.attn, self.moe, self.ln):
            h = a(h, causal=True)
            y, z = m(n(h))
            h, zs = h + y, zs + [z]
        return self.head(self.norm(h)), torch.stack(zs).sum()


def moe_stack_scatter_gates():
    """Top-2 MoE: ``torch.topk`` then ``zeros_like(logits).scatter(-1, idx, softmax(topv))`` gates over a
    ``torch.stack`` of every expert's output, ``einsum("bte,bted->btd")``, a ``logsumexp`` router z-loss added."""
    g = _gen()
    ids = _ids(g)
    labels = torch.cat([ids[:, 1:], torch.full((B, 1), -100)], 1)
    return StackScatterMoELM(), (ids,), (labels,), lambda out, y: _lm_loss(out[0], y) + 1e-3 * out[1]


def moe_stack_scatter_bf16():
    """``moe_stack_scatter_gates`` cast whole to bfloat16 (``model.to(torch.bfloat16)``), the loss on float32."""
    model, inputs, targets, loss = moe_stack_scatter_gates()
    return model.to(torch.bfloat16), inputs, targets, lambda out, y: _lm_loss(out[0], y) + 1e-3 * out[1].float()


# ---------------------------------------------------------------- more in-place / selection idioms
class SliceAssignEncoder(nn.Module):
    def __init__(self, classes=4, n_prompt=3):
        super().__init__()
        self.n = n_prompt
        self.emb = nn.Embedding(V, D)
        self.cls = nn.Parameter(torch.randn(D) * 0.02)
        self.prompt = nn.Parameter(torch.randn(n_prompt, D) * 0.02)
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        self.head = nn.Linear(D, classes)

    def forward(self, ids):
        h = self.emb(ids)
        h[:, 0] = self.cls  # slot 0 holds a [CLS] placeholder id: overwrite it in place
        h[:, 1:1 + self.n] += self.prompt  # in-place add into a slice of an activation
        for blk in self.blocks:
            h = blk(h)
        return self.head(h[:, 0])


def slice_assign_cls():
    """In-place slice writes into an activation: ``h[:, 0] = self.cls`` (a learned vector) and
    ``h[:, 1:4] += self.prompt``; classification from token 0."""
    g = _gen()
    return SliceAssignEncoder(), (_ids(g),), (torch.randint(0, 4, (B,), generator=g),)


class MaskedScatterVLM(nn.Module):
    def __init__(self, image_token=V - 1):
        super().__init__()
        self.image_token = image_token
        self.vis = nn.Sequential(nn.Conv2d(3, 32, 4, stride=4), nn.GELU())
        self.mm_proj = nn.Sequential(nn.Linear(32, D), nn.GELU(), nn.Linear(D, D))
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, ids, pixels):
        feats = self.mm_proj(self.vis(pixels).flatten(2).transpose(1, 2))  # [B, 4, D]
        h = self.emb(ids)
        mask = (ids == self.image_token).unsqueeze(-1).expand_as(h)
        h = h.masked_scatter(mask, feats.to(h.dtype))  # LLaVA-style image-token merge
        for blk in self.blocks:
            h = blk(h, causal=True)
        return self.head(self.norm(h))


def masked_scatter_vlm():
    """LLaVA-style merge: ``h.masked_scatter((ids == image_token)[..., None].expand_as(h), projected_patches)`` (4
    image tokens per row at different offsets), causal decoder, -100 labels on the image tokens."""
    g = _gen()
    ids = torch.randint(1, V - 1, (B, T), generator=g)
    ids[0, 1:5] = V - 1
    ids[1, 3:7] = V - 1
    labels = torch.cat([ids[:, 1:], torch.full((B, 1), V - 1)], 1)
    labels[labels == V - 1] = -100
    return MaskedScatterVLM(), (ids, torch.randn(B, 3, 8, 8, generator=g)), (labels,), _lm_loss


class BoolSelectMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, ids, masked, labels):
        h = self.emb(ids)
        for blk in self.blocks:
            h = blk(h)
        logits = self.head(self.ln(h[masked]))  # only the masked positions: a data-dependent row count
        return F.cross_entropy(logits, labels[masked])


def mlm_bool_select_loss():
    """MLM computing its head and loss only on masked rows: ``head(h[masked])`` and ``F.cross_entropy(logits,
    labels[masked])`` (boolean selection, 7 of 24 rows); the model returns the loss."""
    g = _gen()
    ids = _ids(g)
    masked = torch.zeros(B, T, dtype=torch.bool)
    masked[0, [1, 4, 7]] = True
    masked[1, [0, 5, 6, 10]] = True
    return BoolSelectMLM(), (ids, masked, _ids(g)), (), lambda out: out


class UnfoldLocalAttn(nn.Module):
    def __init__(self, classes=5, win=4):
        super().__init__()
        self.win = win
        self.emb = nn.Embedding(V, D)
        self.qkv, self.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, classes)

    def forward(self, ids):
        x = self.emb(ids)
        b, t, d = x.shape
        w = self.win
        for _ in range(2):
            q, k, v = self.qkv(self.ln(x)).chunk(3, -1)
            kp = F.pad(k, (0, 0, w // 2, w // 2 - 1))  # [B, T + w - 1, D]
            vp = F.pad(v, (0, 0, w // 2, w // 2 - 1))
            kw = kp.unfold(1, w, 1)  # [B, T, D, w]
            vw = vp.unfold(1, w, 1)
            s = torch.einsum("btd,btdw->btw", q, kw) / math.sqrt(d)
            x = x + self.o(torch.einsum("btw,btdw->btd", s.softmax(-1), vw))
        return self.head(x.mean(1))


def tensor_unfold_local():
    """Local attention over a window of 4 by ``Tensor.unfold(1, 4, 1)`` on ``F.pad``-ded keys / values (a strided
    view), ``einsum`` over the window axis; one block applied twice."""
    g = _gen()
    return UnfoldLocalAttn(), (_ids(g),), (torch.randint(0, 5, (B,), generator=g),)


class MaskAssignFeatures(MaskedScatterVLM):
    def forward(self, ids, pixels):
        feats = self.mm_proj(self.vis(pixels).flatten(2).transpose(1, 2))  # [B, 4, D]
        h = self.emb(ids)
        h[ids == self.image_token] = feats.reshape(-1, feats.shape[-1]).to(h.dtype)  # older LLaVA code
        for blk in self.blocks:
            h = blk(h, causal=True)
        return self.head(self.norm(h))


def mask_assign_features():
    """Older LLaVA merge: ``h[ids == image_token] = feats.reshape(-1, D)`` (a boolean-mask write whose value has one
    row per selected position: 8 rows, 4 per sample), causal decoder, -100 labels on the image tokens."""
    model_in = masked_scatter_vlm()
    return (MaskAssignFeatures(),) + tuple(model_in[1:])


class MaskMixLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.alt = nn.Embedding(V, D), nn.Embedding(V, D)
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, ids, masked):
        h = self.emb(ids)
        other = self.alt(ids)
        h[masked] = other[masked]  # value selected by the same mask
        h[~masked] *= 0.5  # in-place multiply through a boolean index
        for blk in self.blocks:
            h = blk(h, causal=True)
        logits = self.head(self.norm(h))
        logits[..., PAD] = float("-inf")  # never predict padding
        return logits


def _weighted_token_loss(logits, labels):
    w = torch.ones_like(labels, dtype=logits.dtype)
    w[labels == -100] = 0.0
    ce = F.cross_entropy(logits.transpose(1, 2), labels.masked_fill(labels == -100, 1), reduction="none")
    return (ce * w).sum() / w.sum()


def mask_assign_mixed():
    """Boolean-mask writes with tensor values: ``h[m] = other[m]``, ``h[~m] *= 0.5``, ``logits[..., PAD] = -inf``;
    a loss weighting tokens by ``w = ones_like(labels); w[labels == -100] = 0.0`` (reduction='none')."""
    g = _gen()
    ids = _ids(g)
    masked = torch.zeros(B, T, dtype=torch.bool)
    masked[0, [1, 4, 7]] = True
    masked[1, [0, 5, 6, 10]] = True
    labels = _ids(g)
    labels[1, 8:] = -100
    return MaskMixLM(), (ids, masked), (labels,), _weighted_token_loss
