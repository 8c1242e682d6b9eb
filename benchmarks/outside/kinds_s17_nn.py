"""Session 17's probe idioms, written the way users write them and not yet used by the other probe files:
``nn.TransformerEncoder`` with a key padding mask (and with a float causal mask), ``F.scaled_dot_product_attention``
with ``is_causal=True`` and with a float additive mask, einsum / ``torch.baddbmm`` attention with
``masked_fill(-inf)``, ``weight_norm`` / ``spectral_norm`` parametrizations, ``nn.ParameterList`` /
``nn.ModuleDict`` models with layer scale, shared modules, a bf16 complex RoPE, cumulative ops, ``nn.GLU`` /
``nn.Bilinear`` / ``nn.PReLU``, a conformer conv module; losses: BCE-with-logits with ``pos_weight``, KL
divergence with ``log_target``, Huber + SmoothL1, NLL with ``ignore_index`` and class weights, cosine embedding +
margin ranking, a hand-written focal loss, MSE with ``reduction="sum"`` plus a norm penalty; Hugging Face task
heads computing their own loss from labels (token classification, question answering, multiple choice,
regression / multi-label sequence classification, a causal LM with -100 padding, a seq2seq LM given
``decoder_input_ids``), bf16 variants and a frozen-parameter variant.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s17_nn.py:<name>`` at
a tiny size (random weights and data, seeded).
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm, weight_norm

F = nn.functional
B, T, V, D = 2, 12, 128, 32


def _gen() -> torch.Generator:
    torch.manual_seed(0)  # the weights
    return torch.Generator().manual_seed(0)  # the data


def _lengths_mask(lengths, t: int = T) -> torch.Tensor:
    """``True`` at padded positions (PyTorch's ``key_padding_mask`` convention)."""
    return torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]


# ---------------------------------------------------------------- attention idioms
class PaddedEncoderCls(nn.Module):
    def __init__(self, d: int = D, classes: int = 5):
        super().__init__()
        self.emb = nn.Embedding(V, d, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(1, T, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(d), enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, ids, pad_mask):
        x = self.enc(self.emb(ids) + self.pos, src_key_padding_mask=pad_mask)
        keep = (~pad_mask).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1))


def encoder_key_padding():
    """Pre-norm ``nn.TransformerEncoder`` (GELU) with a bool ``src_key_padding_mask``, masked mean pooling."""
    g = _gen()
    model = PaddedEncoderCls()
    ids = torch.randint(1, V, (B, T), generator=g)
    mask = _lengths_mask([T, 7])
    ids = ids.masked_fill(mask, 0)
    return model, (ids, mask), (torch.randint(0, 5, (B,), generator=g),)


class CausalEncoderLM(nn.Module):
    def __init__(self, d: int = D):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, V)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(T), persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        return self.head(self.enc(self.emb(ids), mask=self.causal[:t, :t], is_causal=True))


def encoder_causal_mask():
    """Post-norm ``nn.TransformerEncoder`` as an LM: float ``-inf`` square-subsequent mask plus ``is_causal``."""
    g = _gen()
    model = CausalEncoderLM()
    return model, (torch.randint(0, V, (B, T), generator=g),), (torch.randint(0, V, (B, T), generator=g),)


class _SdpaBlock(nn.Module):
    def __init__(self, d: int, heads: int, mode: str):
        super().__init__()
        self.h, self.mode = heads, mode
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"), nn.Linear(2 * d, d))

    def forward(self, x, bias=None):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        if self.mode == "causal":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class SdpaLM(nn.Module):
    def __init__(self, mode: str, d: int = D, heads: int = 4):
        super().__init__()
        self.mode, self.heads = mode, heads
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(_SdpaBlock(d, heads, mode) for _ in range(2))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, V, bias=False)
        slopes = torch.tensor([2.0 ** (-8 * (i + 1) / heads) for i in range(heads)])
        self.register_buffer("slopes", slopes, persistent=False)

    def forward(self, ids, pad_mask=None):
        t = ids.shape[1]
        x = self.emb(ids)
        bias = None
        if self.mode == "float_mask":
            # ALiBi distance bias, causal and key-padding positions set to a large negative float
            pos = torch.arange(t, device=ids.device)
            dist = (pos[None, :] - pos[:, None]).to(x.dtype)
            bias = self.slopes[:, None, None] * dist  # [H, T, T]
            blocked = (pos[None, :] > pos[:, None])[None, None] | pad_mask[:, None, None, :]
            bias = bias[None].masked_fill(blocked, torch.finfo(x.dtype).min)
        for blk in self.blocks:
            x = blk(x, bias)
        return self.head(self.ln(x))


def sdpa_causal():
    """GPT-style blocks on ``F.scaled_dot_product_attention(..., is_causal=True)``, qkv split by permute."""
    g = _gen()
    model = SdpaLM("causal")
    return model, (torch.randint(0, V, (B, T), generator=g),), (torch.randint(0, V, (B, T), generator=g),)


