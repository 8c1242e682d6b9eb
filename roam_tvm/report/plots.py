"""Plots for plans and reports (matplotlib, Agg backend: files only, no display).

* :func:`plot_timeline` -- one arena: step on x, offset on y, one rectangle per
  buffer (the picture minimalloc and the ROAM paper draw);
* :func:`plot_planner_bars` -- peaks per planner from a ``compare`` report, with
  the lower bounds as horizontal lines;
* :func:`plot_lines` -- a few named series over a shared x (benchmarks).

Buffers are :class:`roam_tvm.layout.Buffer` (half-open lifespan ``[lower,
upper)``, ``size`` bytes); offsets are bytes. Axes are labelled in MiB when the
data reach 1 MiB, else KiB, else bytes.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # noqa: E402 - before pyplot; never opens a window

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PatchCollection  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from ..layout import Buffer  # noqa: E402

__all__ = ["byte_unit", "human_bytes", "plot_timeline", "plot_planner_bars", "plot_lines", "save"]

_PLANNER_COLORS = {
    "tvm-default": "#7f7f7f",
    "pytorch": "#ee7733",
    "roam-order-only": "#88ccee",
    "roam-layout-only": "#44aa99",
    "roam": "#0077bb",
}
_BOUND_STYLES = {"order": ":", "any": "-.", "cut": "--", "pair": (0, (5, 1))}


def byte_unit(max_bytes: float) -> tuple[str, float]:
    """A unit name and its size in bytes that suits values up to ``max_bytes``."""
    if max_bytes >= 2**30 * 4:
        return "GiB", float(2**30)
    if max_bytes >= 2**20:
        return "MiB", float(2**20)
    if max_bytes >= 2**10:
        return "KiB", float(2**10)
    return "B", 1.0


def save(fig, path: str, dpi: int = 120) -> str:
    """Save and close a figure; creates the folder. Returns ``path``."""
    folder = os.path.dirname(os.fspath(path))
    if folder:
        os.makedirs(folder, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return os.fspath(path)


def plot_timeline(ax, buffers: Sequence[Buffer], offsets: Mapping[str, int], title: str = "",
                  peak_step: int | None = None, height: int | None = None, lower_bound: int | None = None,
                  unit: str | None = None, label_top: int = 0, color_by: str = "size",
                  xlabel: str = "step (op index)", extra: Sequence[tuple[Buffer, int]] = (),
                  height_label: str = "arena height", bound_label: str = "lower bound (max live)",
                  extra_label: str = "outside the arena", labels: Mapping[str, str] | None = None) -> dict:
    """Draw a layout: one rectangle per buffer over ``[lower, upper)`` x ``[offset, offset+size)``.

    Parameters
    ----------
    ax : matplotlib Axes
    buffers : sequence of Buffer
        Lifespans are half-open steps; zero-size or never-live buffers are skipped.
    offsets : mapping buffer id -> byte offset
        Buffers missing here are skipped.
    title : str
    peak_step : int, optional
        Drawn as a vertical line ("peak step").
    height : int, optional
        The arena height, drawn dashed; default max(offset + size).
    lower_bound : int, optional
        Bytes no layout can go below (max live bytes), drawn dotted.
    unit : str, optional
        "B", "KiB", "MiB" or "GiB"; default picked from the height.
    label_top : int
        Write the ids (or ``labels[id]``) of the ``label_top`` largest buffers (by area) on them
        (only buffers big enough to hold a label).
    color_by : str
        ``size`` (colour map over log size) or ``lifetime`` (over length).
    extra : sequence of (Buffer, offset)
        Further blocks drawn hatched (e.g. allocations outside the arena).
    height_label, bound_label, extra_label : str
        Legend entries of the height line, the lower-bound line and the extra blocks.

    Returns a dict with the ``unit``, ``scale`` and the ``height`` drawn.
    """
    import math

    live = [b for b in buffers if b.size > 0 and b.upper > b.lower and b.id in offsets]
    top = max((offsets[b.id] + b.size for b in live), default=0)
    top = max([top] + [o + b.size for b, o in extra])
    height = top if height is None else height
    if unit is None:
        unit, scale = byte_unit(max(height, top, lower_bound or 0))
    else:
        scale = {"B": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}[unit]
    cmap = plt.get_cmap("viridis")
    if live:
        if color_by == "lifetime":
            keys = [b.upper - b.lower for b in live]
        else:
            keys = [math.log2(b.size) for b in live]
        lo, hi = min(keys), max(keys)
        span = (hi - lo) or 1.0
        colors = [cmap(0.15 + 0.75 * (k - lo) / span) for k in keys]
        rects = [Rectangle((b.lower, offsets[b.id] / scale), b.upper - b.lower, b.size / scale) for b in live]
        ax.add_collection(PatchCollection(rects, facecolors=colors, edgecolors="black", linewidths=0.4,
                                          alpha=0.9))
    if live:
        ax.add_patch(Rectangle((0, 0), 0, 0, facecolor=cmap(0.55), edgecolor="black",
                               label="colour: log size" if color_by != "lifetime" else "colour: lifetime"))
    if extra:
        rects = [Rectangle((b.lower, o / scale), b.upper - b.lower, b.size / scale) for b, o in extra
                 if b.size > 0 and b.upper > b.lower]
        ax.add_collection(PatchCollection(rects, facecolors="#ee7733", edgecolors="black", linewidths=0.4,
                                          hatch="//", alpha=0.6))
        ax.add_patch(Rectangle((0, 0), 0, 0, facecolor="#ee7733", hatch="//", edgecolor="black", alpha=0.6,
                               label=extra_label))
    steps_hi = max([b.upper for b in live] + [b.upper for b, _ in extra] + [1])
    steps_lo = min([b.lower for b in live] + [b.lower for b, _ in extra] + [0])
    if label_top:
        span = max(1, steps_hi - steps_lo)
        big = [b for b in live if b.size >= 0.04 * max(top, 1) and (b.upper - b.lower) >= 0.04 * span]
        for b in sorted(big, key=lambda b: -b.area)[:label_top]:
            ax.text(b.lower + (b.upper - b.lower) / 2, (offsets[b.id] + b.size / 2) / scale,
                    (labels or {}).get(b.id, b.id),
                    ha="center", va="center", fontsize=6, clip_on=True)
    ax.axhline(height / scale, color="black", linestyle="--", linewidth=1.2,
               label=f"{height_label} {_fmt(height, unit, scale)}")
    if lower_bound is not None:
        ax.axhline(lower_bound / scale, color="#cc3311", linestyle=":", linewidth=1.2,
                   label=f"{bound_label} {_fmt(lower_bound, unit, scale)}")
    if peak_step is not None:
        ax.axvline(peak_step + 0.5, color="#cc3311", linestyle="-", linewidth=1.0, alpha=0.8,
                   label=f"peak step {peak_step}")
    ax.set_xlim(steps_lo, steps_hi)
    ax.set_ylim(0, max(height, top, lower_bound or 0) / scale * 1.08 or 1.0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"offset ({unit})")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, framealpha=0.9, borderaxespad=0.0)
    ax.grid(True, axis="y", alpha=0.3)
    return {"unit": unit, "scale": scale, "height": height}


def human_bytes(n: float) -> str:
    """``n`` bytes in the unit that suits it: ``512 B``, ``10.00 KiB``, ``1,234.5 MiB``."""
    unit, scale = byte_unit(abs(n))
    return _fmt(n, unit, scale)


def _fmt(value: float, unit: str, scale: float) -> str:
    v = value / scale
    return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.2f} {unit}"


def plot_planner_bars(report: dict, path: str, title: str | None = None,
                      planners: Sequence[str] | None = None) -> str:
    """Bar chart of the peak of each planner in a ``compare`` report; lower bounds as lines.

    ``report`` is what ``roam_tvm.report.compare.compare_step`` returns (or the
    JSON ``roam-tvm compare --json`` writes): ``report["planners"][name]["peak_bytes"]``
    and ``report["lower_bounds"][kind]``. Writes a PNG to ``path``; returns it.
    """
    rows = report.get("planners", {})
    names = [p for p in (planners or rows) if p in rows]
    peaks = [float(rows[p]["peak_bytes"]) for p in names]
    bounds = {k: float(v) for k, v in (report.get("lower_bounds") or {}).items() if v is not None}
    unit, scale = byte_unit(max(peaks + list(bounds.values()) + [1.0]))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(names) + 2.5), 4.2))
    xs = range(len(names))
    colors = [_PLANNER_COLORS.get(p, "#bbbbbb") for p in names]
    bars = ax.bar(xs, [p / scale for p in peaks], color=colors, edgecolor="black", linewidth=0.6)
    for rect, p, name in zip(bars, peaks, names):
        method = rows[name].get("method", "planned")
        label = f"{p / scale:,.1f}" + ("*" if method not in ("planned", "") else "")
        ax.annotate(label, (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    for kind, v in bounds.items():
        ax.axhline(v / scale, color="#cc3311", linestyle=_BOUND_STYLES.get(kind, "-"), linewidth=1.2,
                   label=f"lower bound: {kind} ({v / scale:,.1f} {unit})")
    always = report.get("always_live_bytes")
    if always:
        ax.axhline(always / scale, color="black", linestyle="-", linewidth=0.8, alpha=0.5,
                   label=f"always live ({always / scale:,.1f} {unit})")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=20, ha="right")
    ax.set_ylabel(f"peak memory ({unit})")
    ax.set_ylim(0, max(peaks + list(bounds.values()) + [1e-9]) / scale * 1.15)
    if title is None:
        model = report.get("model", "")
        cfg = report.get("config") or {}
        extra = ", ".join(f"{k}={v}" for k, v in cfg.items() if k in ("batch", "seq", "image", "optimizer"))
        title = f"peak memory per planner{': ' + model if model else ''}{' (' + extra + ')' if extra else ''}"
    ax.set_title(title)
    if any(rows[p].get("method", "planned") not in ("planned", "") for p in names):
        ax.text(0.01, 0.99, "* not planned by TVM (measured or simulated eager)", transform=ax.transAxes,
                fontsize=7, va="top")
    if bounds or always:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, framealpha=0.9, borderaxespad=0.0)
    ax.grid(True, axis="y", alpha=0.3)
    return save(fig, path)


def plot_lines(xs: Sequence[float], series: Mapping[str, Sequence[float | None]], path: str,
               xlabel: str, ylabel: str, title: str = "", logx: bool = False, logy: bool = False,
               markers: bool = True) -> str:
    """One line per named series over the shared ``xs``; ``None`` values are gaps. Writes a PNG."""
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for i, (name, ys) in enumerate(series.items()):
        ys = list(ys)
        if len(ys) != len(xs):
            raise ValueError(f"series {name!r} has {len(ys)} values for {len(xs)} x values")
        vals = [float("nan") if y is None else float(y) for y in ys]
        ax.plot(list(xs), vals, marker="os^vDP*x"[i % 8] if markers else None, markersize=4,
                color=_PLANNER_COLORS.get(name), label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if series:
        ax.legend(fontsize=8, framealpha=0.9)
    ax.grid(True, alpha=0.3)
    return save(fig, path)
