"""Hugging Face mixture-of-experts layers in a form ``torch.export`` and TVM can take.

``transformers`` >= 5 dispatches a MoE layer's experts (Mixtral, Qwen2-MoE, ...) through
``config._experts_implementation``. Its default, ``"grouped_mm"``, counts tokens per expert
with ``histc`` and runs ``torch._grouped_mm`` over ragged groups: TVM's importer has neither
op, and the groups' sizes depend on the data. ``"eager"`` loops over the experts that
``nonzero`` finds and selects each expert's tokens with ``torch.where``; ``dense_dispatch.py``
traces those selections dense (every expert on every token, weighted 0 where not routed), with
static shapes. ``"batched_mm"`` gathers each (token, expert) pair's weights and runs one batched
matmul: also static, but the gathered weights (tokens x top-k copies of an expert's matrices) stay
live until the backward, about 7x PyTorch's step at a 4-layer, 8-expert Mixtral. So
:func:`exportable_experts` switches a model to ``"eager"`` for the export (``"batched_mm"`` is the
fallback, :data:`EXPORT_IMPLEMENTATIONS`) and restores the user's choice afterwards.

DBRX's ``DbrxExperts`` keeps the experts' GLU weights stacked in one ``mlp`` (``w1``, ``v1``, ``w2``:
``[E * F, H]``) and loops over the experts ``nonzero`` finds too; within :func:`exportable_experts` it runs
every expert's GLU on every token, weighted by its routing weight (0 where not picked).

Older layers keep their experts in an ``nn.ModuleDict`` (``expert_0`` ... ``expert_{E-1}``,
Switch Transformers, NLLB-MoE, which also holds its ``token_dropout`` there) whose ``forward(hidden_states, mask, weights)`` has no
switch and always loops over the experts ``nonzero`` finds. Within
:func:`exportable_experts` such a layer runs every expert on every token and weights each
output by the routing mask (``mask``: a ``[N, K, E]`` one-hot or ``[N, K]`` expert indices;
``weights``: ``[N, K]``): the same sum over the same (token, expert) pairs, with static
shapes; each expert then sees all ``N`` tokens, as the step planned is the dense one.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

#: experts implementations tried for the export, in order (see the module docstring)
EXPORT_IMPLEMENTATIONS = ("eager", "batched_mm")


def _dict_experts(model) -> list:
    """``nn.ModuleDict`` expert layers (``expert_0`` ... ``expert_{E-1}``) inside ``model``."""
    import torch

    found = []
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleDict) and type(module).__name__.endswith("Experts"):
            keys = sorted(k for k in module.keys() if k.startswith("expert_"))  # NLLB-MoE adds token_dropout
            if keys and keys == sorted(f"expert_{i}" for i in range(len(keys))):
                found.append(module)
    return found


def _token_dropout(experts, y):
    """NLLB-MoE's ``moe_token_dropout`` on an expert's output, as its own loop applies it."""
    p = getattr(experts, "moe_token_dropout", 0.0)
    if not p:
        return y
    return experts.token_dropout(y) if experts.training else y * (1 - p)


def _dense_forward(experts):
    import torch

    def forward(hidden_states, mask, weights):
        n, e = hidden_states.shape[0], sum(k.startswith("expert_") for k in experts.keys())
        onehot = mask if mask.dim() == 3 else torch.nn.functional.one_hot(mask, e)  # [N, K, E]
        w = (onehot.to(weights.dtype) * weights.reshape(n, -1, 1)).sum(1)             # [N, E]
        out = torch.zeros_like(hidden_states)
        for i in range(e):
            y = _token_dropout(experts, experts[f"expert_{i}"](hidden_states) * w[:, i:i + 1])
            out = out + y.to(hidden_states.dtype)
        return out

    return forward


def _stacked_glu_experts(model) -> list:
    """DBRX-style experts: ``forward(hidden_states, top_k_index, top_k_weights)`` over an ``mlp`` holding
    every expert's ``w1`` / ``v1`` / ``w2`` stacked."""
    return [m for m in model.modules() if type(m).__name__.endswith("Experts")
            and all(hasattr(getattr(m, "mlp", None), w) for w in ("w1", "v1", "w2"))
            and isinstance(getattr(m, "num_experts", None), int)]


def _dense_glu_forward(experts):
    import torch

    def forward(hidden_states, top_k_index, top_k_weights):
        shape, e = hidden_states.shape, experts.num_experts
        x = hidden_states.reshape(-1, shape[-1])
        onehot = torch.nn.functional.one_hot(top_k_index.reshape(x.shape[0], -1), e).to(top_k_weights.dtype)
        w = (onehot * top_k_weights.reshape(x.shape[0], -1, 1)).sum(1)  # [N, E]: 0 where not routed
        split = (e, -1, shape[-1])
        w1, v1, w2 = (getattr(experts.mlp, n).view(split) for n in ("w1", "v1", "w2"))
        out = torch.zeros_like(x)
        for i in range(e):
            out = out + experts.mlp(x, w1[i], v1[i], w2[i]) * w[:, i:i + 1].to(x.dtype)
        return out.view(shape[0], -1, shape[-1])

    return forward


def _experts_models(model) -> list:
    """The Hugging Face models inside ``model`` whose config picks an experts implementation."""
    found = []
    for module in model.modules():
        config = getattr(module, "config", None)
        if (hasattr(module, "set_experts_implementation") and config is not None
                and getattr(config, "_experts_implementation", None) is not None):
            found.append(module)
    return found


def experts_implementations(model) -> tuple:
    """The HF experts implementations to try for ``model``'s export, in order (``(None,)``: no HF experts)."""
    return EXPORT_IMPLEMENTATIONS if _experts_models(model) else (None,)


@contextlib.contextmanager
def exportable_experts(model, implementation: str | None = None) -> Iterator[None]:
    """Within the block, every HF MoE layer of ``model`` uses ``implementation`` (default: the first of
    :data:`EXPORT_IMPLEMENTATIONS`), and every ``ModuleDict`` / stacked-GLU experts layer runs densely
    (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        Any module; models without HF experts are left untouched.
    implementation : str, optional
        The HF experts implementation to switch to.
    """
    implementation = implementation or EXPORT_IMPLEMENTATIONS[0]
    saved = []
    dense = _dict_experts(model)
    glu = _stacked_glu_experts(model)
    for module in dense:  # an instance attribute shadows the class's forward until deleted
        module.forward = _dense_forward(module)
    for module in glu:
        module.forward = _dense_glu_forward(module)
    for hf in _experts_models(model):
        current = hf.config._experts_implementation
        if current != implementation:
            saved.append((hf, current))
            hf.set_experts_implementation(implementation)
    try:
        yield
    finally:
        for hf, current in reversed(saved):
            hf.set_experts_implementation(current)
        for module in (*dense, *glu):
            del module.forward
