"""What a recomputation costs (no TVM).

The plain :class:`~roam_tvm.graph.model.Graph` carries sizes, not FLOPs, so
three cost models are offered, all per op:

* ``"bytes"`` (default): the bytes an op touches, i.e. the sizes of the
  distinct tensors it reads and writes. Views are free (0). This is the HBM
  traffic of the op, the time term that dominates for the elementwise and
  normalisation ops that are the cheap ones to recompute; it over-ranks
  matmuls and convolutions against their true time only mildly, since their
  inputs are also large.
* ``"flops"``: the op's FLOPs, given per op in ``g.meta["flops"]`` (a list
  indexed by op id; :func:`roam_tvm.remat.relax_remat.op_flops` estimates
  them from the TIR of each kernel). Elementwise ops are nearly free here.
* ``"roofline"``: an H100 roofline time per op,
  ``max(flops / 989e12, bytes / 3.35e12)`` seconds (dense BF16 tensor-core
  rate and HBM3 bandwidth of the SXM part), FLOPs as above. Recomputing an
  elementwise op then costs its memory traffic, a matmul its FLOPs.

Overheads are fractions of the whole step's cost under the same model
(0.05 means 5%).
"""
from __future__ import annotations

from typing import Iterable, Sequence

from ..graph.model import Graph, Op

__all__ = ["H100_FLOPS", "H100_BANDWIDTH", "op_bytes", "op_costs", "overheads", "COST_MODELS"]

#: Dense BF16 tensor-core FLOP/s of an H100 SXM (no sparsity).
H100_FLOPS = 989e12
#: HBM3 bytes/s of an H100 SXM.
H100_BANDWIDTH = 3.35e12

COST_MODELS = ("bytes", "flops", "roofline")


def op_bytes(g: Graph, op: Op) -> int:
    """Bytes of the distinct storages ``op`` reads and writes (0 for a view).

    A tensor read through a view (a tuple field, a reshape) counts as its
    storage: the view's own size is 0 in the memory model, but the kernel
    reads every byte of it.
    """
    if op.kind == "view":
        return 0
    roots = g.roots
    seen = dict.fromkeys(roots[t] for t in (*op.inputs, *op.outputs))
    return sum(g.tensors[t].size for t in seen)


def op_costs(g: Graph, model: str = "bytes", flops: Sequence[float] | None = None) -> list[float]:
    """Cost of each op of ``g`` under ``model``.

    Parameters
    ----------
    g : Graph
    model : str
        ``"bytes"``, ``"flops"`` or ``"roofline"`` (see the module docstring).
    flops : sequence of float, optional
        FLOPs per op for ``"flops"`` and ``"roofline"``; default ``g.meta["flops"]``.

    Returns
    -------
    list of float
        Bytes, or seconds for ``"roofline"``.
    """
    if model not in COST_MODELS:
        raise ValueError(f"unknown cost model {model!r}; use one of {COST_MODELS}")
    if model == "bytes":
        return [float(op_bytes(g, op)) for op in g.ops]
    flops = g.meta.get("flops") if flops is None else flops
    if flops is None or len(flops) != len(g.ops):
        have = "none" if flops is None else f"{len(flops)} values"
        raise ValueError(f"the {model} cost model needs FLOPs for each of the {len(g.ops)} ops "
                         f"(g.meta['flops'] or flops=...), got {have}; or use model='bytes'")
    if model == "flops":
        return [float(f) for f in flops]
    return [max(float(f) / H100_FLOPS, op_bytes(g, op) / H100_BANDWIDTH)
            for f, op in zip(flops, g.ops)]


def overheads(g: Graph, recomputed: Iterable[int], flops: Sequence[float] | None = None) -> dict[str, float]:
    """Share of the step that the ``recomputed`` ops (original op ids, once per copy) cost, under
    every cost model that can be evaluated (``flops`` and ``roofline`` need FLOPs)."""
    recomputed = list(recomputed)
    out = {}
    for model in COST_MODELS:
        try:
            costs = op_costs(g, model, flops)
        except ValueError:  # no FLOPs known
            continue
        total = sum(costs)
        out[model] = sum(costs[o] for o in recomputed) / total if total else 0.0
    return out
