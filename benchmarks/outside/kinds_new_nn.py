"""Outside models "of the kinds" of the zoo written in plain ``torch.nn`` that kinds_more_nn.py did not cover:
DenseNets (no bottleneck with dropout; a preallocated-buffer "memory-efficient concat"), recurrent models
written with ``nn.GRUCell`` / ``nn.LSTMCell`` loops, an LSTM with inter-layer dropout, a GRU without biases,
an ``nn.RNN`` over ``pack_padded_sequence``, a token-choice MoE returning ``(logits, aux_loss)`` and a CNN
returning a dict with an auxiliary head.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_new_nn.py:<name>``:
it returns ``(model, example_inputs, targets[, loss])`` at a tiny size. Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from roam_tvm.zoo.families import _gen, _tokens

F = nn.functional
B = 2


def _img(g, c=3, s=32):
    return torch.randn(B, c, s, s, generator=g)


def _cls(g, n=5):
    return torch.randint(0, n, (B,), generator=g)


# DenseNet
class _PlainDense(nn.Module):
    """DenseNet without bottlenecks: BN-ReLU-3x3 conv (``growth``) then dropout, concatenated."""

    def __init__(self, cin, growth, layers, drop):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.BatchNorm2d(cin + i * growth), nn.ReLU(),
                                                  nn.Conv2d(cin + i * growth, growth, 3, 1, 1, bias=False),
                                                  nn.Dropout(drop)) for i in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = torch.cat([x, layer(x)], 1)
        return x


class _BufferDense(nn.Module):
    """A preallocated-buffer concat: every layer's features are written into one buffer of the block's
    final width (``slice_scatter``; in-place slice assignment would break PyTorch's own backward, which
    saved the slices BatchNorm read) and later layers read a prefix of it, instead of ``torch.cat``."""

    def __init__(self, cin, growth, layers):
        super().__init__()
        self.cin, self.growth = cin, growth
        self.layers = nn.ModuleList(nn.Sequential(nn.BatchNorm2d(cin + i * growth), nn.ReLU(),
                                                  nn.Conv2d(cin + i * growth, growth, 3, 1, 1, bias=False))
                                    for i in range(layers))

    def forward(self, x):
        b, _, h, w = x.shape
        buf = x.new_zeros(b, self.cin + len(self.layers) * self.growth, h, w)
        buf = buf.slice_scatter(x, 1, 0, self.cin)
        c = self.cin
        for layer in self.layers:
            buf = buf.slice_scatter(layer(buf[:, :c]), 1, c, c + self.growth)
            c += self.growth
        return buf


class _DenseNet(nn.Module):
    def __init__(self, block, growth=12, layers=(3, 3), classes=5, **kw):
        super().__init__()
        c = 2 * growth
        mods = [nn.Conv2d(3, c, 3, 1, 1, bias=False)]
        for i, n in enumerate(layers):
            mods.append(block(c, growth, n, **kw))
            c += n * growth
            if i < len(layers) - 1:  # transition: BN-ReLU-1x1 conv (halving the channels) + 2x2 avgpool
                mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2)]
                c //= 2
        mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
        self.net = nn.Sequential(*mods)

    def forward(self, x):
        return self.net(x)


def densenet_dropout():
    """DenseNet without bottlenecks (growth 12, 3+3 layers, dropout 0.2 after every conv), 32x32 images."""
    g = _gen()
    return _DenseNet(_PlainDense, drop=0.2), (_img(g),), (_cls(g),)


def densenet_buffer():
    """DenseNet (growth 8, 4+4 layers) whose blocks write into one preallocated buffer (``slice_scatter``),
    32x32 images."""
    g = _gen()
    return _DenseNet(_BufferDense, growth=8, layers=(4, 4)), (_img(g),), (_cls(g),)


# recurrent
class _CellLoop(nn.Module):
    """``layers`` stacked ``nn.GRUCell`` / ``nn.LSTMCell`` run step by step over a [B, T, F] input, then a
    linear classifier on the last hidden state."""

    def __init__(self, cell: str, feat=8, width=16, layers=1, classes=5):
        super().__init__()
        cls = {"gru": nn.GRUCell, "lstm": nn.LSTMCell}[cell]
        self.cells = nn.ModuleList(cls(feat if i == 0 else width, width) for i in range(layers))
        self.lstm, self.width, self.head = cell == "lstm", width, nn.Linear(width, classes)

    def forward(self, x):
        b, t, _ = x.shape
        hs = [x.new_zeros(b, self.width) for _ in self.cells]
        cs = [x.new_zeros(b, self.width) for _ in self.cells]
        for step in range(t):
            inp = x[:, step]
            for i, cell in enumerate(self.cells):
                if self.lstm:
                    hs[i], cs[i] = cell(inp, (hs[i], cs[i]))
                else:
                    hs[i] = cell(inp, hs[i])
                inp = hs[i]
        return self.head(hs[-1])


class _RNNHead(nn.Module):
    def __init__(self, rnn: nn.Module, width: int, classes: int = 5):
        super().__init__()
        self.rnn, self.head = rnn, nn.Linear(width, classes)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def _seq(model, steps=12):
    g = torch.Generator().manual_seed(0)
    return model, (torch.randn(4, steps, 8, generator=g),), (torch.randint(0, 5, (4,), generator=g),)


def gru_cell_loop():
    """A 1-layer ``nn.GRUCell`` loop, hidden 16, 12 steps; the model of the ``--precision`` rows."""
    torch.manual_seed(0)
    return _seq(_CellLoop("gru"))


def lstm_cell_loop2():
    """Two stacked ``nn.LSTMCell`` loops, hidden 16, 10 steps."""
    torch.manual_seed(0)
    return _seq(_CellLoop("lstm", layers=2), steps=10)


def lstm_dropout():
    """2-layer ``nn.LSTM`` with inter-layer dropout 0.25, hidden 16, 12 steps."""
    torch.manual_seed(0)
    return _seq(_RNNHead(nn.LSTM(8, 16, num_layers=2, dropout=0.25, batch_first=True), 16))


def gru_nobias():
    """2-layer ``nn.GRU(bias=False)``, hidden 16, 12 steps."""
    torch.manual_seed(0)
    return _seq(_RNNHead(nn.GRU(8, 16, num_layers=2, bias=False, batch_first=True), 16))


class _PackedRNN(nn.Module):
    """``nn.RNN`` over a ``pack_padded_sequence`` of sorted lengths; each sequence's last valid output
    (from the padded unpacked output) goes to a linear classifier."""

    def __init__(self, lengths, width=16):
        super().__init__()
        self.register_buffer("lengths", torch.as_tensor(lengths), persistent=False)
        self.rnn, self.head = nn.RNN(8, width, batch_first=True), nn.Linear(width, 5)

    def forward(self, x):
        packed = pack_padded_sequence(x, self.lengths.cpu(), batch_first=True)
        out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=x.shape[1])
        last = out[torch.arange(x.shape[0]), self.lengths - 1]
        return self.head(last)


def rnn_packed():
    """``nn.RNN`` (tanh, hidden 16) over packed sequences of lengths 12, 9, 7, 4."""
    torch.manual_seed(0)
    return _seq(_PackedRNN([12, 9, 7, 4]))


# MoE with an auxiliary loss
class _TokenChoice(nn.Module):
    """Top-2 token-choice MoE FFN (4 experts, weights renormalised) with the Switch load-balancing loss."""

    def __init__(self, width=32, ffn=48, experts=4):
        super().__init__()
        self.router = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(width, ffn), nn.GELU(), nn.Linear(ffn, width))
                                     for _ in range(experts))

    def forward(self, x):  # x: [N, D]
        probs = torch.softmax(self.router(x), -1)
        weight, idx = torch.topk(probs, 2, dim=-1)
        weight = weight / weight.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            gate = (weight * (idx == e)).sum(-1, keepdim=True)  # 0 for tokens not routed to e
            out = out + gate * expert(x)
        load = F.one_hot(idx[:, 0], len(self.experts)).float().mean(0)
        return x + out, len(self.experts) * (load * probs.mean(0)).sum()


class _MoELM(nn.Module):
    def __init__(self, vocab=256, width=32, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(_TokenChoice(width) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, ids):
        b, t = ids.shape
        h, aux = self.emb(ids).reshape(b * t, -1), 0.0
        for layer in self.layers:
            h, a = layer(h)
            aux = aux + a
        return self.head(self.norm(h)).reshape(b, t, -1), aux


def _moe_loss(out, labels):
    logits, aux = out
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten()) + 0.01 * aux


def moe_aux_loss():
    """A token-choice MoE LM (2 layers, 4 dense-computed experts, top-2) returning ``(logits, aux_loss)``;
    the loss callable adds 0.01 x the load-balancing loss to the LM loss."""
    g = _gen()
    return _MoELM(), (_tokens(g, B, 12, 256),), (_tokens(g, B, 12, 256),), _moe_loss


# dict outputs
class _AuxCNN(nn.Module):
    """A small CNN with a main and an auxiliary (mid-network) classifier; returns a dict of both."""

    def __init__(self, c=16, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 1, 1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2))
        self.body = nn.Sequential(nn.Conv2d(c, 2 * c, 3, 1, 1), nn.BatchNorm2d(2 * c), nn.ReLU(), nn.MaxPool2d(2))
        self.aux = nn.Linear(c, classes)
        self.head = nn.Linear(2 * c, classes)

    def forward(self, x):
        s = self.stem(x)
        return {"logits": self.head(self.body(s).mean((2, 3))), "aux_logits": self.aux(s.mean((2, 3)))}


def _aux_loss(out, target):
    return F.cross_entropy(out["logits"], target) + 0.4 * F.cross_entropy(out["aux_logits"], target)


def cnn_dict_aux():
    """A CNN returning ``{"logits", "aux_logits"}``, trained on both (aux weight 0.4, as Inception)."""
    g = _gen()
    return _AuxCNN(), (_img(g),), (_cls(g),), _aux_loss


# LLaMA as Meta's reference code writes it: complex rotary embeddings
def _freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    freqs = torch.outer(torch.arange(end, dtype=torch.float32), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def _rope(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    shape = [d if i in (1, xq_.ndim - 1) else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    return (torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq),
            torch.view_as_real(xk_ * freqs_cis).flatten(3).type_as(xk))


class _MetaBlock(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.heads = heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1, self.w2, self.w3 = nn.Linear(dim, ffn, bias=False), nn.Linear(ffn, dim, bias=False), \
            nn.Linear(dim, ffn, bias=False)
        self.n1, self.n2 = nn.RMSNorm(dim, eps=1e-5), nn.RMSNorm(dim, eps=1e-5)

    def forward(self, x, freqs_cis, mask):
        b, t, d = x.shape
        h = self.n1(x)
        q, k, v = (w(h).view(b, t, self.heads, -1) for w in (self.wq, self.wk, self.wv))
        q, k = _rope(q, k, freqs_cis)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(2, 3) / (d // self.heads) ** 0.5 + mask, -1)
        x = x + self.wo((att @ v).transpose(1, 2).reshape(b, t, d))
        h = self.n2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class _MetaLlama(nn.Module):
    def __init__(self, vocab=256, dim=64, heads=4, layers=2, ffn=96, max_seq=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(_MetaBlock(dim, heads, ffn) for _ in range(layers))
        self.norm, self.out = nn.RMSNorm(dim, eps=1e-5), nn.Linear(dim, vocab, bias=False)
        self.dim, self.heads, self.max_seq = dim, heads, max_seq

    def forward(self, ids):
        t = ids.shape[1]
        freqs_cis = _freqs_cis(self.dim // self.heads, self.max_seq)[:t]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.emb(ids)
        for layer in self.layers:
            h = layer(h, freqs_cis, mask)
        return self.out(self.norm(h))


def meta_llama():
    """LLaMA as Meta's reference ``model.py`` writes it (complex RoPE: ``torch.polar``,
    ``view_as_complex``, ``view_as_real``), 2 layers, dim 64, vocab 256, 2 x 12 tokens."""
    g = _gen()
    return _MetaLlama(), (_tokens(g, B, 12, 256),), (_tokens(g, B, 12, 256),)
