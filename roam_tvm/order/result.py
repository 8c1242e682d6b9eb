"""``OrderResult``: what :func:`~roam_tvm.order.planner.plan_order` returns (plain data)."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["OrderResult"]


@dataclass
class OrderResult:
    """Result of :func:`plan_order`.

    Attributes
    ----------
    order : list of int
        Valid order of all ops.
    peak : int
        ``g.peak(order)``.
    program_peak : int
        ``g.peak()`` (program order).
    pieces : int
        Pieces solved (repeats counted once).
    optimal, time_limited, fallback : int
        Piece outcomes: proved optimal (or reached the floor), stopped by the
        time limit with a solution, solver failure (heuristic kept).
    reused : int
        Pieces that took the solution of a structurally identical piece
        instead of being solved (see ``report["repeats"]``).
    seconds : float
    report : dict
        JSON-able details (bound, heuristic peaks, passes, repeats, budget, ...).
    """

    order: list[int]
    peak: int
    program_peak: int
    pieces: int = 0
    optimal: int = 0
    time_limited: int = 0
    fallback: int = 0
    reused: int = 0
    seconds: float = 0.0
    report: dict = field(default_factory=dict)

    def summary(self) -> str:
        """One line: peak vs program order, bound, pieces, time."""
        mib = 1 << 20
        lb = self.report.get("cut_bound")
        red = 100.0 * (1 - self.peak / self.program_peak) if self.program_peak else 0.0
        s = (f"order: peak {self.peak / mib:.1f} MiB (program {self.program_peak / mib:.1f} MiB, "
             f"-{red:.1f}%)")
        if lb is not None:
            s += f", cut bound {lb / mib:.1f} MiB"
        for key in ("pair", "set"):
            tighter = self.report.get(f"{key}_bound")
            if tighter is not None and lb is not None and tighter > lb:
                s += f", {key} bound {tighter / mib:.1f} MiB"
        s += (f", {self.pieces} pieces ({self.optimal} optimal, {self.time_limited} time-limited, "
              f"{self.fallback} fallback, {self.reused} reused), {self.seconds:.1f} s")
        if self.report.get("optimal_proved"):
            s += ", proved optimal"
        stop = self.report.get("stopped")
        if stop:
            s += f" [{stop}]"
        return s

    __str__ = summary