def _lm_ignore(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def sdpa_float_mask():
    """SDPA with a float ``attn_mask``: ALiBi slopes times distance, causal + padding set to ``finfo.min``;
    padded labels ignored (-100)."""
    g = _gen()
    model = SdpaLM("float_mask")
    ids = torch.randint(0, V, (B, T), generator=g)
    pad = _lengths_mask([T, 8])
    labels = torch.randint(0, V, (B, T), generator=g).masked_fill(pad, -100)
    return model, (ids, pad), (labels,), _lm_ignore


class EinsumAttention(nn.Module):
    def __init__(self, d: int = D, heads: int = 4):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.wq = nn.Parameter(torch.randn(heads, d, self.dk) / math.sqrt(d))
        self.wk = nn.Parameter(torch.randn(heads, d, self.dk) / math.sqrt(d))
        self.wv = nn.Parameter(torch.randn(heads, d, self.dk) / math.sqrt(d))
        self.wo = nn.Parameter(torch.randn(heads, self.dk, d) / math.sqrt(d))

    def forward(self, x, pad_mask):
        q = torch.einsum("btd,hdk->bhtk", x, self.wq)
        k = torch.einsum("bsd,hdk->bhsk", x, self.wk)
        v = torch.einsum("bsd,hdk->bhsk", x, self.wv)
        s = torch.einsum("bhtk,bhsk->bhts", q, k) / math.sqrt(self.dk)
        s = s.masked_fill(pad_mask[:, None, None, :], float("-inf"))
        a = s.softmax(dim=-1)
        return torch.einsum("bhts,bhsk,hkd->btd", a, v, self.wo)


class EinsumCls(nn.Module):
    def __init__(self, d: int = D, classes: int = 4):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.attn = nn.ModuleList(EinsumAttention(d) for _ in range(2))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(2))
        self.head = nn.Linear(d, classes)

    def forward(self, ids, pad_mask):
        x = self.emb(ids)
        for attn, norm in zip(self.attn, self.norms):
            x = x + attn(norm(x), pad_mask)
        return self.head(x[:, 0])


def einsum_attention():
    """Per-head weight tensors applied by ``einsum`` (a 3-operand output einsum), ``masked_fill(-inf)`` on
    padded keys then softmax; first-token pooling."""
    g = _gen()
    model = EinsumCls()
    return model, (torch.randint(0, V, (B, T), generator=g), _lengths_mask([T, 5])), \
        (torch.randint(0, 4, (B,), generator=g),)


class BaddbmmLM(nn.Module):
    def __init__(self, d: int = D, heads: int = 4):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.emb = nn.Embedding(V, d)
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.head = nn.Linear(d, V)
        self.rel = nn.Parameter(torch.zeros(heads, T, T))

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, self.h, self.dk).transpose(1, 2).reshape(b * self.h, t, self.dk)
        k = k.reshape(b, t, self.h, self.dk).transpose(1, 2).reshape(b * self.h, t, self.dk)
        v = v.reshape(b, t, self.h, self.dk).transpose(1, 2).reshape(b * self.h, t, self.dk)
        bias = self.rel[:, :t, :t].repeat(b, 1, 1)
        s = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0, alpha=1.0 / math.sqrt(self.dk))
        causal = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)
        s = s.masked_fill(causal, float("-inf"))
        y = torch.bmm(F.softmax(s, dim=-1, dtype=torch.float32).to(v.dtype), v)
        y = y.reshape(b, self.h, t, self.dk).transpose(1, 2).reshape(b, t, -1)
        return self.head(x + self.o(y))


def baddbmm_attention():
    """BLOOM-style ``torch.baddbmm(bias, q, k^T, alpha=1/sqrt(d))`` scores with a learned relative bias,
    ``triu`` causal ``masked_fill(-inf)``, float32 softmax, ``bmm`` with values."""
    g = _gen()
    model = BaddbmmLM()
    return model, (torch.randint(0, V, (B, T), generator=g),), (torch.randint(0, V, (B, T), generator=g),)


def _rope_complex_bf16(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(-2).type_as(x)


class RopeBf16LM(nn.Module):
    def __init__(self, d: int = D, heads: int = 4):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.emb = nn.Embedding(V, d)
        self.norm = nn.RMSNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.head = nn.Linear(d, V, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.dk, 2).float() / self.dk))
        ang = torch.outer(torch.arange(T).float(), inv)
        self.register_buffer("freqs", torch.polar(torch.ones_like(ang), ang), persistent=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        h = self.norm(x)
        q = self.q(h).view(b, t, self.h, self.dk)
        k = self.k(h).view(b, t, self.h, self.dk)
        v = self.v(h).view(b, t, self.h, self.dk)
        f = self.freqs[:t].view(1, t, 1, -1)
        q, k = _rope_complex_bf16(q, f), _rope_complex_bf16(k, f)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, -1))
        return self.head(x).float()


def rope_complex_bf16():
    """A whole-bf16 LM (``model.to(torch.bfloat16)``) whose RoPE upcasts to float32 complex
    (``view_as_complex`` times a complex64 buffer, ``view_as_real``, ``type_as``), float32 logits."""
    g = _gen()
    model = RopeBf16LM()
    freqs = model.freqs
    model = model.to(torch.bfloat16)
    model.freqs = freqs  # .to(bfloat16) drops a complex buffer's imaginary part: put the complex64 one back
    return model, (torch.randint(0, V, (B, T), generator=g),), (torch.randint(0, V, (B, T), generator=g),)


