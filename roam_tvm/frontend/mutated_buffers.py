"""Buffers a forward updates in place, other than BatchNorm's statistics, as states of the step.

Spectral norm's power-iteration vectors (``weight_u``/``weight_v``), a VQ-VAE's EMA codebook, a running
observation normaliser: ``torch.export`` functionalises each update into a new value the program returns
as a ``BUFFER_MUTATION`` output, and TVM's importer binds the buffer as a constant and drops that output,
so the step never updated them. :func:`carry_mutated_buffers` turns each such buffer into an input of
the program and its new value into an output after the loss; the step then carries it as a state and
writes the new value in place (``build_train_step(carry_names=...)``), as PyTorch's step does.
BatchNorm's statistics stay with ``bn_stats.py``, which folds them in once the batch's are known.
"""
from __future__ import annotations

__all__ = ["carry_mutated_buffers"]


def carry_mutated_buffers(ep, handled: set) -> tuple[object, list]:
    """``ep`` with every mutated buffer not in ``handled`` as a user input and its new value as an
    output after the user outputs, and the list of ``(placeholder name, buffer name)`` of those buffers
    in output order (the program's inputs put them in input-spec order: the caller orders them).

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        Decomposed (functionalised): its updates are ``BUFFER_MUTATION`` outputs.
    handled : set of str
        Buffer names (as the program's signature gives them) whose updates the step makes itself.

    Returns
    -------
    (ExportedProgram, list of (str, str))
    """
    import torch
    from torch.export.graph_signature import ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec

    sig = ep.graph_signature
    mutation = OutputKind.BUFFER_MUTATION
    carried_specs = [s for s in sig.output_specs if s.kind is mutation and s.target not in handled]
    if not carried_specs:
        return ep, []
    names = {s.target for s in carried_specs}
    placeholder_of = {s.target: s.arg.name for s in sig.input_specs if s.kind is InputKind.BUFFER}
    inputs = [InputSpec(InputKind.USER_INPUT, s.arg, None, None) if s.kind is InputKind.BUFFER and s.target in names
              else s for s in sig.input_specs]
    gm = ep.graph_module
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    args = list(out_node.args[0])
    kept = [(a, s) for a, s in zip(args, sig.output_specs) if not (s.kind is mutation and s.target in names)]
    moved = [(a, s) for a, s in zip(args, sig.output_specs) if s.kind is mutation and s.target in names]
    out_node.args = (tuple(a for a, _ in kept + moved),)
    gm.recompile()
    outputs = [s for _, s in kept] + [OutputSpec(OutputKind.USER_OUTPUT, s.arg, None) for _, s in moved]
    # out of the bound weights, or TVM's importer binds the input to the buffer's value
    state = {k: v for k, v in ep.state_dict.items() if k not in names}
    constants = {k: v for k, v in ep.constants.items() if k not in names}
    new = torch.export.ExportedProgram(
        root=gm, graph=gm.graph, graph_signature=ExportGraphSignature(inputs, outputs), state_dict=state,
        range_constraints=ep.range_constraints, module_call_graph=ep.module_call_graph, constants=constants,
        verifiers=ep.verifiers)
    return new, [(placeholder_of[s.target], s.target) for _, s in moved]
