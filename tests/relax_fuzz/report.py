"""Text for people: one failing case (with the command that reproduces it), and a summary."""
from __future__ import annotations

import collections

from .generator import Features
from .harness import Result


def repro_command(seed: int, features: Features = Features()) -> str:
    """The one command that re-runs ``seed`` and prints its Relax script."""
    off = [n for n in Features.names() if not getattr(features, n)]
    extra = f" --disable {','.join(off)}" if off else ""
    return f"python -m tests.relax_fuzz --seed {seed} --count 1 --show{extra}"


def describe(res: Result, features: Features = Features(), script: bool = True) -> str:
    """A failing case: seed, constructs, problems, reproduction, and the Relax script."""
    lines = [f"seed {res.seed}: {res.status} (constructs: {', '.join(res.used) or '?'})"]
    lines += [f"  - {p}" for p in res.problems]
    lines += ["  " + n.replace("\n", "\n    ") for n in res.notes if "traceback" in n][:1]
    lines.append(f"  reproduce: {repro_command(res.seed, features)}")
    if script and res.script:
        lines += ["  Relax script (before lowering):", res.script]
    return "\n".join(lines)


def layout_statuses(results: list[Result]) -> collections.Counter:
    """How often each roam planner used its own plan, kept TVM's, or fell back."""
    count = collections.Counter()
    for res in results:
        for note in res.notes:
            if "layout status" in note:
                name, status = note.split(": layout status ", 1)
                count[f"{name}: {status.split(':')[0]}"] += 1
    return count


def summary(results: list[Result], seconds: float) -> str:
    by_status = collections.Counter(r.status for r in results)
    lines = [f"{len(results)} functions in {seconds:.1f} s: "
             + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))]
    for key, n in sorted(layout_statuses(results).items()):
        lines.append(f"  {key}: {n}")
    flagged = sum(any(n.startswith("static: checker:") and "cannot verify" not in n for n in r.notes)
                  for r in results)
    if flagged:
        lines.append(f"  checker flagged StaticPlanBlockMemory's own plan on {flagged} function(s) (notes)")
    unverified = sum(any("checker: cannot verify" in n for n in r.notes) for r in results)
    if unverified:
        lines.append(f"  checker could not verify {unverified} function(s) (\"cannot verify: ...\" notes)")
    if any("checker: roam_tvm.verify is not importable" in n for r in results for n in r.notes):
        lines.append("  note: roam_tvm.verify is not importable yet; plans were not checked by it")
    bad = [r for r in results if r.status != "ok"]
    if bad:
        lines.append("failing seeds: " + " ".join(str(r.seed) for r in bad))
    return "\n".join(lines)


def by_symptom(results: list[Result]) -> dict[str, list[int]]:
    """Failing seeds grouped by their first problem, numbers stripped (a rough symptom key)."""
    groups = collections.defaultdict(list)
    for res in results:
        if res.status == "ok":
            continue
        first = res.problems[0] if res.problems else res.status
        key = "".join("#" if ch.isdigit() else ch for ch in first)[:160]
        groups[key].append(res.seed)
    return dict(groups)
