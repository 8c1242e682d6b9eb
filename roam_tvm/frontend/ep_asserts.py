"""Run-time value assertions out of an exported program, so the step stays one dataflow region.

``torch.export``'s decompositions check some tensors' *values* at run time: ``F.one_hot``
(Switch-style top-1 routing, label smoothing) becomes ``aten._assert_async.msg`` checks that
every class is in ``[0, num_classes)``. TVM's importer turns these into ``R.assert_op``, an
impure op, and then builds the whole function without a dataflow block, which the training
step (and Relax's ``Gradient``) cannot take. The checks guard against bad *data*, not a
property of the program, and carry no tensor that anything reads, so they are dropped before
the import: :func:`decompose_without_asserts` runs the decompositions TVM's importer would
run (``ExportedProgram.run_decompositions()`` with the default table) and erases the
assertion nodes; the importer is then called with ``run_ep_decomposition=False``.
"""

from __future__ import annotations

from typing import Tuple

from .detach import decompositions_keeping_detach
from .interpolate import keep_undecomposed


def _assert_targets():
    import torch

    aten = torch.ops.aten
    return (aten._assert_async.default, aten._assert_async.msg)


def _has_sparse(ep) -> bool:
    """TVM's importer leaves programs with sparse constants undecomposed; so do we."""
    import torch

    tensors = [t for _, t in ep.named_buffers()] + [t for _, t in ep.named_parameters()]
    tensors += [t for t in ep.constants.values() if isinstance(t, torch.Tensor)]
    return any(t.layout != torch.strided for t in tensors)


def decompose_without_asserts(ep) -> Tuple[object, bool]:
    """``(program, decomposed)``: ``ep`` decomposed to core ATen, its value assertions erased.

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        The traced model with its loss.

    Returns
    -------
    tuple
        The program to import and whether it is already decomposed (pass
        ``run_ep_decomposition=not decomposed`` to TVM's importer).
    """
    if _has_sparse(ep):
        return ep, False
    # detach kept (detach.py); bicubic / antialiased / 1-D / 3-D resizes kept for their
    # matmul converters, not folded into index constants (interpolate.py)
    ep = ep.run_decompositions(keep_undecomposed(decompositions_keeping_detach()))
    graph = ep.graph_module.graph
    targets = _assert_targets()
    asserts = [n for n in graph.nodes if n.op == "call_function" and n.target in targets]
    for node in asserts:
        graph.erase_node(node)  # returns nothing: no user to rewire
    if asserts:
        ep.graph_module.recompile()
    return ep, True
