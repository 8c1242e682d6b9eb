"""``aten.view`` traced as ``aten.reshape`` before torch's decompositions run.

``torch.export`` records ``x.view(shape)`` against the strides eager mode had. ``run_decompositions``
then retraces the program with the decomposed ops, and those can leave a tensor with other strides: the
math decomposition of ``scaled_dot_product_attention`` returns its output as a permuted view, so Hugging
Face GPT-2's ``attn_output.transpose(1, 2).reshape(...)`` then ``Conv1D``'s ``x.view(-1, x.size(-1))``
failed with "Cannot view a tensor with shape [2, 12, 64] and strides (64, 128, 1)" (GPT-2 with its
default SDPA attention and an attention mask). Values do not depend on strides, and Relax tensors have
none, so every ``view`` becomes a ``reshape``, which is a view where the strides allow it and a copy where
they do not (a copy the importer folds away).
"""
from __future__ import annotations

__all__ = ["views_as_reshapes"]


def views_as_reshapes(ep) -> int:
    """Retarget every ``aten.view.default`` node of ``ep``'s graph to ``aten.reshape.default`` (in place).

    Parameters
    ----------
    ep : torch.export.ExportedProgram

    Returns
    -------
    int
        How many nodes were retargeted.
    """
    import torch

    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default
    nodes = [n for n in ep.graph_module.graph.nodes if n.op == "call_function" and n.target is view]
    for node in nodes:
        node.target = reshape
    if nodes:
        ep.graph_module.recompile()
    return len(nodes)
