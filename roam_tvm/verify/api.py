"""Public entry points of the plan checker: run both functions on every path and compare."""
from __future__ import annotations

from collections import Counter

import tvm
from tvm import relax

from .executor import Run
from .memory import Tokens, Unmodelled

MAX_PATHS = 32
MAX_MESSAGES = 8


class PlanCheckError(Exception):
    """Raised by :func:`require_plan` when a plan fails the check; ``violations`` lists why."""

    def __init__(self, violations: list[str]):
        self.violations = list(violations)
        super().__init__("memory plan rejected:\n  " + "\n  ".join(self.violations))


def check_plan(reference: relax.Function, planned: relax.Function, mod: tvm.IRModule) -> list[str]:
    """Violations of ``planned`` against ``reference``; empty when both compute the same values.

    Never raises: anything the checker cannot model gives a violation starting with "cannot verify:".
    """
    return _check(reference, planned, mod, mod)


def require_plan(reference: relax.Function, planned: relax.Function, mod: tvm.IRModule) -> None:
    """Like :func:`check_plan` but raises :class:`PlanCheckError` on any violation."""
    bad = check_plan(reference, planned, mod)
    if bad:
        raise PlanCheckError(bad)


def check_module(before: tvm.IRModule, after: tvm.IRModule) -> dict[str, list[str]]:
    """:func:`check_plan` for every Relax function of either module, by name (missing = violation)."""
    names = {g.name_hint for m in (before, after) for g, f in m.functions.items()
             if isinstance(f, relax.Function)}
    out = {}
    for name in sorted(names):
        if name not in _relax_names(before) or name not in _relax_names(after):
            out[name] = [f"function `{name}` is in only one of the two modules"]
            continue
        out[name] = _check(before[name], after[name], before, after)
    return out


def _relax_names(mod) -> set:
    return {g.name_hint for g, f in mod.functions.items() if isinstance(f, relax.Function)}


def _check(reference, planned, ref_mod, plan_mod) -> list[str]:
    try:
        if len(reference.params) != len(planned.params):
            return [f"the planned function has {len(planned.params)} params, the reference "
                    f"{len(reference.params)}"]
        for sym in _assignments(reference):
            bad = _check_assignment(reference, planned, ref_mod, plan_mod, sym)
            if bad:
                if sym:
                    where = ", ".join(f"{k}={v}" for k, v in sorted(sym.items()))
                    bad = [b if b.startswith("cannot verify") else f"{b} (with {where})" for b in bad]
                return bad
        return []
    except Unmodelled as e:
        return [f"cannot verify: {e}"]
    except Exception as e:  # never raise: an odd input is reported, not thrown
        return [f"cannot verify: checker failed with {type(e).__name__}: {e}"]


def _bound(func, attr: str) -> dict:
    raw = func.attrs.get(attr) if func.attrs is not None and attr in func.attrs else None
    out = {}
    for k, v in (raw.items() if raw is not None else []):
        if isinstance(v, tvm.tirx.IntImm):
            v = int(v.value)
        if not isinstance(v, int):
            raise Unmodelled(f"function attribute {attr}[{k}] is not an integer")
        out[str(k)] = v
    return out


def _assignments(func) -> list[dict]:
    """Shape assignments to check: every symbolic variable at its upper bound, and at its lower bound.

    A variable with no upper bound is sampled at lower bound + 7: the check is then a sample, not a proof.
    """
    names = sorted({v.name for p in func.params for v in relax.analysis.tir_vars_in_type(p.ty)})
    if not names:
        return [{}]
    ub, lb = _bound(func, "tir_var_upper_bound"), _bound(func, "tir_var_lower_bound")
    lo = {n: max(lb.get(n, 1), 0) for n in names}
    hi = {n: ub.get(n, lo[n] + 7) for n in names}
    return [hi] if hi == lo else [hi, lo]


