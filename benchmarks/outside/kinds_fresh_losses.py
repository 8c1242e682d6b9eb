"""Plain ``torch.nn`` outside models whose training objective is the unusual part, as users write them:
a VQ-VAE (nearest codebook entry by ``cdist`` / ``argmin``, straight-through estimator, commitment loss),
SimCLR's NT-Xent (normalised embeddings, a similarity matrix with its diagonal masked to ``-inf``), a
triplet-margin metric-learning model, a capsule network (dynamic routing by agreement, ``squash``, margin
loss) and an FT-Transformer for tabular data (per-feature tokenizers by ``einsum``, a CLS token).

Each public function is a factory for
``roam-tvm compare --model benchmarks/outside/kinds_fresh_losses.py:<name>`` returning
``(model, example_inputs, targets, loss)``, tiny, random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

F = nn.functional


def _seeded():
    torch.manual_seed(0)
    return torch.Generator().manual_seed(0)


class VQVAE(nn.Module):
    def __init__(self, dim=16, codes=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, dim, 4, 2, 1))
        self.codebook = nn.Embedding(codes, dim)
        self.dec = nn.Sequential(nn.ConvTranspose2d(dim, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 3, 4, 2, 1))

    def forward(self, x):
        z = self.enc(x)  # [B, D, h, w]
        flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
        idx = torch.cdist(flat, self.codebook.weight).argmin(1)
        q = self.codebook(idx).view(z.shape[0], z.shape[2], z.shape[3], -1).permute(0, 3, 1, 2)
        st = z + (q - z).detach()  # straight-through
        return self.dec(st), z, q


def _vq_loss(out, x):
    recon, z, q = out
    return F.mse_loss(recon, x) + F.mse_loss(q, z.detach()) + 0.25 * F.mse_loss(z, q.detach())


def vqvae():
    """VQ-VAE on 16x16 images: cdist + argmin codebook lookup, straight-through, codebook + commitment loss."""
    gen = _seeded()
    x = torch.randn(2, 3, 16, 16, generator=gen)
    return VQVAE(), (x,), (x.clone(),), _vq_loss


class SimCLR(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.proj = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 16))

    def forward(self, a, b):
        return self.proj(self.backbone(torch.cat([a, b])))


def _nt_xent(z, labels, tau: float = 0.5):
    """NT-Xent: each view's positive is the other view of its image; ``labels`` are those partners."""
    z = F.normalize(z, dim=1)
    sim = z @ z.t() / tau
    sim = sim.masked_fill(torch.eye(z.shape[0], dtype=torch.bool), float("-inf"))
    return F.cross_entropy(sim, labels)


def simclr():
    """SimCLR with NT-Xent over 2 x 4 views of 16x16 images (diagonal masked to -inf, temperature 0.5)."""
    gen = _seeded()
    a, b = torch.randn(4, 3, 16, 16, generator=gen), torch.randn(4, 3, 16, 16, generator=gen)
    partners = torch.cat([torch.arange(4, 8), torch.arange(0, 4)])
    return SimCLR(), (a, b), (partners,), _nt_xent


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 16))

    def forward(self, anchor, positive, negative):
        return torch.stack([self.net(anchor), self.net(positive), self.net(negative)])


def _triplet(out, weights):
    return (F.triplet_margin_loss(out[0], out[1], out[2], margin=0.5, reduction="none") * weights).mean()


def triplet():
    """Metric learning with F.triplet_margin_loss (pairwise distances, hinge) over 8 weighted triplets."""
    gen = _seeded()
    ins = tuple(torch.randn(8, 20, generator=gen) for _ in range(3))
    return Embedder(), ins, (torch.rand(8, generator=gen) + 0.5,), _triplet


def _squash(s, dim=-1):
    n2 = (s * s).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)


class CapsNet(nn.Module):
    """Conv -> 16 primary capsules of 8 dims -> 4 class capsules of 16 dims by 3 routing iterations."""

    def __init__(self, classes=4):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 5, 2)
        self.primary = nn.Conv2d(32, 4 * 8, 3, 2)
        self.W = nn.Parameter(torch.randn(1, 4 * 2 * 2, classes, 16, 8) * 0.05)

    def forward(self, x):
        u = self.primary(F.relu(self.conv(x)))  # [B, 32, 2, 2]
        u = _squash(u.view(x.shape[0], 4, 8, -1).permute(0, 1, 3, 2).reshape(x.shape[0], -1, 8))  # [B, 16, 8]
        u_hat = torch.matmul(self.W, u[:, :, None, :, None]).squeeze(-1)  # [B, 16, C, 16]
        logits = torch.zeros(u_hat.shape[:3])
        for _ in range(3):
            c = logits.softmax(2)
            v = _squash((c.unsqueeze(-1) * u_hat).sum(1))  # [B, C, 16]
            logits = logits + (u_hat * v.unsqueeze(1)).sum(-1)
        return v.norm(dim=-1)


def _margin(lengths, labels):
    onehot = F.one_hot(labels, lengths.shape[1]).float()
    loss = onehot * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - onehot) * F.relu(lengths - 0.1) ** 2
    return loss.sum(1).mean()


def capsnet():
    """Capsule network with dynamic routing (3 iterations) and the margin loss, 16x16 grey images."""
    gen = _seeded()
    return CapsNet(), (torch.randn(2, 1, 16, 16, generator=gen),), \
        (torch.randint(0, 4, (2,), generator=gen),), _margin


class FTTransformer(nn.Module):
    """Numerical features tokenised by per-feature weights (einsum), categorical ones by a shared table with
    per-column offsets, a CLS token, 2 pre-norm encoder layers; the CLS token is classified."""

    def __init__(self, n_num=6, cards=(3, 5, 4), dim=32, classes=3):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n_num, dim) * 0.1)
        self.b = nn.Parameter(torch.zeros(n_num, dim))
        self.register_buffer("offsets", torch.tensor([0, *torch.tensor(cards).cumsum(0)[:-1].tolist()]))
        self.cat = nn.Embedding(sum(cards), dim)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.ReLU(), nn.Linear(dim, classes))

    def forward(self, x_num, x_cat):
        tokens = torch.cat([self.cls.expand(x_num.shape[0], -1, -1),
                            torch.einsum("bf,fd->bfd", x_num, self.w) + self.b,
                            self.cat(x_cat + self.offsets)], 1)
        return self.head(self.encoder(tokens)[:, 0])


def ft_transformer():
    """FT-Transformer on 8 rows of 6 numerical + 3 categorical features, 3 classes."""
    gen = _seeded()
    x_cat = torch.stack([torch.randint(0, c, (8,), generator=gen) for c in (3, 5, 4)], 1)
    return FTTransformer(), (torch.randn(8, 6, generator=gen), x_cat), \
        (torch.randint(0, 3, (8,), generator=gen),), F.cross_entropy
