"""Outside models built on lookups: embedding bags, gathers, recommender systems, padded text.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/embeddings.py:<name>``:
it returns ``(model, example_inputs, targets)`` (and a loss where cross-entropy is not the one), at
the sizes the breadth probes measured. Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

from roam_tvm.zoo.families import _gen  # seeded weights and data, as the families


class FastText(nn.Module):
    """fastText: EmbeddingBag(mean, padding_idx=0) over padded token rows, then a linear."""

    def __init__(self, vocab: int, dim: int, classes: int, mode: str = "mean"):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode=mode, padding_idx=0)
        self.fc = nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.fc(self.bag(tokens))


def fasttext():
    """fastText classifier, 32 padded rows of 64 tokens (24 padding), vocab 5,000."""
    g = _gen()
    x = torch.randint(0, 5000, (32, 64), generator=g)
    x[:, 40:] = 0
    return FastText(5000, 64, 10), (x,), (torch.randint(0, 10, (32,), generator=g),)


class FastTextOffsets(nn.Module):
    """EmbeddingBag(sum) over a flat ragged batch (text + offsets), 2-layer head."""

    def __init__(self, vocab: int, dim: int, classes: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode="sum")
        self.fc = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, text, offsets):
        return self.fc(self.bag(text, offsets))


def fasttext_offsets():
    """fastText over a ragged batch: 32 texts of 1-39 tokens as one flat tensor plus offsets."""
    g = _gen()
    lens = torch.randint(1, 40, (32,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)[:-1]])
    text = torch.randint(0, 5000, (int(lens.sum()),), generator=g)
    return FastTextOffsets(5000, 64, 4), (text, offsets), (torch.randint(0, 4, (32,), generator=g),)


class MaxBag(nn.Module):
    """EmbeddingBag(max) then a linear."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(1000, 32, mode="max")
        self.fc = nn.Linear(32, 5)

    def forward(self, x, offsets):
        return self.fc(self.bag(x, offsets))


def maxbag():
    """EmbeddingBag(max): 32 bags of 8 indices into 1,000 rows of 32."""
    g = _gen()
    x = torch.randint(0, 1000, (256,), generator=g)
    offsets = torch.arange(0, 256, 8)
    return MaxBag(), (x, offsets), (torch.randint(0, 5, (32,), generator=g),)


class SkipGram(nn.Module):
    """word2vec skip-gram with negative sampling: centre . (context, negatives) logits."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.cin = nn.Embedding(vocab, dim)
        self.cout = nn.Embedding(vocab, dim)

    def forward(self, centre, context):  # context: (B, 1 + K)
        return torch.einsum("bd,bkd->bk", self.cin(centre), self.cout(context))


def skipgram():
    """word2vec skip-gram, 128 centres against 1 context + 5 negatives, vocab 5,000."""
    g = _gen()
    return (SkipGram(5000, 64), (torch.randint(0, 5000, (128,), generator=g),
            torch.randint(0, 5000, (128, 6), generator=g)), (torch.zeros(128, dtype=torch.long),))


class Pointer(nn.Module):
    """GRU encoder over padded sequences; gathers (batch, position) pairs: each sequence's
    last valid step (``h[arange(B), lengths - 1]``) and candidate spans (``h[b, pos]``) to score."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.q = nn.Linear(dim, dim)

    def forward(self, tokens, lengths, cand):  # cand: (B, C) positions, may be negative
        h, _ = self.rnn(self.emb(tokens))
        b = torch.arange(tokens.shape[0])
        last = h[b, lengths - 1]  # (B, D)
        cands = h[b[:, None], cand]  # (B, C, D)
        return torch.einsum("bd,bcd->bc", self.q(last), cands)


def pointer():
    """Pointer scorer: GRU over 16 padded sequences of up to 24, advanced-index gathers."""
    g = _gen()
    batch, steps = 16, 24
    lengths = torch.randint(4, steps + 1, (batch,), generator=g)
    tok = torch.randint(1, 1000, (batch, steps), generator=g)
    tok[torch.arange(steps)[None, :] >= lengths[:, None]] = 0
    cand = torch.randint(-4, steps, (batch, 8), generator=g)
    return Pointer(1000, 64), (tok, lengths, cand), (torch.randint(0, 8, (batch,), generator=g),)


class RecSys(nn.Module):
    """Two-tower-ish CTR model: user / item / category embeddings, a padded multi-hot
    history (Embedding padding_idx=0, masked mean) and a sparse-feature EmbeddingBag."""

    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(2000, 32)
        self.item = nn.Embedding(5000, 32, padding_idx=0)
        self.cat = nn.Embedding(50, 8)
        self.feat = nn.EmbeddingBag(300, 16, mode="sum")
        self.mlp = nn.Sequential(nn.Linear(32 * 3 + 8 + 16, 128), nn.ReLU(), nn.Linear(128, 2))

    def forward(self, user, item, cat, history, feats, feat_off):
        hist = self.item(history)  # (B, H, 32)
        mask = (history != 0).unsqueeze(-1).to(hist.dtype)
        hist = (hist * mask).sum(1) / mask.sum(1).clamp(min=1)
        z = torch.cat([self.user(user), self.item(item), hist, self.cat(cat), self.feat(feats, feat_off)], -1)
        return self.mlp(z)