# ---------------------------------------------------------------- parametrizations, containers, sharing
class WeightNormMLP(nn.Module):
    def __init__(self, d: int = 16, classes: int = 5):
        super().__init__()
        self.l1 = weight_norm(nn.Linear(d, 32))
        self.l2 = weight_norm(nn.Linear(32, 32), dim=None)
        self.l3 = nn.Linear(32, classes)

    def forward(self, x):
        return self.l3(F.silu(self.l2(F.silu(self.l1(x)))))


def weight_norm_mlp():
    """``parametrizations.weight_norm`` on Linear layers: per-row (dim=0) and whole-tensor (``dim=None``)."""
    g = _gen()
    model = WeightNormMLP()
    return model, (torch.randn(8, 16, generator=g),), (torch.randint(0, 5, (8,), generator=g),)


class SNDisc(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = spectral_norm(nn.Conv2d(3, 8, 3, 2, 1))
        self.c2 = spectral_norm(nn.Conv2d(8, 16, 3, 2, 1))
        self.fc = spectral_norm(nn.Linear(16 * 4 * 4, 1))

    def forward(self, x):
        x = F.leaky_relu(self.c1(x), 0.2)
        x = F.leaky_relu(self.c2(x), 0.2)
        return self.fc(x.flatten(1))


def _bce(out, y):
    return F.binary_cross_entropy_with_logits(out.squeeze(-1), y)


def spectral_norm_disc():
    """A GAN discriminator on ``parametrizations.spectral_norm`` convs / linear (one power iteration per
    forward, updating the ``u`` / ``v`` buffers in place), leaky ReLU, BCE-with-logits real/fake loss."""
    g = _gen()
    model = SNDisc()
    return model, (torch.randn(4, 3, 16, 16, generator=g),), (torch.tensor([1.0, 0.0, 1.0, 0.0]),), _bce


class ContainersNet(nn.Module):
    def __init__(self, d: int = 24, layers: int = 3):
        super().__init__()
        self.weights = nn.ParameterList(nn.Parameter(torch.randn(d, d) / math.sqrt(d)) for _ in range(layers))
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(d)) for _ in range(layers))
        self.gammas = nn.ParameterList(nn.Parameter(1e-1 * torch.ones(d)) for _ in range(layers))  # layer scale
        self.heads = nn.ModuleDict({"cls": nn.Linear(d, 5), "aux": nn.Linear(d, 5)})
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        for w, b, gm in zip(self.weights, self.biases, self.gammas):
            x = x + gm * F.gelu(F.linear(self.norm(x), w, b))
        return sum(head(x) for head in self.heads.values()) / len(self.heads)


def containers_layer_scale():
    """``nn.ParameterList`` weights used through ``F.linear``, per-layer layer-scale gammas, and an
    ``nn.ModuleDict`` of heads averaged by iterating ``.values()``."""
    g = _gen()
    model = ContainersNet()
    return model, (torch.randn(6, 24, generator=g),), (torch.randint(0, 5, (6,), generator=g),)


class SharedNet(nn.Module):
    def __init__(self, d: int = 24, classes: int = 6):
        super().__init__()
        self.inp = nn.Linear(10, d)
        self.block = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.Tanh())  # applied 3 times (ALBERT-style)
        self.dec = nn.Linear(d, d)
        self.cls = nn.Linear(d, classes)

    def forward(self, x):
        h = self.inp(x)
        for _ in range(3):
            h = h + self.block(h)
        recon = F.linear(self.dec(h), self.inp.weight.t())  # input projection reused transposed
        return self.cls(h), recon


def _shared_loss(out, y, x):
    logits, recon = out
    return F.cross_entropy(logits, y) + 0.1 * F.mse_loss(recon, x)


def shared_weights():
    """One block module applied three times (shared weights) and the input projection's weight reused
    transposed by a decoder; a tuple output with a callable loss reading a reconstruction target."""
    g = _gen()
    model = SharedNet()
    x = torch.randn(6, 10, generator=g)
    return model, (x,), (torch.randint(0, 6, (6,), generator=g), x.clone()), _shared_loss


