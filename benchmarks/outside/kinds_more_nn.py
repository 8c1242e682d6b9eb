"""More outside models "of the kinds" of the zoo, written in plain ``torch.nn`` (no torchvision): DenseNets
(memory-efficient with ``torch.utils.checkpoint``; DenseNet-BC), U-Nets (transposed-conv upsampling with
BatchNorm, attention gates, an odd image size whose skips need padding), recurrent models (LSTM with
``proj_size``, 3-layer LSTM, 2-layer bidirectional GRU, an LSTM language model with tied embeddings) and
an expert-choice MoE.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_more_nn.py:<name>``:
it returns ``(model, example_inputs, targets)`` at a tiny size. Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from roam_tvm.zoo.families import _gen, _tokens

F = nn.functional
B = 2


def _img(g, c=3, s=32):
    return torch.randn(B, c, s, s, generator=g)


def _cls(g, n=5):
    return torch.randint(0, n, (B,), generator=g)


# DenseNet
class _DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv (bottleneck, ``bn_size * growth`` wide) then BN-ReLU-3x3 conv (``growth``);
    ``memory_efficient`` recomputes the bottleneck's concat + BN + ReLU + conv in the backward
    (``torch.utils.checkpoint``, as torchvision's DenseNet)."""

    def __init__(self, cin, growth, bn_size, memory_efficient):
        super().__init__()
        self.n1, self.c1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.n2, self.c2 = nn.BatchNorm2d(bn_size * growth), nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)
        self.memory_efficient = memory_efficient

    def _bottleneck(self, *feats):
        return self.c1(F.relu(self.n1(torch.cat(feats, 1))))

    def forward(self, feats):
        if self.memory_efficient:
            h = checkpoint(self._bottleneck, *feats, use_reentrant=False)
        else:
            h = self._bottleneck(*feats)
        return self.c2(F.relu(self.n2(h)))


class _DenseNet(nn.Module):
    def __init__(self, blocks, growth, bn_size, stem, compression=0.5, memory_efficient=False, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU())
        self.blocks, self.trans, c = nn.ModuleList(), nn.ModuleList(), stem
        for i, n in enumerate(blocks):
            self.blocks.append(nn.ModuleList(_DenseLayer(c + j * growth, growth, bn_size, memory_efficient)
                                             for j in range(n)))
            c += n * growth
            if i < len(blocks) - 1:
                out = int(c * compression)
                self.trans.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, out, 1, bias=False),
                                                nn.AvgPool2d(2)))
                c = out
        self.norm, self.fc = nn.BatchNorm2d(c), nn.Linear(c, classes)

    def forward(self, x):
        x = self.stem(x)
        for i, block in enumerate(self.blocks):
            feats = [x]
            for layer in block:
                feats.append(layer(feats))
            x = torch.cat(feats, 1)
            if i < len(self.trans):
                x = self.trans[i](x)
        return self.fc(F.relu(self.norm(x)).mean((2, 3)))


def densenet_ckpt():
    """DenseNet (2 blocks of 3 layers, growth 8, bn_size 4) with ``memory_efficient=True``: every
    bottleneck wrapped in ``torch.utils.checkpoint``, 16x16 images."""
    g = _gen()
    return _DenseNet((3, 3), 8, 4, 16, memory_efficient=True), (_img(g, s=16),), (_cls(g),)


def densenet_bc():
    """DenseNet-BC (3 blocks of 2 layers, growth 12, bn_size 2, compression 0.5), 16x16 images."""
    g = _gen()
    return _DenseNet((2, 2, 2), 12, 2, 24), (_img(g, s=16),), (_cls(g),)


