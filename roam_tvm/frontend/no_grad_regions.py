"""``with torch.no_grad():`` inside a forward stops the gradient of what the block computes.

``torch.export`` records such a block as ``higher_order.wrap_with_set_grad_enabled(False, submodule,
*args)``; the decompositions inline the submodule into plain ops and the grad mode is lost, so the
backward went through the block: spectral norm's power iteration, a SimSiam target branch or a norm
taken as a constant scale all got wrong gradients. :func:`detach_no_grad_outputs` puts an
``aten.detach`` (kept through the decompositions and imported as a stop-gradient, ``detach.py``) on each
floating-point output of every such block before the program is decomposed.
"""
from __future__ import annotations

__all__ = ["detach_no_grad_outputs"]


def _no_grad_blocks(graph) -> list:
    import torch

    hop = getattr(torch.ops.higher_order, "wrap_with_set_grad_enabled", None)
    return [n for n in graph.nodes
            if n.op == "call_function" and hop is not None and n.target is hop and n.args and n.args[0] is False]


def _is_float_tensor(node) -> bool:
    import torch

    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and (val.is_floating_point() or val.is_complex())


def detach_no_grad_outputs(ep) -> int:
    """Detach every floating-point output of ``ep``'s ``no_grad`` blocks (in place).

    Parameters
    ----------
    ep : torch.export.ExportedProgram

    Returns
    -------
    int
        How many outputs were detached.
    """
    import operator

    import torch

    graph = ep.graph_module.graph
    outputs = []
    for block in _no_grad_blocks(graph):
        items = [u for u in block.users if u.op == "call_function" and u.target is operator.getitem]
        outputs += [u for u in items if _is_float_tensor(u)] if items else (
            [block] if _is_float_tensor(block) else [])
    for out in outputs:
        with graph.inserting_after(out):
            detached = graph.call_function(torch.ops.aten.detach.default, (out,))
        detached.meta["val"] = out.meta["val"]
        out.replace_all_uses_with(detached, delete_user_cb=lambda user: user is not detached)
    if outputs:
        ep.graph_module.recompile()
    return len(outputs)