# ---------------------------------------------------------------- ops
class CumulativeNet(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.gate = nn.Linear(d, d)
        self.out = nn.Linear(3 * d, 1)

    def forward(self, x):
        h = self.inp(x)  # [B, T, d]
        running = h.cumsum(dim=1) / torch.arange(1, h.shape[1] + 1, device=x.device)[None, :, None]
        decay = torch.sigmoid(self.gate(h)).cumprod(dim=1)
        lse = torch.logcumsumexp(h, dim=1)
        return self.out(torch.cat([running, decay * h, lse], -1)).squeeze(-1)


def cumulative_ops():
    """``cumsum`` running mean, ``cumprod`` of sigmoid decays and ``logcumsumexp`` over time; MSE regression."""
    g = _gen()
    model = CumulativeNet()
    return model, (torch.randn(B, T, 8, generator=g),), (torch.randn(B, T, generator=g),)


class WhereNormNet(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        self.l1 = nn.Linear(8, d)
        self.l2 = nn.Linear(d, d)
        self.scale = nn.Parameter(torch.tensor(10.0))
        self.protos = nn.Parameter(torch.randn(5, d))

    def forward(self, x):
        h = self.l1(x)
        h = torch.where(h > 0, h, 0.1 * h)  # leaky, by where with a tensor
        h = torch.where(h.abs() > 2.0, 2.0, h)  # clip, by where with a scalar
        h = self.l2(h)
        z = F.normalize(h, dim=-1)
        p = self.protos / torch.linalg.vector_norm(self.protos, dim=-1, keepdim=True).clamp_min(1e-6)
        return self.scale * z @ p.t(), torch.norm(h, dim=-1)


def _cos_cls_loss(out, y):
    logits, norms = out
    return F.cross_entropy(logits, y) + 1e-2 * (norms - 1.0).pow(2).mean()


def where_normalize():
    """``torch.where`` with a scalar branch, ``F.normalize`` features against prototypes normalised by
    ``torch.linalg.vector_norm``, a learned temperature, and a ``torch.norm`` penalty in the loss."""
    g = _gen()
    model = WhereNormNet()
    return model, (torch.randn(8, 8, generator=g),), (torch.randint(0, 5, (8,), generator=g),), _cos_cls_loss


class GluBilinearNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 32)
        self.glu = nn.GLU(dim=-1)
        self.prelu = nn.PReLU(16)
        self.bil = nn.Bilinear(16, 6, 12)
        self.act = nn.PReLU()
        self.out = nn.Linear(12, 3)

    def forward(self, x, y):
        h = self.prelu(self.glu(self.a(x)))
        return self.out(self.act(self.bil(h, y)))


def glu_bilinear_prelu():
    """``nn.GLU`` halves a Linear, per-channel ``nn.PReLU(16)`` and a shared ``nn.PReLU()``, ``nn.Bilinear``
    of two inputs."""
    g = _gen()
    model = GluBilinearNet()
    return model, (torch.randn(8, 8, generator=g), torch.randn(8, 6, generator=g)), \
        (torch.randint(0, 3, (8,), generator=g),)


class ConformerConv(nn.Module):
    def __init__(self, d: int, k: int = 7):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)

    def forward(self, x):  # [B, T, d]
        h = self.ln(x).transpose(1, 2)
        h = F.glu(self.pw1(h), dim=1)
        h = F.silu(self.bn(self.dw(h)))
        return x + self.pw2(h).transpose(1, 2)


class ConformerBlock(nn.Module):
    def __init__(self, d: int = D):
        super().__init__()
        self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.mha_ln = nn.LayerNorm(d)
        self.mha = nn.MultiheadAttention(d, 4, batch_first=True)
        self.conv = ConformerConv(d)
        self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.ln = nn.LayerNorm(d)

    def forward(self, x, pad_mask):
        x = x + 0.5 * self.ff1(x)
        h = self.mha_ln(x)
        x = x + self.mha(h, h, h, key_padding_mask=pad_mask, need_weights=False)[0]
        x = self.conv(x)
        return self.ln(x + 0.5 * self.ff2(x))


class Conformer(nn.Module):
    def __init__(self, feats: int = 20, d: int = D, classes: int = 10):
        super().__init__()
        self.inp = nn.Linear(feats, d)
        self.blocks = nn.ModuleList(ConformerBlock(d) for _ in range(2))
        self.out = nn.Linear(d, classes)

    def forward(self, x, pad_mask):
        h = self.inp(x)
        for blk in self.blocks:
            h = blk(h, pad_mask)
        return self.out(h).log_softmax(-1)


def _frame_nll(logp, labels):
    return F.nll_loss(logp.transpose(1, 2), labels, ignore_index=-100)


def conformer():
    """Conformer blocks: macaron half-step FFNs, ``nn.MultiheadAttention`` with ``key_padding_mask``, pointwise
    Conv1d -> ``F.glu(dim=1)`` -> depthwise Conv1d -> BatchNorm1d -> SiLU; framewise NLL with -100 padding."""
    g = _gen()
    model = Conformer()
    pad = _lengths_mask([T, 9])
    labels = torch.randint(0, 10, (B, T), generator=g).masked_fill(pad, -100)
    return model, (torch.randn(B, T, 20, generator=g), pad), (labels,), _frame_nll


def conformer_bf16():
    """The conformer above cast whole to bf16 (``model.to(torch.bfloat16)``, bf16 features), loss in float32."""
    model, (x, pad), (labels,), _ = conformer()
    model = model.to(torch.bfloat16)
    return model, (x.to(torch.bfloat16), pad), (labels,), lambda lp, y: _frame_nll(lp.float(), y)


# ---------------------------------------------------------------- losses
class MLP(nn.Module):
    def __init__(self, i: int, o: int, h: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))

    def forward(self, x):
        return self.net(x)


def bce_pos_weight():
    """Multi-label classification: ``nn.BCEWithLogitsLoss(pos_weight=...)`` over 6 labels, float 0/1 targets."""
    g = _gen()
    model = MLP(12, 6)
    crit = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 2.0, 3.0, 0.5, 4.0, 1.5]))
    y = (torch.rand(8, 6, generator=g) > 0.7).float()
    return model, (torch.randn(8, 12, generator=g),), (y,), crit


