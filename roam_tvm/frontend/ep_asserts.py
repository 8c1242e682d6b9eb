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
from .torch_decompositions import with_extra_decompositions


def _assert_targets():
    import torch

    aten = torch.ops.aten
    # _assert_scalar: a size that depends on values (bincount's length) checked against the traced one
    return (aten._assert_async.default, aten._assert_async.msg, aten._assert_scalar.default)


def _erase_unused_scalars(graph, nodes) -> None:
    """Erase the scalar nodes (sizes, comparisons) that only fed erased assertions, and theirs; and
    the tensors that only fed those, when computing them has no side effect (a value check's
    ``(var < 0).any()`` whose outcome was replayed, value_checks.py)."""
    import torch

    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node.op != "call_function" or node.users:
            continue
        if isinstance(node.meta.get("val"), torch.Tensor) and (
                node.is_impure() or not isinstance(node.target, torch._ops.OpOverload)
                or node.target._schema.is_mutable):
            continue
        stack.extend(node.all_input_nodes)
        graph.erase_node(node)


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
    # matmul converters, not folded into index constants (interpolate.py); ops TVM has no
    # converter for decomposed by our own table (torch_decompositions.py)
    ep = ep.run_decompositions(keep_undecomposed(with_extra_decompositions(decompositions_keeping_detach())))
    graph = ep.graph_module.graph
    targets = _assert_targets()
    asserts = [n for n in graph.nodes if n.op == "call_function" and n.target in targets]
    fed = [a for node in asserts for a in node.all_input_nodes]
    for node in asserts:
        graph.erase_node(node)  # returns nothing: no user to rewire
    _erase_unused_scalars(graph, fed)
    if asserts:
        ep.graph_module.recompile()
    return ep, True
