"""Mixture-of-experts layers that dispatch tokens by value, written the ways users write them.

Each selects an expert's tokens with ``torch.where`` / ``nonzero`` / a boolean mask, whose size depends on
the routing, and roam-tvm traces the selection dense (``roam_tvm/frontend/dense_dispatch.py``): every expert
runs on every candidate (token, slot) row, weighted 0 where not routed. Shapes follow the reference codes:

* ``mistral_src``: mistral-src's ``MoeLayer`` (``torch.where(selected_experts == i)``, ``results[batch_idx] +=``),
  softmax over the top-k logits, GELU experts; ``mistral_src_bf16`` the same model cast to bfloat16;
* ``mixtral_hf4``: transformers 4.x ``MixtralSparseMoeBlock`` (loops over the experts ``nonzero`` finds,
  ``index_add_``), SwiGLU experts, in a two-layer pre-norm decoder with RMSNorm and causal attention;
* ``bool_mask_moe``: ``out[mask] += expert(x[mask]) * gate[mask]`` with a top-2 mask per expert;
* ``shared_expert_moe``: DeepSeek-style shared expert plus top-2 routed experts with ``index_add``;
* ``switch_top1``: a top-1 Switch router (``argmax``) scattering back with ``scatter_add_``.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/moe_dispatch.py:<name>``:
it returns ``(model, example_inputs, targets)`` at a tiny size. Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

F = nn.functional


class _Experts(nn.Module):
    def __init__(self, d, hidden, n, act=nn.GELU):
        super().__init__()
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, hidden), act(), nn.Linear(hidden, d))
                                     for _ in range(n))


class MistralSrcMoE(_Experts):
    def __init__(self, d=32, hidden=64, n=4, k=2):
        super().__init__(d, hidden, n)
        self.gate = nn.Linear(d, n, bias=False)
        self.k = k

    def forward(self, inputs):
        gate_logits = self.gate(inputs)
        weights, selected_experts = torch.topk(gate_logits, self.k)
        weights = F.softmax(weights, dim=1, dtype=torch.float).to(inputs.dtype)
        results = torch.zeros_like(inputs)
        for i, expert in enumerate(self.experts):
            batch_idx, nth_expert = torch.where(selected_experts == i)
            results[batch_idx] += weights[batch_idx, nth_expert, None] * expert(inputs[batch_idx])
        return results


class MixtralHF4MoE(nn.Module):
    def __init__(self, d=32, hidden=48, n=4, k=2):
        super().__init__()
        self.n, self.k = n, k
        self.gate = nn.Linear(d, n, bias=False)
        self.w1 = nn.ModuleList(nn.Linear(d, hidden, bias=False) for _ in range(n))
        self.w3 = nn.ModuleList(nn.Linear(d, hidden, bias=False) for _ in range(n))
        self.w2 = nn.ModuleList(nn.Linear(hidden, d, bias=False) for _ in range(n))

    def forward(self, hidden_states):
        tokens, d = hidden_states.shape
        routing_weights = F.softmax(self.gate(hidden_states), dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final = torch.zeros((tokens, d), dtype=hidden_states.dtype, device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.n).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current = hidden_states[None, top_x].reshape(-1, d)
            e = int(expert_idx)
            out = self.w2[e](F.silu(self.w1[e](current)) * self.w3[e](current)) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, out.to(hidden_states.dtype))
        return final


class BoolMaskMoE(_Experts):
    def __init__(self, d=32, hidden=64, n=4, k=2):
        super().__init__(d, hidden, n, act=nn.SiLU)
        self.router = nn.Linear(d, n)
        self.k = k

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        top_p, top_i = probs.topk(self.k, -1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            routed = top_i == e
            mask = routed.any(-1)
            gate = (top_p * routed).sum(-1, keepdim=True)
            out[mask] += expert(x[mask]) * gate[mask]
        return out


class SharedExpertMoE(_Experts):
    def __init__(self, d=32, hidden=32, n=4, k=2):
        super().__init__(d, hidden, n, act=nn.SiLU)
        self.shared = nn.Sequential(nn.Linear(d, 2 * hidden), nn.SiLU(), nn.Linear(2 * hidden, d))
        self.router = nn.Linear(d, n, bias=False)
        self.k = k

    def forward(self, x):
        scores = self.router(x).sigmoid()
        w, idx = scores.topk(self.k, -1)
        w = w / w.sum(-1, keepdim=True)
        out = self.shared(x)
        for e, expert in enumerate(self.experts):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            out = out.index_add(0, tok, expert(x[tok]) * w[tok, slot].unsqueeze(-1))
        return out


class SwitchTop1(_Experts):
    def __init__(self, d=32, hidden=64, n=4):
        super().__init__(d, hidden, n, act=nn.ReLU)
        self.router = nn.Linear(d, n)

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        gate, pick = probs.max(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            rows = (pick == e).nonzero().squeeze(-1)
            y = expert(x[rows]) * gate[rows, None]
            out.scatter_add_(0, rows[:, None].expand(-1, x.shape[1]), y)
        return out


class _Block(nn.Module):
    def __init__(self, moe, d=32, heads=4):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True, bias=False)
        self.moe = moe

    def forward(self, h):
        t = h.shape[1]
        causal = torch.triu(torch.full((t, t), float("-inf"), device=h.device, dtype=h.dtype), 1)
        a = self.norm1(h)
        h = h + self.attn(a, a, a, attn_mask=causal, need_weights=False)[0]
        b, t, d = h.shape
        return h + self.moe(self.norm2(h).reshape(b * t, d)).reshape(b, t, d)


class MoELM(nn.Module):
    def __init__(self, make_moe, layers=2, vocab=64, d=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(_Block(make_moe()) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def _lm(make_moe, dtype=torch.float32, batch=2, seq=8, vocab=64):
    torch.manual_seed(0)
    model = MoELM(make_moe, vocab=vocab).to(dtype)
    ids = torch.randint(0, vocab, (batch, seq))
    return model, (ids,), (torch.roll(ids, -1, 1),)


def mistral_src():
    return _lm(MistralSrcMoE)


def mistral_src_bf16():
    return _lm(MistralSrcMoE, torch.bfloat16)


def mixtral_hf4():
    return _lm(MixtralHF4MoE)


def bool_mask_moe():
    return _lm(BoolMaskMoE)


def shared_expert_moe():
    return _lm(SharedExpertMoE)


def switch_top1():
    return _lm(SwitchTop1)