def _kd(student, teacher_logits, y):
    t = 2.0
    soft = F.kl_div(F.log_softmax(student / t, -1), F.log_softmax(teacher_logits / t, -1), reduction="batchmean",
                    log_target=True) * t * t
    return 0.7 * soft + 0.3 * F.cross_entropy(student, y)


def kl_div_log_target():
    """Knowledge distillation: ``F.kl_div(..., log_target=True, reduction="batchmean")`` against temperature
    scaled teacher logits given as a target, plus hard-label cross entropy."""
    g = _gen()
    model = MLP(12, 7)
    return model, (torch.randn(8, 12, generator=g),), \
        (torch.randn(8, 7, generator=g) * 3, torch.randint(0, 7, (8,), generator=g)), _kd


def _robust(out, y):
    return nn.HuberLoss(delta=0.5)(out[:, 0], y[:, 0]) + F.smooth_l1_loss(out[:, 1:], y[:, 1:], beta=0.2)


def huber_smooth_l1():
    """Robust regression: ``nn.HuberLoss(delta=0.5)`` on one output plus ``F.smooth_l1_loss(beta=0.2)`` on two,
    targets with outliers."""
    g = _gen()
    model = MLP(6, 3)
    y = torch.randn(16, 3, generator=g)
    y[::5] *= 10.0
    return model, (torch.randn(16, 6, generator=g),), (y,), _robust


class Tagger(nn.Module):
    def __init__(self, d: int = D, tags: int = 7):
        super().__init__()
        self.emb = nn.Embedding(V, d, padding_idx=0)
        self.rnn = nn.GRU(d, d, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * d, tags)

    def forward(self, ids):
        return F.log_softmax(self.out(self.rnn(self.emb(ids))[0]), dim=-1)


def nll_weighted_ignore():
    """A BiGRU tagger returning ``log_softmax``; ``nn.NLLLoss(weight=class weights, ignore_index=-100)`` over
    [B*T] with padded positions ignored (weighted mean over kept tokens)."""
    g = _gen()
    model = Tagger()
    pad = _lengths_mask([T, 6])
    ids = torch.randint(1, V, (B, T), generator=g).masked_fill(pad, 0)
    tags = torch.randint(0, 7, (B, T), generator=g).masked_fill(pad, -100)
    crit = nn.NLLLoss(weight=torch.tensor([0.2, 1.0, 1.0, 2.0, 2.0, 0.5, 3.0]), ignore_index=-100)
    return model, (ids,), (tags,), lambda lp, y: crit(lp.reshape(-1, 7), y.reshape(-1))


class Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = MLP(10, 16)
        self.score = nn.Linear(16, 1)

    def forward(self, a, b):
        za, zb = self.enc(a), self.enc(b)
        return za, zb, self.score(za).squeeze(-1), self.score(zb).squeeze(-1)


def _pair_loss(out, same, order):
    za, zb, sa, sb = out
    return F.cosine_embedding_loss(za, zb, same, margin=0.2) + F.margin_ranking_loss(sa, sb, order, margin=0.5)


def cosine_margin_ranking():
    """A siamese encoder: ``F.cosine_embedding_loss`` on pairs (+1/-1 targets, margin) plus
    ``F.margin_ranking_loss`` on their scalar scores."""
    g = _gen()
    model = Siamese()
    same = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    order = torch.tensor([1.0, 1.0, -1.0, -1.0, 1.0, -1.0])
    return model, (torch.randn(6, 10, generator=g), torch.randn(6, 10, generator=g)), (same, order), _pair_loss


def _focal(logits, y, alpha: float = 0.25, gamma: float = 2.0):
    logp = F.log_softmax(logits, dim=-1)
    logpt = logp.gather(1, y.unsqueeze(1)).squeeze(1)
    pt = logpt.exp()
    return (-alpha * (1 - pt) ** gamma * logpt).mean()


def focal_loss():
    """A hand-written multi-class focal loss: ``log_softmax``, ``gather`` of the target class, ``(1-p)**gamma``."""
    g = _gen()
    model = MLP(12, 5)
    return model, (torch.randn(16, 12, generator=g),), (torch.randint(0, 5, (16,), generator=g),), _focal


def _sum_mse(out, y):
    return F.mse_loss(out, y, reduction="sum") + 1e-3 * torch.linalg.vector_norm(out, ord=1)


def mse_sum():
    """MSE with ``reduction="sum"`` plus an L1 ``vector_norm`` penalty on the outputs (autoencoder-ish MLP)."""
    g = _gen()
    model = MLP(10, 10, h=6)
    x = torch.randn(8, 10, generator=g)
    return model, (x,), (x.clone(),), _sum_mse


# ---------------------------------------------------------------- Hugging Face task heads with labels
def _bert_cfg(**kw):
    import transformers as tf
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    base = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    base.update(kw)
    return tf.BertConfig(**base)


class OwnLoss(nn.Module):
    """``forward(**batch)`` -> the Hugging Face model's own ``.loss``."""

    def __init__(self, hf, keys):
        super().__init__()
        self.hf, self.keys = hf, keys

    def forward(self, *tensors):
        return self.hf(**dict(zip(self.keys, tensors))).loss


def _own(hf, batch: dict):
    return OwnLoss(hf, tuple(batch)), tuple(batch.values()), (), lambda out: out


