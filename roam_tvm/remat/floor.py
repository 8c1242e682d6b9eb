"""The lowest budget, what it is made of, and the error for going below it (no TVM)."""
from __future__ import annotations

from dataclasses import dataclass

from ..graph.bounds import any_bound, op_footprint
from ..graph.model import ALWAYS_LIVE_KINDS, Graph
from .budget import format_bytes

__all__ = ["Floor", "BudgetError", "always_live_parts", "lower_bound", "parts_text"]


class BudgetError(ValueError):
    """A budget no plan reaches; the message names the floor and its parts."""


def always_live_parts(g: Graph) -> dict[str, int]:
    """Bytes of always-live roots by kind: ``param``, ``state`` (optimizer), ``input``, ``const``."""
    out = {k: 0 for k in ALWAYS_LIVE_KINDS}
    for t in g.always_live:
        out[g.tensors[t].kind] += g.tensors[t].size
    return out


def parts_text(parts: dict[str, int]) -> str:
    """``'parameters X, optimizer state Y, ...'`` for the non-zero parts (``'none'`` without any)."""
    names = {"param": "parameters", "state": "optimizer state", "input": "inputs", "const": "constants"}
    return ", ".join(f"{names[k]} {format_bytes(parts[k])}" for k in ("param", "state", "input", "const")
                     if parts.get(k)) or "none"


def lower_bound(g: Graph, inplace=None) -> int:
    """What no plan goes below, recomputing or not: always-live bytes + the largest op footprint.

    Every op of the step runs at least once, and while it runs its inputs,
    outputs and workspace are live beside the parameters, optimizer state and
    inputs; with ``inplace`` (an :class:`~roam_tvm.remat.inplace.InplaceModel`)
    less the outputs it may write into its inputs.
    """
    if not inplace or not g.ops:
        return any_bound(g)
    return g.always_live_bytes + max(op_footprint(g, j) - inplace.max_saving(g, j) for j in range(len(g.ops)))


@dataclass
class Floor:
    """The lowest budget the planner meets.

    Attributes
    ----------
    bytes : int
        The floor: the least peak reached with as much recomputation as helps.
    parts : dict of str to int
        Always-live bytes by kind (``param``, ``state``, ``input``, ``const``).
    live : int
        The rest of the floor: bytes live at the floor's peak step beyond the
        always-live ones (activations, gradients, workspace).
    at_op : str
        The op running at that step.
    lower_bound : int
        :func:`lower_bound`; no plan at all goes below it.
    truncated : bool
        The search stopped at its time limit, so more time may go lower.
    measured : bool
        ``bytes`` is a measured peak (the arena a layout planner gives, alignment and
        fragmentation included), not perfect packing; ``live`` then includes the gaps.
    """

    bytes: int
    parts: dict[str, int]
    live: int
    at_op: str
    lower_bound: int
    truncated: bool = False
    measured: bool = False

    def describe(self) -> str:
        """``'X = parameters P + optimizer state S + inputs I + live L at op 'name''``."""
        names = {"param": "parameters", "state": "optimizer state", "input": "inputs", "const": "constants"}
        terms = [f"{names[k]} {format_bytes(self.parts.get(k, 0))}" for k in ("param", "state", "input", "const")
                 if self.parts.get(k) or k == "param"]
        terms.append(f"{format_bytes(self.live)} live while {self.at_op!r} runs, recomputing all that lowers the peak"
                     + (" (laid out: alignment and gaps included)" if self.measured else ""))
        return f"{format_bytes(self.bytes)} = " + " + ".join(terms)

    def error(self, budget: int) -> BudgetError:
        """The error for a budget below the floor."""
        return BudgetError(
            f"budget {format_bytes(budget)} is below the floor {self.describe()}; no order with "
            f"recomputation found here goes lower (and no plan at all goes below "
            f"{format_bytes(self.lower_bound)}: always-live bytes + the largest op). "
            + ("The search for recomputations stopped at its time limit; more time may go lower. "
               if self.truncated else "")
            + f"Use a budget of at least {self.bytes} bytes.")
