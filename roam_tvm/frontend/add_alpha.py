"""``torch.add(x, y, alpha=a)`` / ``x.sub_(y, alpha=a)``: the scale ``a`` made explicit before import.

The decomposed program keeps ``aten.add.Tensor`` / ``aten.sub.Tensor`` with an ``alpha`` keyword
(``rsub`` decomposes to ``sub`` with ``alpha`` too), and TVM 0.27's converters read only the two operands:
``ema.mul_(0.9).add_(x, alpha=0.1)`` imported as ``ema * 0.9 + x``, a wrong value in the forward and
the step (an EMA codebook's statistics, any ``alpha``-scaled residual). :func:`fold_add_alpha` multiplies
the second operand by ``alpha`` (a new ``mul`` node, or the number itself) and drops the keyword.
"""
from __future__ import annotations

__all__ = ["fold_add_alpha"]


def fold_add_alpha(ep) -> int:
    """Make every ``alpha`` of an ``add.Tensor`` / ``sub.Tensor`` node of ``ep``'s graph explicit (in place).

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        Decomposed.

    Returns
    -------
    int
        How many nodes were rewritten.
    """
    import torch

    aten = torch.ops.aten
    graph = ep.graph_module.graph
    nodes = [n for n in graph.nodes if n.op == "call_function" and n.target in (aten.add.Tensor, aten.sub.Tensor)
             and n.kwargs.get("alpha", 1) != 1]
    for node in nodes:
        alpha = node.kwargs["alpha"]
        other = node.args[1]
        if isinstance(other, torch.fx.Node):
            with graph.inserting_before(node):
                scaled = graph.call_function(aten.mul.Tensor, (other, alpha))
            if "val" in other.meta:
                scaled.meta["val"] = other.meta["val"]  # same shape and dtype (torch refuses a float alpha on ints)
        else:
            scaled = other * alpha
        node.args = (node.args[0], scaled, *node.args[2:])
        node.kwargs = {k: v for k, v in node.kwargs.items() if k != "alpha"}
    if nodes:
        ep.graph_module.recompile()
    return len(nodes)