def _batch(g, lengths=(T, 8)):
    pad = _lengths_mask(list(lengths))
    ids = torch.randint(1, V, (B, T), generator=g).masked_fill(pad, 0)
    return ids, (~pad).long(), pad


def bert_token_cls():
    """``BertForTokenClassification`` computing its loss from ``labels`` with -100 on padding, attention mask."""
    import transformers as tf

    g = _gen()
    model = tf.BertForTokenClassification(_bert_cfg(num_labels=5))
    ids, mask, pad = _batch(g)
    labels = torch.randint(0, 5, (B, T), generator=g).masked_fill(pad, -100)
    return _own(model, {"input_ids": ids, "attention_mask": mask, "labels": labels})


def bert_qa():
    """``BertForQuestionAnswering`` with ``start_positions`` / ``end_positions`` (mean of two CE losses)."""
    import transformers as tf

    g = _gen()
    model = tf.BertForQuestionAnswering(_bert_cfg())
    ids, mask, _ = _batch(g)
    tt = torch.zeros(B, T, dtype=torch.long)
    tt[:, 5:] = 1
    return _own(model, {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt,
                        "start_positions": torch.tensor([6, 5]), "end_positions": torch.tensor([9, 7])})


def roberta_multiple_choice():
    """``RobertaForMultipleChoice``: [B, choices, T] inputs flattened inside, labels picking a choice."""
    import transformers as tf

    g = _gen()
    cfg = tf.RobertaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, pad_token_id=1)
    model = tf.RobertaForMultipleChoice(cfg)
    ids = torch.randint(3, V, (B, 3, T), generator=g)
    mask = torch.ones(B, 3, T, dtype=torch.long)
    mask[:, 1, 9:] = 0
    ids = ids.masked_fill(mask == 0, 1)
    return _own(model, {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([2, 0])})


def bert_regression():
    """``BertForSequenceClassification(problem_type="regression", num_labels=1)`` with float labels (MSE)."""
    import transformers as tf

    g = _gen()
    model = tf.BertForSequenceClassification(_bert_cfg(num_labels=1, problem_type="regression"))
    ids, mask, _ = _batch(g)
    return _own(model, {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0.3, -1.2])})


def distilbert_multilabel():
    """``DistilBertForSequenceClassification(problem_type="multi_label_classification")`` with float 0/1 labels
    (BCE-with-logits inside)."""
    import transformers as tf

    g = _gen()
    cfg = tf.DistilBertConfig(vocab_size=V, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                              max_position_embeddings=64, dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0,
                              num_labels=4, problem_type="multi_label_classification")
    model = tf.DistilBertForSequenceClassification(cfg)
    ids, mask, _ = _batch(g)
    labels = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    return _own(model, {"input_ids": ids, "attention_mask": mask, "labels": labels})


def gpt_neox_padded_labels():
    """``GPTNeoXForCausalLM`` (partial rotary, parallel residual) with right padding: attention mask and
    ``labels`` set to -100 on the prompt and on padding."""
    import transformers as tf
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    g = _gen()
    cfg = tf.GPTNeoXConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=64, rotary_pct=0.5, use_cache=False,
                           hidden_dropout=0.0, attention_dropout=0.0)
    model = tf.GPTNeoXForCausalLM(cfg)
    ids, mask, pad = _batch(g)
    labels = ids.masked_fill(pad, -100)
    labels[:, :3] = -100
    return _own(model, {"input_ids": ids, "attention_mask": mask, "labels": labels})


def bart_labels_decoder_ids():
    """``BartForConditionalGeneration`` given ``decoder_input_ids`` explicitly and ``labels`` (with -100 on
    padding), encoder attention mask."""
    import transformers as tf
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    g = _gen()
    cfg = tf.BartConfig(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, use_cache=False)
    model = tf.BartForConditionalGeneration(cfg)
    ids, mask, _ = _batch(g)
    tgt = torch.randint(3, V, (B, 8), generator=g)
    dec = torch.cat([torch.full((B, 1), cfg.decoder_start_token_id), tgt[:, :-1]], 1)
    labels = tgt.clone()
    labels[1, 6:] = -100
    return _own(model, {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec, "labels": labels})


def bert_token_cls_bf16():
    """``BertForTokenClassification`` cast whole to bf16 (``model.to(torch.bfloat16)``), own loss from labels."""
    model, ins, tg, loss = bert_token_cls()
    return model.to(torch.bfloat16), ins, tg, loss


def bert_cls_frozen_encoder():
    """``BertForSequenceClassification`` with embeddings and the first encoder layer frozen
    (``requires_grad_(False)``); a user's loss callable over ``.logits``."""
    import transformers as tf

    g = _gen()
    hf = tf.BertForSequenceClassification(_bert_cfg(num_labels=3))
    hf.bert.embeddings.requires_grad_(False)
    hf.bert.encoder.layer[0].requires_grad_(False)
    ids, mask, _ = _batch(g)

    class Logits(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).logits

    return Logits(hf), (ids, mask), (torch.tensor([2, 0]),), lambda out, y: F.cross_entropy(out, y)


def encoder_key_padding_bf16():
    """The padded pre-norm ``nn.TransformerEncoder`` classifier cast to bf16 whole."""
    model, ins, tg = encoder_key_padding()
    return model.to(torch.bfloat16), ins, tg, lambda out, y: F.cross_entropy(out.float(), y)