# U-Net
def _double(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class _Gate(nn.Module):
    """Attention gate (Attention U-Net): the skip scaled by sigmoid(psi(relu(Wg g + Wx x)))."""

    def __init__(self, c_g, c_x, c_mid):
        super().__init__()
        self.wg = nn.Sequential(nn.Conv2d(c_g, c_mid, 1), nn.BatchNorm2d(c_mid))
        self.wx = nn.Sequential(nn.Conv2d(c_x, c_mid, 1), nn.BatchNorm2d(c_mid))
        self.psi = nn.Sequential(nn.Conv2d(c_mid, 1, 1), nn.BatchNorm2d(1), nn.Sigmoid())

    def forward(self, g, x):
        return x * self.psi(F.relu(self.wg(g) + self.wx(x)))


class _UNet(nn.Module):
    """Three levels, transposed-conv upsampling; ``gates`` adds attention gates on the skips; an upsampled
    map smaller than its skip (odd sizes) is zero-padded to it, as in common U-Net code."""

    def __init__(self, c=8, classes=3, gates=False):
        super().__init__()
        self.d1, self.d2, self.mid = _double(3, c), _double(c, 2 * c), _double(2 * c, 4 * c)
        self.u2, self.u1 = nn.ConvTranspose2d(4 * c, 2 * c, 2, 2), nn.ConvTranspose2d(2 * c, c, 2, 2)
        self.c2, self.c1 = _double(4 * c, 2 * c), _double(2 * c, c)
        self.g2 = _Gate(2 * c, 2 * c, c) if gates else None
        self.g1 = _Gate(c, c, c // 2) if gates else None
        self.out = nn.Conv2d(c, classes, 1)

    def _up(self, up, conv, gate, x, skip):
        x = up(x)
        dy, dx = skip.shape[2] - x.shape[2], skip.shape[3] - x.shape[3]
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        if gate is not None:
            skip = gate(x, skip)
        return conv(torch.cat([skip, x], 1))

    def forward(self, x):
        s1 = self.d1(x)
        s2 = self.d2(F.max_pool2d(s1, 2))
        m = self.mid(F.max_pool2d(s2, 2))
        return self.out(self._up(self.u1, self.c1, self.g1, self._up(self.u2, self.c2, self.g2, m, s2), s1))


def _seg(model, size):
    g = _gen()
    return model, (_img(g, s=size),), (torch.randint(0, 3, (B, size, size), generator=g),)


def unet_convt_bn():
    """U-Net, 3 levels, ConvTranspose2d upsampling, BatchNorm, 32x32 images, 3-class segmentation."""
    _gen()
    return _seg(_UNet(), 32)


def unet_attention():
    """Attention U-Net (gates on both skips), 32x32 images."""
    _gen()
    return _seg(_UNet(gates=True), 32)


def unet_odd():
    """U-Net on 30x30 images: 30 -> 15 -> 7, so the second upsampling (7 -> 14) is padded to its 15x15 skip."""
    _gen()
    return _seg(_UNet(), 30)


# recurrent
class _RNNHead(nn.Module):
    def __init__(self, rnn: nn.Module, width: int, classes: int = 5):
        super().__init__()
        self.rnn, self.head = rnn, nn.Linear(width, classes)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def _seq(model):
    g = torch.Generator().manual_seed(0)
    return model, (torch.randn(4, 12, 8, generator=g),), (torch.randint(0, 5, (4,), generator=g),)


def lstm_proj():
    """2-layer LSTM, hidden 32 projected to 12 (``proj_size``), 12 steps."""
    torch.manual_seed(0)
    return _seq(_RNNHead(nn.LSTM(8, 32, num_layers=2, proj_size=12, batch_first=True), 12))


def lstm3():
    """3-layer LSTM, hidden 16, 12 steps."""
    torch.manual_seed(0)
    return _seq(_RNNHead(nn.LSTM(8, 16, num_layers=3, batch_first=True), 16))


def gru_bi2():
    """2-layer bidirectional GRU, hidden 16, 12 steps (the second layer reads both directions)."""
    torch.manual_seed(0)
    return _seq(_RNNHead(nn.GRU(8, 16, num_layers=2, bidirectional=True, batch_first=True), 32))


class _LSTMLM(nn.Module):
    """Embedding -> 1-layer LSTM -> linear over the vocabulary at every step, the linear's weight tied
    to the embedding's."""

    def __init__(self, vocab=128, width=32):
        super().__init__()
        self.emb, self.rnn = nn.Embedding(vocab, width), nn.LSTM(width, width, batch_first=True)
        self.out = nn.Linear(width, vocab)
        self.out.weight = self.emb.weight

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h)


def lstm_lm():
    """An LSTM language model with tied embeddings, vocab 128, width 32, 2 x 10 tokens."""
    g = _gen()
    return _LSTMLM(), (_tokens(g, B, 10, 128),), (_tokens(g, B, 10, 128),)


# MoE
class _ExpertChoice(nn.Module):
    """Expert-choice routing: each of ``experts`` picks its top ``capacity`` tokens by router softmax,
    so a token may go to none or to several; outputs are scattered back weighted by the gate."""

    def __init__(self, width, ffn, experts, capacity):
        super().__init__()
        self.router = nn.Linear(width, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, width, ffn) * width ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, width) * ffn ** -0.5)
        self.capacity = capacity

    def forward(self, x):  # x: [N, D]
        gates = torch.softmax(self.router(x), -1).t()  # [E, N]
        weight, idx = torch.topk(gates, self.capacity, dim=-1)  # [E, C]
        picked = x[idx]  # [E, C, D]
        y = torch.bmm(F.gelu(torch.bmm(picked, self.w1)), self.w2) * weight.unsqueeze(-1)
        return x + torch.zeros_like(x).index_add(0, idx.reshape(-1), y.reshape(-1, x.shape[1]))


class _ECLM(nn.Module):
    def __init__(self, vocab=256, width=32, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(_ExpertChoice(width, 64, 4, 6) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, ids):
        b, t = ids.shape
        h = self.emb(ids).reshape(b * t, -1)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h)).reshape(b, t, -1)


def moe_expert_choice():
    """An expert-choice MoE LM: 2 layers of 4 experts, each taking its top 6 of 24 tokens."""
    g = _gen()
    return _ECLM(), (_tokens(g, B, 12, 256),), (_tokens(g, B, 12, 256),)
