"""The tables and summaries of the zoo benchmark (``benchmarks/run.py``): plain functions over the
``roam-tvm compare --json`` reports, with no TVM and no torch.

A *configuration* is a network at one size with one optimizer and loss. Several zoo names can be the same
configuration (the small ``gpt2-small``/``gpt2-medium``/``gpt2-xl`` are one 2-layer network; ``mlp`` and
``mlp@batch64`` are one run), so tables list each configuration once and means are over distinct ones.
"""
from __future__ import annotations

import json
from typing import Callable, Dict, List, Optional

MIB = 2**20
PLANNERS = ("tvm-default", "roam-order-only", "roam-layout-only", "roam", "pytorch")

# The ROAM paper's GPT2-XL figures (MiB, parameters included): batch -> (PyTorch, ROAM, ROAM seconds).
PAPER_GPT2XL = {1: (27639, 19243, 337), 2: (34215, 32468, 322), 4: (61197, 58995, 327)}
PAPER_MEAN_VS_PYTORCH = 35.7  # % over the paper's 14 model x batch configurations

# Config keys that do not change the network that is planned.
_NOT_CONFIGURATION = ("name", "meta", "target")


def configuration_key(rep: dict) -> str:
    """What makes two reports the same run: the config without the zoo name (or the failed run's key)."""
    cfg = rep.get("config")
    if not cfg:
        return json.dumps({"model": rep.get("model"), "options": rep.get("options"), "error": rep.get("error")},
                          sort_keys=True, default=str)
    return json.dumps({k: v for k, v in cfg.items() if k not in _NOT_CONFIGURATION}, sort_keys=True, default=str)


def distinct_configurations(entries: Dict[str, dict]) -> Dict[str, dict]:
    """``entries`` with each configuration once, keyed by every entry key that names it (``a / b``)."""
    groups: Dict[str, List[str]] = {}
    for key, rep in entries.items():
        groups.setdefault(configuration_key(rep), []).append(key)
    return {" / ".join(keys): entries[keys[0]] for keys in groups.values()}


def mib(b) -> str:
    if b is None:
        return "–"
    v = b / MIB
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}" if v >= 1 else f"{v:.3f}"


def pct(x) -> str:
    return "–" if x is None else f"{x:+.1f}%"


def reduction(new, old):
    """Percent change of ``new`` against ``old`` (negative = less memory)."""
    if new is None or not old:
        return None
    return 100.0 * (new - old) / old


def peak(rep: dict, planner: str):
    r = rep.get("planners", {}).get(planner)
    return None if r is None else r["peak_bytes"]


def config_str(rep: dict) -> str:
    cfg = rep.get("config") or {}
    parts = [f"{k} {cfg[k]}" for k in ("batch", "seq", "image") if cfg.get(k) is not None]
    if cfg.get("small"):
        parts.append("small")
    if cfg.get("optimizer"):
        parts.append(cfg["optimizer"])
    return ", ".join(parts)


def how_str(rep: dict) -> str:
    methods = {}
    for p, r in rep.get("planners", {}).items():
        methods.setdefault(r.get("method", "planned"), []).append("pytorch" if p == "pytorch" else "tvm")
    parts = []
    if "planned" in methods:
        parts.append("planned")
    for m in ("simulated", "measured"):
        if m in methods:
            parts.append(f"pytorch {m}")
    return "; ".join(parts)


def summary(entries: dict) -> dict:
    """Mean change of ``roam`` against ``tvm-default`` and ``pytorch`` over distinct configurations."""
    rows, vs_default, vs_pytorch = [], [], []
    for key, rep in distinct_configurations(entries).items():
        if "error" in rep:
            continue
        d, r, p = peak(rep, "tvm-default"), peak(rep, "roam"), peak(rep, "pytorch")
        a, b = reduction(r, d), reduction(r, p)
        if a is not None:
            vs_default.append(a)
        if b is not None:
            vs_pytorch.append(b)
        rows.append(key)
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {"models": len(rows), "mean_vs_default": mean(vs_default), "mean_vs_pytorch": mean(vs_pytorch),
            "failed": [k for k, r in entries.items() if "error" in r]}


