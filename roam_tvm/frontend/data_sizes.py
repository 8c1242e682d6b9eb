"""Tensor sizes read from tensor values: refused with the model's line, before TVM's importer.

``torch.export`` traces ``sizes = counts.tolist(); x.split(sizes)`` (JetMoE's and ScatterMoE-style
routers), ``.item()`` sizes and some ``nonzero`` uses without a complaint: it gives the sizes unbacked
symbols (``u0``, ``u1``, ...) bounded by value ranges. A planned step needs every buffer's size before it
runs, and TVM's importer fails later on such graphs with an unrelated message (e.g. a dtype mismatch in
the router's integer arithmetic). :func:`check_static_sizes` names the first tensor so sized and the way out.
A user's ``dynamic_shapes`` dims are backed symbols (``s0``, ...), planned at their upper bounds: not refused.
"""
from __future__ import annotations

from .errors import UnsupportedError
from .random_ops import _op, _where


def _unbacked(val) -> bool:
    import torch

    if not isinstance(val, torch.Tensor):
        return False
    return any(str(s).startswith("u") for d in val.shape if isinstance(d, torch.SymInt)
               for s in d.node.expr.free_symbols)


def check_static_sizes(ep) -> None:
    """Refuse a forward whose tensor sizes depend on tensor values.

    Parameters
    ----------
    ep : torch.export.ExportedProgram

    Raises
    ------
    UnsupportedError
        Some tensor's size is an unbacked symbol (names the op, the model's line and the way out).
    """
    # a value-sized tensor nothing reads (only its size's range checks: the concatenated CTC targets that
    # ctc_loss.py reads back as padded rows) is erased with those checks before the import
    sized = [n for n in ep.graph.nodes if n.op == "call_function" and _unbacked(n.meta.get("val"))
             and _read(n)]
    if not sized:
        return
    first = sized[0]
    ops = {_op(n) for n in sized} | {_op(a) for n in sized for a in n.all_input_nodes}
    selects = sorted(ops & _SELECTIONS)
    way_out = (f"it selects by value ({', '.join(selects)}: a boolean mask x[mask], unique, nonzero), as "
               "Hugging Face's T5/BART *ForSequenceClassification heads pick each row's <eos> state. Way out: "
               "select by position, e.g. idx = (mask * torch.arange(T)).argmax(-1) and x[torch.arange(B), idx] "
               "for each row's last masked position, or weight every row by the mask (0 where not selected)"
               if selects else
               "e.g. split by counts.tolist() or .item() sizes, as token-sorting MoE routers (JetMoE, "
               "ScatterMoE) do, or shapes read back from a metadata tensor (SigLIP-2's spatial_shapes, "
               "Qwen2-VL's grid_thw, image_sizes). Way out: run every expert on all tokens and weight each "
               "output by its routing weight (0 where not routed), or pad each group to a fixed capacity "
               "(Hugging Face MoE layers with config._experts_implementation are switched to 'batched_mm' "
               "automatically); for image grids, fix the grid and pass its sizes as Python ints")
    raise UnsupportedError(
        f"the forward sizes tensors by tensor values ({len(sized)} op(s), first {_op(first)}{_where(first)}): "
        f"a planned step needs static sizes, and {way_out}.")


def _read(node) -> bool:
    """Whether a tensor or the program's output reads ``node`` (not only size and range checks)."""
    import torch

    return any(u.op == "output" or isinstance(u.meta.get("val"), torch.Tensor) for u in node.users)


# ops whose output size is the number of selected elements
_SELECTIONS = frozenset({"index.Tensor", "nonzero.default", "masked_select.default", "unique_consecutive.default",
                         "_unique2.default", "unique_dim.default", "argwhere.default"})
