"""Plain ``torch.nn`` outside models of architectures no other outside file covers: graph networks whose
message passing is ``index_add_`` / ``scatter_add`` over an edge list (a GCN taking the edge list as an
input, a GAT with an edge softmax), and a Perceiver (learned latents cross-attending to a long input,
then a latent self-attention stack) and GFNet (global filters: ``rfft2``, a complex product, ``irfft2``). The ``transformers`` ones are in kinds_fresh.py.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_fresh_nn.py:<name>``
returning ``(model, example_inputs, targets)``, tiny, random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

F = nn.functional
NODES, FEATS, CLASSES = 24, 16, 4


def _graph(gen: torch.Generator, edges: int = 64) -> torch.Tensor:
    """A random directed edge list ``[2, E]`` plus a self-loop per node (int64)."""
    src = torch.randint(0, NODES, (edges,), generator=gen)
    dst = torch.randint(0, NODES, (edges,), generator=gen)
    loops = torch.arange(NODES)
    return torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])])


class GCNLayer(nn.Module):
    """``h_v = W * sum_{u -> v} h_u / deg(v)``: gather by source, ``index_add_`` onto destinations."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.lin = nn.Linear(cin, cout)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        h = self.lin(x)
        out = torch.zeros_like(h).index_add_(0, dst, h[src])
        deg = torch.zeros(x.shape[0], dtype=x.dtype).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        return out / deg.clamp(min=1).unsqueeze(-1)


class GCN(nn.Module):
    def __init__(self, hidden: int = 32):
        super().__init__()
        self.l1, self.l2 = GCNLayer(FEATS, hidden), GCNLayer(hidden, hidden)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x, edge_index):
        h = F.relu(self.l1(x, edge_index))
        h = F.relu(self.l2(h, edge_index)) + h
        return self.head(h)


def gcn():
    """Two GCN layers with a residual, the edge list an int64 input; node classification over 24 nodes."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(NODES, FEATS, generator=gen)
    return GCN(), (x, _graph(gen)), (torch.randint(0, CLASSES, (NODES,), generator=gen),)


class GATLayer(nn.Module):
    """Graph attention: per-edge scores, a softmax over each node's incoming edges (``scatter_add`` of
    ``exp`` for the denominators), messages weighted and summed with ``scatter_add``."""

    def __init__(self, cin: int, cout: int, heads: int = 2):
        super().__init__()
        self.heads, self.cout = heads, cout
        self.lin = nn.Linear(cin, heads * cout, bias=False)
        self.att_src = nn.Parameter(torch.randn(heads, cout) * 0.1)
        self.att_dst = nn.Parameter(torch.randn(heads, cout) * 0.1)

    def forward(self, x, edge_index):
        n = x.shape[0]
        src, dst = edge_index[0], edge_index[1]
        h = self.lin(x).view(n, self.heads, self.cout)
        score = F.leaky_relu((h * self.att_src).sum(-1)[src] + (h * self.att_dst).sum(-1)[dst], 0.2)  # [E, H]
        e = torch.exp(score)
        idx = dst.unsqueeze(-1).expand(-1, self.heads)
        denom = torch.zeros(n, self.heads, dtype=x.dtype).scatter_add(0, idx, e)
        alpha = e / denom[dst]
        msg = (h[src] * alpha.unsqueeze(-1)).reshape(-1, self.heads * self.cout)
        out = torch.zeros(n, self.heads * self.cout, dtype=x.dtype)
        return out.scatter_add(0, dst.unsqueeze(-1).expand_as(msg), msg)


class GAT(nn.Module):
    def __init__(self, edge_index: torch.Tensor, hidden: int = 16):
        super().__init__()
        self.register_buffer("edge_index", edge_index)
        self.l1, self.l2 = GATLayer(FEATS, hidden), GATLayer(2 * hidden, hidden)
        self.norm = nn.LayerNorm(2 * hidden)
        self.head = nn.Linear(2 * hidden, CLASSES)

    def forward(self, x):
        h = F.elu(self.l1(x, self.edge_index))
        h = self.norm(F.elu(self.l2(h, self.edge_index)) + h)
        return self.head(h)


def gat():
    """Two GAT layers (2 heads, edge softmax by scatter_add, the edge list a buffer); node classification."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(NODES, FEATS, generator=gen)
    edges = _graph(gen)
    return GAT(edges), (x,), (torch.randint(0, CLASSES, (NODES,), generator=gen),)