def mean_line(s: dict) -> str:
    """One sentence with the means of ``summary``."""
    def m(x):
        return "–" if x is None else f"{x:+.1f}%"

    out = (f"Mean over {s['models']} distinct configurations (arithmetic mean of per-configuration changes): "
           f"roam vs tvm-default {m(s['mean_vs_default'])}, roam vs pytorch {m(s['mean_vs_pytorch'])} "
           f"(the paper: -{PAPER_MEAN_VS_PYTORCH}% vs PyTorch over 14 model x batch configurations, "
           "at full sizes).")
    if s["failed"]:
        out += f" Failed: {', '.join(s['failed'])}."
    return out


def short_table(entries: dict) -> list[str]:
    """The README table: one row per model."""
    lines = ["| model | config | ops | tvm-default | pytorch | roam | roam vs tvm-default | roam vs pytorch "
             "| roam plan s | how |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for key, rep in distinct_configurations(entries).items():
        if "error" in rep:
            lines.append(f"| {key} | {config_str({'config': rep.get('options', {})})} | | | | | | | | "
                         f"failed: {rep['error'][:80].replace('|', '/')} |")
            continue
        d, r, p = peak(rep, "tvm-default"), peak(rep, "roam"), peak(rep, "pytorch")
        secs = rep["planners"].get("roam", {}).get("plan_seconds")
        lines.append(f"| {key} | {config_str(rep)} | {rep.get('ops', '')} | {mib(d)} | {mib(p)} | {mib(r)} "
                     f"| {pct(reduction(r, d))} | {pct(reduction(r, p))} "
                     f"| {'' if secs is None else f'{secs:.1f}'} | {how_str(rep)} |")
    return lines


def full_table(entries: dict) -> list[str]:
    """Every planner and bound, MiB."""
    bounds = ("order", "any", "cut")
    head = ["model", "config", "ops", "planned ops", "always live"] + list(PLANNERS) + \
           [f"bound: {b}" for b in bounds] + ["order s", "layout-only s", "roam s", "import s", "wall s", "how"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 3) + "---|"]
    for key, rep in distinct_configurations(entries).items():
        if "error" in rep:
            lines.append(f"| {key} | {config_str({'config': rep.get('options', {})})} | failed: "
                         f"{rep['error'][:200].replace('|', '/')} |" + " |" * (len(head) - 3))
            continue
        pl = rep["planners"]
        row = [key, config_str(rep), str(rep.get("ops", "")), str(rep.get("planned_ops", "")),
               mib(rep.get("always_live_bytes"))]
        row += [mib(peak(rep, p)) for p in PLANNERS]
        row += [mib(rep.get("lower_bounds", {}).get(b)) for b in bounds]
        for p in ("roam-order-only", "roam-layout-only", "roam"):
            s = pl.get(p, {}).get("plan_seconds")
            row.append("–" if s is None else f"{s:.1f}")
        row.append(f"{rep.get('import_seconds', 0):.0f}")
        row.append(f"{rep.get('wall_seconds', 0):.0f}")
        row.append(how_str(rep))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def paper_entry(entries: dict, batch: int) -> Optional[dict]:
    """Our full-size ``gpt2-xl-paper`` report at ``batch`` and 1,024 tokens, if it was run."""
    ours = None
    for rep in entries.values():
        cfg = rep.get("config") or {}
        if ("error" not in rep and rep.get("model") == "gpt2-xl-paper" and not cfg.get("small")
                and cfg.get("batch") == batch and cfg.get("seq") == 1024):
            ours = rep
    return ours


