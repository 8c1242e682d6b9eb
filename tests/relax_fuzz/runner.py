"""Run many fuzz cases in a child process, so that a crash (segfault) is a result, not the end.

One child process runs the cases one after another. If it dies, the case it
was running is reported as ``crash`` and re-run once per planner, each in a
fresh child, to name the planner that crashes; the rest continue in a new child.
"""
from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable

from .generator import Features, generate
from .harness import ALL_PLANNERS, REFERENCE_PLANNERS, Result, run_case


def one_case(seed: int, features: Features, time_limit: float, checker: bool,
             planners: tuple[str, ...] = ALL_PLANNERS) -> Result:
    """Generate and run one case (the unit of work of the child process)."""
    try:
        case = generate(seed, features)
    except Exception as err:  # noqa: BLE001 - a generator bug, reported with its seed
        res = Result(seed, [])
        res.fail("generator", f"generate: {type(err).__name__}: {err}")
        return res
    return run_case(case, time_limit, checker, planners)


def _pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))


def _crash_result(seed: int, features: Features, time_limit: float, planners: tuple[str, ...]) -> Result:
    """Which planner's process dies on ``seed``? Each is tried alone in a fresh child."""
    res = Result(seed, [])
    for name in planners:
        planners = ("none", "static", name) if name not in REFERENCE_PLANNERS else (name,)
        with _pool() as pool:
            try:
                part = pool.submit(one_case, seed, features, time_limit, False, planners).result()
            except BrokenProcessPool:
                status = "generator" if name in REFERENCE_PLANNERS else "fail"
                res.fail(status, f"{name}: the process crashed (segfault or abort) while building or running")
                continue
        res.used = part.used
        res.script = part.script
    if not res.problems:
        res.fail("fail", "the process crashed, but no planner crashes alone (state left by another case?)")
    res.status = "crash" if res.status == "fail" else res.status
    return res


def run_many(seeds: Iterable[int], features: Features = Features(), time_limit: float = 1.0,
             checker: bool = True, isolate: bool = True,
             on_result: Callable[[Result], None] | None = None,
             planners: tuple[str, ...] = ALL_PLANNERS) -> list[Result]:
    """Run every seed; ``on_result`` sees each result as it comes."""
    results = []
    pool = _pool() if isolate else None
    try:
        for seed in seeds:
            start = time.perf_counter()
            if pool is None:
                res = one_case(seed, features, time_limit, checker, planners)
            else:
                try:
                    res = pool.submit(one_case, seed, features, time_limit, checker, planners).result()
                except BrokenProcessPool:
                    pool.shutdown(wait=False)
                    res = _crash_result(seed, features, time_limit, planners)
                    pool = _pool()
            res.seconds = time.perf_counter() - start
            results.append(res)
            if on_result is not None:
                on_result(res)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return results