def recsys():
    """CTR model, batch 64: four embedding kinds, a masked-mean history of 20 (8 padding)."""
    g = _gen()
    batch = 64
    hist = torch.randint(1, 5000, (batch, 20), generator=g)
    hist[:, 12:] = 0
    off = torch.arange(0, batch * 3, 3)
    inputs = (torch.randint(0, 2000, (batch,), generator=g), torch.randint(1, 5000, (batch,), generator=g),
              torch.randint(0, 50, (batch,), generator=g), hist,
              torch.randint(0, 300, (batch * 3,), generator=g), off)
    return RecSys(), inputs, (torch.randint(0, 2, (batch,), generator=g),)


class DLRM(nn.Module):
    """DLRM: sparse features through EmbeddingBags (sum, offsets), dense through an MLP,
    pairwise dot interactions read with two index tensors (``Z[:, li, lj]``)."""

    def __init__(self, tables=(1000, 500, 2000, 300), dim: int = 16, dense: int = 13):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum") for n in tables)
        self.bot = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        f = len(tables) + 1
        li, lj = torch.tril_indices(f, f, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.top = nn.Sequential(nn.Linear(dim + len(li), 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, dense, idx, off):  # idx: (F, N), off: (F, B)
        x = self.bot(dense)
        t = torch.stack([x] + [b(idx[k], off[k]) for k, b in enumerate(self.bags)], 1)
        z = torch.bmm(t, t.transpose(1, 2))
        return self.top(torch.cat([x, z[:, self.li, self.lj]], 1))


def dlrm():
    """DLRM, batch 128: four sum-bags of 4 indices, 13 dense features, pairwise interactions."""
    g = _gen()
    batch, per = 128, 4
    idx = torch.stack([torch.randint(0, n, (batch * per,), generator=g) for n in (1000, 500, 2000, 300)])
    off = torch.arange(0, batch * per, per).expand(4, batch).contiguous()
    return DLRM(), (torch.randn(batch, 13, generator=g), idx, off), (torch.randint(0, 2, (batch,), generator=g),)


class NCF(nn.Module):
    """Neural collaborative filtering: GMF + MLP towers, bias embeddings of width 1."""

    def __init__(self, users: int = 3000, items: int = 5000, dim: int = 32):
        super().__init__()
        self.u_gmf, self.i_gmf = nn.Embedding(users, dim), nn.Embedding(items, dim)
        self.u_mlp, self.i_mlp = nn.Embedding(users, dim), nn.Embedding(items, dim)
        self.u_bias, self.i_bias = nn.Embedding(users, 1), nn.Embedding(items, 1)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.out = nn.Linear(dim + 32, 1)

    def forward(self, u, i):
        gmf = self.u_gmf(u) * self.i_gmf(i)
        mlp = self.mlp(torch.cat([self.u_mlp(u), self.i_mlp(i)], -1))
        return (self.out(torch.cat([gmf, mlp], -1)) + self.u_bias(u) + self.i_bias(i)).squeeze(-1)


def ncf():
    """NCF rating regression (MSE), 256 user-item pairs."""
    g = _gen()
    batch = 256
    inputs = (torch.randint(0, 3000, (batch,), generator=g), torch.randint(0, 5000, (batch,), generator=g))
    return NCF(), inputs, (torch.rand(batch, generator=g),), "mse"


class CharCNN(nn.Module):
    """Char CNN classifier: padded char embedding, conv1d, max over time."""

    def __init__(self, chars: int = 100, dim: int = 32, classes: int = 5):
        super().__init__()
        self.emb = nn.Embedding(chars, dim, padding_idx=0)
        self.conv = nn.Conv1d(dim, 64, 5, padding=2)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        h = torch.relu(self.conv(self.emb(x).transpose(1, 2)))
        return self.fc(h.amax(-1))


def charcnn():
    """Char CNN, 32 padded rows of 128 characters (28 padding)."""
    g = _gen()
    x = torch.randint(1, 100, (32, 128), generator=g)
    x[:, 100:] = 0
    return CharCNN(), (x,), (torch.randint(0, 5, (32,), generator=g),)


class MaskedLSTM(nn.Module):
    """The way out of PackedSequence: the padded batch through the LSTM, masked mean pooling."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 32, padding_idx=0)
        self.rnn = nn.LSTM(32, 64, batch_first=True)
        self.fc = nn.Linear(64, 3)

    def forward(self, tokens, lengths):
        h, _ = self.rnn(self.emb(tokens))
        mask = (torch.arange(tokens.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1).to(h.dtype)
        return self.fc((h * mask).sum(1) / lengths[:, None].to(h.dtype))


def masked_lstm():
    """LSTM over 16 padded sequences of up to 20 tokens, masked mean pooling."""
    g = _gen()
    batch, steps = 16, 20
    lengths = torch.randint(3, steps + 1, (batch,), generator=g)
    tok = torch.randint(1, 1000, (batch, steps), generator=g)
    tok[torch.arange(steps)[None, :] >= lengths[:, None]] = 0
    return MaskedLSTM(), (tok, lengths), (torch.randint(0, 3, (batch,), generator=g),)