def paper_rows(entries: dict, mode: str = "default",
               adam_state_bytes: Optional[Callable[[dict], Optional[int]]] = None) -> list[str]:
    """The paper's GPT2-XL figures beside ours, in both accountings.

    The paper counts parameters + the planned step memory and leaves Adam's two state tensors out (its
    base is about the parameters alone); ours count them as always live. ``adam_state_bytes(report)`` gives
    our Adam state for a report, so that our figures can also be shown as the paper counts.
    """
    lines = ["| batch | paper PyTorch | paper ROAM | paper ROAM vs PyTorch | paper ROAM s "
             "| our Adam state | our pytorch, paper's accounting | vs paper PyTorch | our roam, paper's accounting "
             "| vs paper ROAM | our pytorch | our tvm-default | our roam | our roam vs pytorch | our roam s |",
             "|---:|" + "---:|" * 14]
    for b, (pt, ro, secs) in PAPER_GPT2XL.items():
        ours = paper_entry(entries, b)
        paper = [str(b), f"{pt:,}", f"{ro:,}", pct(reduction(ro, pt)), str(secs)]
        if ours is None:
            why = "not run (quick sizes; `--paper` runs it)" if mode == "quick" else "not run (`--paper` runs it)"
            lines.append("| " + " | ".join(paper + [why] + [""] * 9) + " |")
            continue
        p, d, r = peak(ours, "pytorch"), peak(ours, "tvm-default"), peak(ours, "roam")
        state = adam_state_bytes(ours) if adam_state_bytes else None
        p_paper = None if (p is None or state is None) else p - state
        r_paper = None if (r is None or state is None) else r - state
        s = ours["planners"].get("roam", {}).get("plan_seconds")
        lines.append("| " + " | ".join(paper + [
            mib(state), mib(p_paper), pct(reduction(p_paper and p_paper / MIB, pt)),
            mib(r_paper), pct(reduction(r_paper and r_paper / MIB, ro)),
            mib(p), mib(d), mib(r), pct(reduction(r, p)), "" if s is None else f"{s:.0f}"]) + " |")
    return lines


def measured_table(data: dict) -> list[str]:
    """``measured_cpu.json`` (``benchmarks/measure_cpu.py``): planned beside measured, per model and planner."""
    lines = ["| model | planner | planned | largest scratch | planned + scratch | planned + TVM's pool "
             "| measured (CPU) | measured vs planned | vs planned + scratch | vs planned + pool "
             "| measured (CPU), pooled VM allocator |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, ent in data.get("entries", {}).items():
        for planner, r in ent.get("planners", {}).items():
            lines.append(f"| {key} | {planner} | {r['planned_bytes']:,} | {r['scratch_bytes']:,} "
                         f"| {r['peak_with_scratch_bytes']:,} | {r['pool_peak_bytes']:,} | {r['measured_bytes']:,} "
                         f"| {pct(100 * (r['measured_over_planned'] - 1))} "
                         f"| {pct(100 * (r['measured_over_with_scratch'] - 1))} "
                         f"| {pct(100 * (r['measured_over_pool'] - 1))} "
                         f"| {'–' if r.get('measured_pooled_bytes') is None else format(r['measured_pooled_bytes'], ',')} |")
    return lines


def generic_results(name: str, data: dict) -> list[str]:
    """A results JSON of another benchmark: its command and its rows (scalar columns only)."""
    out = [f"### `{name}`", ""]
    if data.get("command"):
        out += [f"Command: `{data['command']}`", ""]
    rows = data.get("results")
    if isinstance(rows, dict):
        rows = [{"name": k, **(v if isinstance(v, dict) else {"value": v})} for k, v in rows.items()]
    if not isinstance(rows, list) or not rows:
        keys = [k for k, v in data.items() if isinstance(v, (int, float, str)) and k != "command"]
        out += [f"- {k}: {data[k]}" for k in keys[:20]] or ["(no rows)"]
        return out + [""]
    cols = []
    for r in rows:
        for k, v in (r.items() if isinstance(r, dict) else []):
            if isinstance(v, (int, float, str, bool)) and k not in cols:
                cols.append(k)
    cols = cols[:12]

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**6:
            return f"{v:,}"
        return str(v)

    out += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows[:40]:
        if isinstance(r, dict):
            out.append("| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |")
    if len(rows) > 40:
        out.append(f"\n({len(rows) - 40} more rows in the JSON)")
    return out + [""]


