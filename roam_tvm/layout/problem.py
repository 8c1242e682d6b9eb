"""Plain data types for static memory allocation (dynamic storage allocation, DSA).

The conventions follow google/minimalloc: a buffer is live over the half-open
interval ``[lower, upper)`` and occupies ``[offset, offset + size)`` bytes. Two
buffers conflict when both their lifespans and their address ranges overlap.
No TVM in here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence


class LayoutError(ValueError):
    """A layout problem or solution is malformed."""


@dataclass
class Buffer:
    """One buffer to place.

    Parameters
    ----------
    id : str
        Unique name.
    lower, upper : int
        Lifespan ``[lower, upper)``; ``upper == lower`` means never live.
    size : int
        Bytes (>= 0).
    offset : int or None
        A fixed or solved offset; ignored by the solvers, read by the validator
        when a :class:`Solution` is built from a CSV with offsets.
    alignment : int
        The offset must be a multiple of this (combined with the problem's).
    """

    id: str
    lower: int
    upper: int
    size: int
    offset: int | None = None
    alignment: int = 1

    @property
    def length(self) -> int:
        return self.upper - self.lower

    @property
    def area(self) -> int:
        return self.size * (self.upper - self.lower)

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.lower < other.upper and other.lower < self.upper


@dataclass
class Problem:
    """A set of buffers, an optional capacity, and a global offset alignment."""

    buffers: list[Buffer]
    capacity: int | None = None
    alignment: int = 1

    def __post_init__(self) -> None:
        self.buffers = list(self.buffers)
        if self.alignment < 1:
            raise LayoutError(f"alignment must be >= 1, got {self.alignment}")
        if self.capacity is not None and self.capacity < 0:
            raise LayoutError(f"capacity must be >= 0, got {self.capacity}")
        seen: set[str] = set()
        for b in self.buffers:
            if b.id in seen:
                raise LayoutError(f"duplicate buffer id {b.id!r}")
            seen.add(b.id)
            if b.size < 0:
                raise LayoutError(f"buffer {b.id!r} has negative size {b.size}")
            if b.upper < b.lower:
                raise LayoutError(f"buffer {b.id!r} has upper {b.upper} < lower {b.lower}")
            if b.alignment < 1:
                raise LayoutError(f"buffer {b.id!r} has alignment {b.alignment} < 1")

    def __len__(self) -> int:
        return len(self.buffers)

    def align_of(self, b: Buffer) -> int:
        """Effective alignment of a buffer: lcm of its own and the problem's."""
        return self.alignment if b.alignment == 1 else math.lcm(self.alignment, b.alignment)

    def lower_bound(self) -> int:
        """Max over time of the sum of live sizes (a sweep over lifespan events)."""
        return live_peak(self.buffers)

    def with_capacity(self, capacity: int | None) -> "Problem":
        return Problem(self.buffers, capacity, self.alignment)


@dataclass
class Solution:
    """Offsets by buffer id, and the height (max offset + size, 0 if empty)."""

    offsets: dict[str, int]
    height: int
    method: str = ""
    stats: dict = field(default_factory=dict)

    @classmethod
    def from_offsets(cls, problem: Problem, offsets: dict[str, int], method: str = "") -> "Solution":
        h = 0
        for b in problem.buffers:
            o = offsets.get(b.id)
            if o is not None and b.size > 0:
                h = max(h, o + b.size)
        return cls(dict(offsets), h, method)


def live_peak(buffers: Iterable[Buffer]) -> int:
    """Peak of the sum of sizes of simultaneously live buffers."""
    events: list[tuple[int, int]] = []
    for b in buffers:
        if b.size > 0 and b.upper > b.lower:
            events.append((b.lower, b.size))
            events.append((b.upper, -b.size))
    # Half-open lifespans: at equal times, frees (negative) come first.
    events.sort()
    cur = peak = 0
    for _, d in events:
        cur += d
        if cur > peak:
            peak = cur
    return peak


def align_up(x: int, a: int) -> int:
    return x if a <= 1 else -(-x // a) * a


def height_of(buffers: Sequence[Buffer], offsets: dict[str, int]) -> int:
    return max((offsets[b.id] + b.size for b in buffers if b.size > 0), default=0)
