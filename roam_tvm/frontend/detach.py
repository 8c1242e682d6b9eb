"""``tensor.detach()`` in a model or loss stops the gradient, as in PyTorch.

``ExportedProgram.run_decompositions()`` with the default table rewrites ``aten.detach`` as
``aten.alias``, and TVM's importer turns both into the tensor itself, so the backward went
through every ``detach``: a straight-through estimator ``x + (q - x).detach()``, a target
computed from the model's own output, a detached normalizer all got wrong gradients.
:func:`decompositions_keeping_detach` is the default table without the ``detach`` entry, and
:func:`convert_detach` imports the node as ``R.grad.no_grad(x)``: ``stop_gradient``'s
analysis treats it as an op without a derivative (nothing upstream gets an adjoint through
it), and the wrappers are removed after ``Gradient``, so the forward is unchanged.
"""
from __future__ import annotations

from tvm import relax
from tvm.relax.op.grad import no_grad


def decompositions_keeping_detach() -> dict:
    """``torch.export.default_decompositions()`` without ``aten.detach``."""
    import torch

    table = torch.export.default_decompositions()
    table.pop(torch.ops.aten.detach.default, None)
    return table


def convert_detach(node, importer) -> relax.Var:
    """Converter for ``aten.detach.default``: ``R.grad.no_grad`` of a float tensor."""
    x = importer.env[node.args[0]]
    dtype = str(getattr(getattr(x, "ty", None), "dtype", ""))
    if not dtype.startswith(("float", "bfloat")):  # no gradient to stop
        return x
    return importer.block_builder.emit(no_grad(x))