# ---------------------------------------------------------------- stop-gradient regions, buffers updated in forward
class SimSiamNoGrad(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, d))
        self.pred = nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, d))

    def forward(self, x1, x2):
        z1 = self.enc(x1)
        with torch.no_grad():  # the target branch: a constant for autograd
            z2 = self.enc(x2)
        return -F.cosine_similarity(self.pred(z1), z2, dim=-1).mean()


def simsiam_no_grad():
    """SimSiam-style stop-gradient written as ``with torch.no_grad():`` around the target branch (same encoder);
    the model returns its own loss."""
    g = _gen()
    model = SimSiamNoGrad()
    return model, (torch.randn(8, 10, generator=g), torch.randn(8, 10, generator=g)), (), lambda out: out


class EmaVQ(nn.Module):
    def __init__(self, d: int = 8, codes: int = 16, decay: float = 0.9):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, d))
        self.dec = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 12))
        self.decay = decay
        self.register_buffer("codebook", torch.randn(codes, d))
        self.register_buffer("ema_count", torch.ones(codes))
        self.register_buffer("ema_sum", self.codebook.clone())

    def forward(self, x):
        z = self.enc(x)
        idx = torch.cdist(z, self.codebook).argmin(-1)
        q = self.codebook[idx]
        if self.training:
            with torch.no_grad():  # EMA codebook update, in place on the buffers
                onehot = F.one_hot(idx, self.codebook.shape[0]).to(z.dtype)
                self.ema_count.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.ema_sum.mul_(self.decay).add_(onehot.t() @ z, alpha=1 - self.decay)
                self.codebook.copy_(self.ema_sum / self.ema_count.clamp_min(1e-5)[:, None])
        commit = F.mse_loss(z, q.detach())
        q = z + (q - z).detach()  # straight-through
        return self.dec(q), commit


def _vq(out, x):
    recon, commit = out
    return F.mse_loss(recon, x) + 0.25 * commit


def ema_vq_codebook():
    """A VQ-VAE whose codebook is learned by EMA: ``torch.cdist`` + argmin lookup, in-place ``mul_`` / ``add_`` /
    ``copy_`` on registered buffers under ``no_grad``, straight-through estimator, commitment loss."""
    g = _gen()
    model = EmaVQ()
    x = torch.randn(16, 12, generator=g)
    return model, (x,), (x.clone(),), _vq


class FakeQuantLinear(nn.Linear):
    def forward(self, x):
        with torch.no_grad():
            scale = self.weight.abs().amax(dim=1, keepdim=True) / 127.0
        wq = self.weight + (torch.round(self.weight / scale).clamp(-127, 127) * scale - self.weight).detach()
        return F.linear(x, wq, self.bias)


def fake_quant_qat():
    """Quantisation-aware training: per-row int8 fake quantisation of Linear weights, the scale computed under
    ``torch.no_grad()`` from the trainable weight, straight-through rounding via ``detach``."""
    g = _gen()
    model = nn.Sequential(FakeQuantLinear(12, 32), nn.ReLU(), FakeQuantLinear(32, 5))
    return model, (torch.randn(8, 12, generator=g),), (torch.randint(0, 5, (8,), generator=g),)


# ---------------------------------------------------------------- more losses
def soft_target_ce():
    """Mixup-style soft labels: ``F.cross_entropy`` with float class-probability targets (and label smoothing)."""
    g = _gen()
    model = MLP(12, 5)
    y = torch.softmax(torch.randn(8, 5, generator=g) * 2, -1)
    return model, (torch.randn(8, 12, generator=g),), (y,), \
        lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1)


def soft_target_named_ce():
    """Soft (probability) targets handed to the named ``"cross_entropy"`` loss (no callable)."""
    g = _gen()
    model = MLP(12, 5)
    y = torch.softmax(torch.randn(8, 5, generator=g) * 2, -1)
    return {"model": model, "example_inputs": (torch.randn(8, 12, generator=g),), "targets": (y,),
            "loss": "cross_entropy"}


class MeanVar(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = MLP(6, 2)

    def forward(self, x):
        mu, raw = self.body(x).unbind(-1)
        return mu, F.softplus(raw) + 1e-3


def gaussian_poisson_nll():
    """Heteroscedastic regression: ``nn.GaussianNLLLoss`` on (mean, softplus variance) plus
    ``F.poisson_nll_loss(log_input=True)`` on the mean read as a log-rate against counts."""
    g = _gen()
    model = MeanVar()
    y = torch.randn(16, generator=g)
    counts = torch.poisson(torch.full((16,), 3.0), generator=g)
    gnll = nn.GaussianNLLLoss()
    return model, (torch.randn(16, 6, generator=g),), (y, counts), \
        lambda out, y, c: gnll(out[0], y, out[1]) + 0.1 * F.poisson_nll_loss(out[0], c, log_input=True)


def multi_margin_softmargin():
    """``nn.MultiMarginLoss`` (multi-class hinge) plus ``nn.MultiLabelSoftMarginLoss`` on a second head."""
    g = _gen()
    model = MLP(12, 9)
    y = torch.randint(0, 5, (8,), generator=g)
    ml = (torch.rand(8, 4, generator=g) > 0.5).float()
    hinge, soft = nn.MultiMarginLoss(margin=0.5), nn.MultiLabelSoftMarginLoss()
    return model, (torch.randn(8, 12, generator=g),), (y, ml), \
        lambda out, y, ml: hinge(out[:, :5], y) + soft(out[:, 5:], ml)


# ---------------------------------------------------------------- wrappers, precision, containers
def orthogonal_param():
    """``parametrizations.orthogonal`` on a square Linear (matrix exponential / Cayley map of a skew matrix)."""
    from torch.nn.utils.parametrizations import orthogonal

    g = _gen()
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), orthogonal(nn.Linear(16, 16)), nn.Tanh(), nn.Linear(16, 4))
    return model, (torch.randn(8, 8, generator=g),), (torch.randint(0, 4, (8,), generator=g),)