class _Block(nn.Module):
    """Pre-norm attention block: queries from ``q``, keys/values from ``kv`` (itself for self-attention)."""

    def __init__(self, dim: int, heads: int, kv_dim: int | None = None):
        super().__init__()
        kv_dim = kv_dim or dim
        self.nq, self.nkv = nn.LayerNorm(dim), nn.LayerNorm(kv_dim)
        self.attn = nn.MultiheadAttention(dim, heads, kdim=kv_dim, vdim=kv_dim, batch_first=True)
        self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, q, kv=None):
        kvn = self.nkv(q if kv is None else kv)
        x = q + self.attn(self.nq(q), kvn, kvn, need_weights=False)[0]
        return x + self.mlp(x)


class Perceiver(nn.Module):
    """16 learned latents cross-attend to 64 input tokens (with learned positions), then 2 latent
    self-attention blocks; the mean latent is classified."""

    def __init__(self, in_dim=8, tokens=64, latents=16, dim=32, classes=CLASSES):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(latents, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(tokens, in_dim) * 0.02)
        self.cross = _Block(dim, 1, kv_dim=in_dim)
        self.layers = nn.ModuleList([_Block(dim, 4) for _ in range(2)])
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        z = self.latents.unsqueeze(0).expand(x.shape[0], -1, -1)
        z = self.cross(z, x + self.pos)
        for layer in self.layers:
            z = layer(z)
        return self.head(z.mean(1))


def perceiver():
    """Perceiver classifier on [2, 64, 8] inputs (cross-attention with kdim != embed_dim)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    return Perceiver(), (torch.randn(2, 64, 8, generator=gen),), (torch.randint(0, CLASSES, (2,), generator=gen),)


class GlobalFilter(nn.Module):
    """GFNet's token mixer: ``irfft2(rfft2(x) * W)`` with a learned complex filter ``W``."""

    def __init__(self, dim: int, h: int, w: int):
        super().__init__()
        self.h, self.w = h, w
        self.weight = nn.Parameter(torch.randn(h, w // 2 + 1, dim, 2) * 0.02)

    def forward(self, x):  # [B, h * w, dim]
        b, n, c = x.shape
        x = x.view(b, self.h, self.w, c)
        x = torch.fft.rfft2(x, dim=(1, 2), norm="ortho") * torch.view_as_complex(self.weight)
        return torch.fft.irfft2(x, s=(self.h, self.w), dim=(1, 2), norm="ortho").reshape(b, n, c)


class GFNet(nn.Module):
    """Patch embedding, 2 blocks of (LayerNorm -> global filter -> LayerNorm -> MLP), mean-pooled head."""

    def __init__(self, dim=32, grid=8, classes=CLASSES):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, 4, 4)
        self.blocks = nn.ModuleList([nn.ModuleDict(dict(
            n1=nn.LayerNorm(dim), filt=GlobalFilter(dim, grid, grid), n2=nn.LayerNorm(dim),
            mlp=nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim)))) for _ in range(2)])
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        for blk in self.blocks:
            x = x + blk["mlp"](blk["n2"](blk["filt"](blk["n1"](x))))
        return self.head(x.mean(1))


def gfnet():
    """GFNet (rfft2 -> complex filter -> irfft2 token mixing) on 32x32 images in 4x4 patches."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    return GFNet(), (torch.randn(2, 3, 32, 32, generator=gen),), (torch.randint(0, CLASSES, (2,), generator=gen),)