def _explore(func, mod, tokens: Tokens, sym: dict, who: str) -> dict:
    """Run ``func`` on every branch path; path (tuple of (cond token, branch)) -> RunResult."""
    results, todo, done = {}, [{}], set()
    while todo:
        choices = todo.pop()
        res = Run(func, mod, tokens, sym, choices, who).run()
        if res.path in done:
            continue
        done.add(res.path)
        results[res.path] = res
        fixed = {}
        for tok, took in res.path:
            if tok not in choices and took:
                todo.append({**fixed, tok: False})
            fixed[tok] = took
        if len(results) > MAX_PATHS:
            raise Unmodelled(f"more than {MAX_PATHS} branch paths")
    return results


def _check_assignment(reference, planned, ref_mod, plan_mod, sym) -> list[str]:
    tokens = Tokens()
    ref = _explore(reference, ref_mod, tokens, sym, "reference")
    plan = _explore(planned, plan_mod, tokens, sym, "planned")
    bad = []
    for path, r in ref.items():
        bad += [f"reference: {v}" for v in r.violations]
    for path, p in plan.items():
        r = ref.get(path)
        if r is None:
            bad.append("the planned function takes a branch path the reference never takes: "
                       + "; ".join(f"{tokens.describe(t)} -> {'then' if b else 'else'}" for t, b in path))
            continue
        bad += _compare(r, p)
        if len(bad) >= MAX_MESSAGES:
            break
    return bad[:MAX_MESSAGES]


def _compare(r, p) -> list[str]:
    bad = list(p.violations)
    left = Counter(e.key for e in r.events)
    wrong = [e for e in p.events if not _take(left, e.key)]
    if wrong:
        # the first wrong read is the cause; later ones (and the outputs) mostly follow from it
        more = f" (and {len(wrong) - 1} later call(s) read values that differ)" if len(wrong) > 1 else ""
        return bad + [_explain(wrong[0], r.events) + more]
    for e in r.events:
        if _take(left, e.key):
            bad.append(f"the reference's `{e.label}` has no matching call in the planned function")
    ref_impure = [e for e in r.events if e.extern]
    for i, (a, b) in enumerate(zip(ref_impure, [e for e in p.events if e.extern])):
        if a.key != b.key:
            bad.append(f"impure call #{i} is `{b.label}`, the reference's is `{a.label}` (order of "
                       "R.call_packed calls changed)")
            break
    bad += _diff("the return value", r.result, p.result)
    for i, (a, b) in enumerate(zip(r.params, p.params)):
        bad += _diff(f"param {i} at exit", a, b)
    return bad


def _take(left: Counter, key) -> bool:
    if left[key] > 0:
        left[key] -= 1
        return True
    return False


def _explain(e, ref_events) -> str:
    same = [r for r in ref_events if r.callee == e.callee and len(r.key[1]) == len(e.key[1])]
    if not same:
        return f"`{e.label}`: the reference never calls `{e.callee}` with this many arguments"
    best = max(same, key=lambda r: sum(a == b for a, b in zip(r.key[1], e.key[1])))
    diffs = [f"arg {i} `{e.args[i][0]}` sees {e.args[i][1]}, where the reference's `{best.label}` sees "
             f"{best.args[i][1]}" for i, (a, b) in enumerate(zip(e.key[1], best.key[1])) if a != b]
    return f"`{e.label}` reads a wrong value: " + "; ".join(diffs)


def _diff(what: str, a, b) -> list[str]:
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], tuple) and isinstance(a[1], str):
        if not (isinstance(b, tuple) and len(b) == 2 and isinstance(b[1], str)):
            return [f"{what}: the planned function gives a different structure"]
        return [] if a[0] == b[0] else [f"{what}: planned gives {b[1]}, the reference gives {a[1]}"]
    if not isinstance(b, tuple) or len(a) != len(b):
        return [f"{what}: the planned function gives a different structure"]
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        out += _diff(f"{what}[{i}]", x, y)
    return out