def full_transformer_masks():
    """``nn.Transformer`` (norm_first) with ``tgt_mask`` from ``generate_square_subsequent_mask``,
    ``src_key_padding_mask`` / ``memory_key_padding_mask`` / ``tgt_key_padding_mask`` and ``tgt_is_causal``."""
    g = _gen()

    class Seq2Seq(nn.Module):
        def __init__(self, d: int = D):
            super().__init__()
            self.emb = nn.Embedding(V, d)
            self.t = nn.Transformer(d, 4, 1, 1, 64, dropout=0.0, batch_first=True, norm_first=True)
            self.head = nn.Linear(d, V)

        def forward(self, src, tgt, src_pad, tgt_pad):
            causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            h = self.t(self.emb(src), self.emb(tgt), tgt_mask=causal, src_key_padding_mask=src_pad,
                       tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
            return self.head(h)

    model = Seq2Seq()
    src_pad, tgt_pad = _lengths_mask([T, 9]), _lengths_mask([8, 6], 8)
    src = torch.randint(1, V, (B, T), generator=g)
    tgt = torch.randint(1, V, (B, 8), generator=g)
    labels = torch.randint(1, V, (B, 8), generator=g).masked_fill(tgt_pad, -100)
    return model, (src, tgt, src_pad, tgt_pad), (labels,), _lm_ignore


def sdpa_causal_fp16():
    """The SDPA GPT cast whole to fp16 (``model.half()``), loss on float32 logits."""
    model, ins, tg = sdpa_causal()
    return model.half(), ins, tg, lambda out, y: _lm_ignore(out.float(), y)


def mha_bf16():
    """A bare ``nn.MultiheadAttention`` (batch_first) block in bf16: the smallest form of the bf16 encoder rows."""
    g = _gen()

    class Block(nn.Module):
        def __init__(self, d: int = D):
            super().__init__()
            self.mha = nn.MultiheadAttention(d, 4, batch_first=True)
            self.head = nn.Linear(d, 3)

        def forward(self, x):
            return self.head(self.mha(x, x, x, need_weights=False)[0].mean(1))

    model = Block().to(torch.bfloat16)
    return model, (torch.randn(B, T, D, generator=g).to(torch.bfloat16),), (torch.randint(0, 3, (B,), generator=g),), \
        lambda out, y: F.cross_entropy(out.float(), y)


def compiled_module():
    """A user handing over ``torch.compile(model)`` (an ``OptimizedModule``) instead of the module."""
    g = _gen()
    model = torch.compile(MLP(12, 5))
    return model, (torch.randn(8, 12, generator=g),), (torch.randint(0, 5, (8,), generator=g),)


# ---------------------------------------------------------------- more Hugging Face heads with labels
def llama_seqcls_padded():
    """``LlamaForSequenceClassification`` (pools the last non-pad token found through ``pad_token_id``) with
    right padding and integer labels, own loss."""
    import transformers as tf
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    g = _gen()
    cfg = tf.LlamaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64, num_labels=3,
                         pad_token_id=0, use_cache=False)
    model = tf.LlamaForSequenceClassification(cfg)
    ids, mask, _ = _batch(g)
    return _own(model, {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([1, 2])})


def bert_pretraining():
    """``BertForPreTraining``: MLM ``labels`` (-100 except masked positions) plus ``next_sentence_label``."""
    import transformers as tf

    g = _gen()
    model = tf.BertForPreTraining(_bert_cfg())
    ids, mask, _ = _batch(g)
    labels = torch.full((B, T), -100)
    labels[:, [2, 5]] = ids[:, [2, 5]]
    ids = ids.clone()
    ids[:, [2, 5]] = 3  # [MASK]
    return _own(model, {"input_ids": ids, "attention_mask": mask, "labels": labels,
                        "next_sentence_label": torch.tensor([0, 1])})


def wav2vec2_ctc():
    """``Wav2Vec2ForCTC`` computing its CTC loss from padded ``labels`` (-100) on raw audio."""
    import transformers as tf
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    g = _gen()
    cfg = tf.Wav2Vec2Config(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_dropout=0.0,
                            attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                            final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, pad_token_id=0,
                            ctc_loss_reduction="mean")
    model = tf.Wav2Vec2ForCTC(cfg)
    audio = torch.randn(B, 400, generator=g)
    labels = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 3, -100, -100]])
    return _own(model, {"input_values": audio, "labels": labels})
