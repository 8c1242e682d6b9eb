"""An independent validator for layout solutions.

It shares no code with the solvers: a sweep over lifespan events keeps the live
buffers in a list sorted by offset. While the live set is conflict-free, a new
buffer conflicts with some live buffer iff it conflicts with its neighbour just
below or just above in offset order, so checking those (and walking on while
conflicts continue) finds every first conflict in O(n log n + n * live).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .problem import Problem, Solution

MAX_REPORTED = 100


@dataclass
class ValidationReport:
    violations: list[str] = field(default_factory=list)
    truncated: bool = False

    @property
    def is_valid(self) -> bool:
        return not self.violations

    def __bool__(self) -> bool:
        return self.is_valid


def validate(problem: Problem, solution: Solution | dict, max_reported: int = MAX_REPORTED) -> list[str]:
    """Human-readable violations of ``solution`` for ``problem``; empty when valid."""
    return check(problem, solution, max_reported).violations


def is_valid(problem: Problem, solution: Solution | dict) -> bool:
    return check(problem, solution, 1).is_valid


def check(problem: Problem, solution: Solution | dict, max_reported: int = MAX_REPORTED) -> ValidationReport:
    offsets = solution.offsets if isinstance(solution, Solution) else solution
    rep = ValidationReport()

    def add(msg: str) -> bool:
        if len(rep.violations) >= max_reported:
            rep.truncated = True
            return False
        rep.violations.append(msg)
        return True

    bufs = problem.buffers
    ids = {b.id for b in bufs}
    for k in offsets:
        if k not in ids:
            add(f"offset given for unknown buffer {k!r}")
    events = []
    for i, b in enumerate(bufs):
        o = offsets.get(b.id)
        if o is None:
            add(f"buffer {b.id!r} is not placed")
            continue
        if not isinstance(o, int) or isinstance(o, bool):
            try:
                if int(o) != o:
                    raise ValueError
                o = int(o)
            except (TypeError, ValueError):
                add(f"buffer {b.id!r} has a non-integer offset {o!r}")
                continue
        if o < 0:
            add(f"buffer {b.id!r} has negative offset {o}")
        a = problem.alignment
        if b.alignment > 1:
            import math
            a = math.lcm(a, b.alignment)
        if a > 1 and o % a:
            add(f"buffer {b.id!r} offset {o} is not a multiple of its alignment {a}")
        if problem.capacity is not None and o + b.size > problem.capacity:
            add(f"buffer {b.id!r} ends at {o + b.size} > capacity {problem.capacity}")
        if b.size > 0 and b.upper > b.lower:
            events.append((b.lower, 1, o, i))
            events.append((b.upper, 0, o, i))
    if len(rep.violations) >= max_reported:
        return rep
    # Frees (0) before allocations (1) at the same time: lifespans are half-open.
    events.sort(key=lambda e: (e[0], e[1]))
    live_keys: list[tuple[int, int]] = []   # (offset, index), sorted
    live_end: dict[int, int] = {}
    for t, kind, o, i in events:
        key = (o, i)
        if kind == 0:
            j = bisect.bisect_left(live_keys, key)
            if j < len(live_keys) and live_keys[j] == key:
                del live_keys[j]
            continue
        b = bufs[i]
        end = o + b.size
        j = bisect.bisect_left(live_keys, key)
        # Neighbours below: walk down while they reach into [o, end).
        k = j - 1
        while k >= 0:
            po, pi = live_keys[k]
            if live_end[pi] > o:
                if not add(_msg(bufs[pi], po, b, o)):
                    return rep
                k -= 1
            else:
                break
        k = j
        while k < len(live_keys) and live_keys[k][0] < end:
            so, si = live_keys[k]
            if not add(_msg(bufs[si], so, b, o)):
                return rep
            k += 1
        live_keys.insert(j, key)
        live_end[i] = end
    return rep


def _msg(a, ao, b, bo) -> str:
    lo, hi = max(a.lower, b.lower), min(a.upper, b.upper)
    return (f"buffers {a.id!r} [{ao}, {ao + a.size}) and {b.id!r} [{bo}, {bo + b.size}) overlap in memory "
            f"while both live over [{lo}, {hi})")
