"""Plot peak against overhead per model from ``benchmarks/results/remat.json``, beside the baselines.

Usage::

    python benchmarks/plot_remat.py [--json benchmarks/results/remat.json] [--out benchmarks/results/remat.png]

One panel per model: roam's budgeted plans (peak against H100 roofline
overhead), the LP-relaxation lower bound at each budget, roam without a
budget, PyTorch eager, and ``torch.utils.checkpoint`` around every stage or
block (its overhead is an eager roofline, marked with its FLOPs overhead
too), plus the issue's targets on that model as boxes (budget, overhead
limit): met when a plan lies inside.
"""
from __future__ import annotations

import argparse
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30


def _panel(ax, m: dict, targets: list[dict]) -> None:
    from matplotlib.patches import Rectangle

    rows = [r for r in m["budgets"] if "peak_bytes" in r]
    ax.plot([100 * r["overhead_time"] for r in rows], [r["peak_bytes"] / GIB for r in rows], "o-", ms=3,
            label="roam + recomputation")
    lb = [(100 * r["lp_bound_time"], r["budget_bytes"] / GIB) for r in rows if r.get("lp_bound_time") is not None]
    if lb:
        ax.plot(*zip(*lb), "--", color="grey", label="LP lower bound (same candidates)")
    ax.plot([0], [m["unbudgeted_peak_bytes"] / GIB], "s", color="C0", label="roam, no budget")
    base = m.get("baselines", {})
    if "pytorch" in base:
        ax.plot([0], [base["pytorch"]["peak_bytes"] / GIB], "^", color="C3", label="PyTorch eager")
    ck = base.get("checkpoint", {})
    if "peak_bytes" in ck:
        ax.plot([100 * ck["overhead_time"]], [ck["peak_bytes"] / GIB], "v", color="C2",
                label=f"checkpoint per {'stage' if 'stage' in ck['wraps'] else 'block'} (eager roofline)")
        ax.plot([100 * ck["overhead_flops"]], [ck["peak_bytes"] / GIB], "v", mfc="none", color="C2",
                label="same, FLOPs overhead")
    for t in targets:
        if t.get("budget_bytes") is None:
            continue
        b, lim = t["budget_bytes"] / GIB, 100 * t["overhead_limit"]
        ax.add_patch(Rectangle((0, 0), lim, b, fill=False, ls=":", color="C1" if t["met"] else "C3"))
        if t.get("peak_bytes") is not None:
            ax.plot([100 * t["overhead_time"]], [t["peak_bytes"] / GIB], "x", color="C1" if t["met"] else "C3")
    sizes = ", ".join(f"{k} {v}" for k, v in m.get("sizes", {}).items())
    ax.set_title(f"{m['model']}{' small' if m['small'] else ''} {sizes}", fontsize=9)
    ax.set_xlabel("overhead, % of step (H100 roofline)")
    ax.set_ylabel("peak (GiB)")
    ax.grid(alpha=0.3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(HERE, "results", "remat.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "remat.png"))
    args = ap.parse_args(argv)
    with open(args.json) as f:
        rep = json.load(f)
    models = [m for m in rep["models"] if m["unbudgeted_peak_bytes"] > m["floor_bytes"]]
    if not models:
        raise SystemExit(f"{args.json}: no model where recomputation lowers the peak; nothing to plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(models))
    rows = math.ceil(len(models) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    for ax, m in zip(axes.flat, models):
        key = ":".join([m["model"]] + [f"{k}={v}" for k, v in m.get("sizes", {}).items()])
        _panel(ax, m, [t for t in rep.get("targets", []) if t["model"] == key])
    for ax in list(axes.flat)[len(models):]:
        ax.axis("off")
    for ax in list(axes.flat)[:len(models)]:
        ax.legend(fontsize=6)
    fig.suptitle("peak vs recomputation overhead", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
