"""What the passes decided, kept where reports and later passes can read it.

TVM function attributes only hold TVM objects, and Python cannot register
PassContext keys, so each pass appends a plain record here (keyed by function
name). ``latest_order(name)`` / ``latest_layout(name)`` return the newest one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class OrderRecord:
    function: str
    status: str = ""
    ops: int = 0
    pieces: int = 0
    optimal: int = 0
    time_limited: int = 0
    fallback: int = 0
    peak_before: int = 0
    peak_after: int = 0
    cut_bound: int | None = None
    optimal_proved: bool = False  # no order of the function's graph peaks lower (perfect packing)
    seconds: float = 0.0
    summary: str = ""
    order: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LayoutRecord:
    function: str
    alignment: int = 64
    status: str = ""
    arena_bytes: int = 0
    lower_bound_bytes: int = 0
    planned_tensors: int = 0
    peak_bytes: int = 0
    static_plan_peak_bytes: int = 0
    seconds: float = 0.0
    method: str = ""
    offsets: dict = field(default_factory=dict)     # tensor id -> offset
    lifetimes: dict = field(default_factory=dict)   # tensor id -> (first, last) step
    sizes: dict = field(default_factory=dict)       # tensor id -> bytes
    names: dict = field(default_factory=dict)       # tensor id -> Relax var name

    def update(self, **kw) -> None:
        for k, v in kw.items():
            setattr(self, k, v)

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("offsets", "lifetimes", "sizes", "names"):
            d[k] = {str(t): v for t, v in d[k].items()}
        return d


_ORDER: list[OrderRecord] = []
_LAYOUT: list[LayoutRecord] = []


def record_order(rec: OrderRecord) -> None:
    _ORDER.append(rec)


def record_layout(rec: LayoutRecord) -> None:
    _LAYOUT.append(rec)


def latest_order(function: str = "train_step") -> OrderRecord | None:
    return next((r for r in reversed(_ORDER) if r.function == function), None)


def latest_layout(function: str = "train_step") -> LayoutRecord | None:
    return next((r for r in reversed(_LAYOUT) if r.function == function), None)


def clear_records() -> None:
    _ORDER.clear()
    _LAYOUT.clear()
