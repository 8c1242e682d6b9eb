"""The layout driver: heuristics first, then improvement, always validated.

``solve(problem)`` runs

1. every greedy order (:mod:`.heuristics`), then compaction; it stops as soon as
   the height equals the lower bound (the peak of live bytes);
2. for big problems the search cannot take, bottom-up skyline passes (compiled,
   run before the greedy orders) and an iterated greedy over the
   small-long-lived-first orders (:mod:`.large`); between the two, the
   search on the peak window with the rest placed around it (:mod:`.window`);
   then ROAM's piecewise join (:mod:`.join`);
3. where no capacity is asked, a short try of the peak window packed exactly
   with the rest placed around it (:mod:`.window`, as for big traces); then a
   MiniMalloc-style branch-and-bound (:mod:`.search`) asked for ever lower
   capacities (in steps of the sizes' and alignments' gcd): first the problem's
   capacity if the heuristics overshoot it, then a probe at the lower bound (if
   it runs out of time and the window's try did too, the window again, longer);
   then bisection, and the time left to the highest capacity still unsettled;
4. for tiny problems, the big-M MIP (:mod:`.mip`) with HiGHS.

Every candidate is validated by :mod:`.validate`; a candidate that fails is
dropped, so the returned solution is always the best *valid* one.
"""
from __future__ import annotations

import time

import numpy as np

from .heuristics import ORDERS, Arrays, OverlapIndex, best_heuristic
from .join import compact, join_solve
from .large import improve as improve_large
from .large import skyline_passes
from .problem import Problem, Solution
from .search import SearchParams, search_fit, too_big
from .validate import is_valid
from .window import peak_window

METHODS = ("auto", "greedy", "search", "mip", "join")
MAX_SEARCH_BUFFERS = 3000
MAX_MIP_BUFFERS = 40
LARGE_MIN_BUFFERS = 3000  # below this the greedy orders already run many times over
WINDOW_FIRST_SHARE = 0.1  # of the time left, for a first try of the peak window before the search
WINDOW_SHARE = 0.5  # of the time left after an unsettled bound probe, for the peak window
WINDOW_MAX_PART = 0.85  # a window holding more of the buffers is the whole search again: skipped


def solve(problem: Problem, time_limit: float = 60.0, method: str = "auto", progress: bool = False,
          params: SearchParams | None = None, target: int | None = None) -> Solution:
    """Offsets for every buffer, minimising the height (and fitting ``capacity`` if possible).

    ``method``: ``auto`` (all stages), ``greedy`` (heuristics + compaction only),
    ``search`` (heuristics + branch-and-bound), ``mip`` (heuristics + MIP),
    ``join`` (heuristics + piecewise join). ``target``: stop as soon as the
    height is at most this (default: the lower bound, i.e. proven optimal). The result carries ``method`` (the
    stage that produced it) and ``stats`` (lower bound, seconds, per-stage notes).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
    t0 = time.perf_counter()
    deadline = t0 + max(float(time_limit), 0.0)
    lb = problem.lower_bound()
    arr = Arrays(problem)
    index = OverlapIndex(arr)
    log: list[str] = []
    # Overlaps and alignment are hard; the capacity is a target reported in stats["fits"].
    structural = problem.with_capacity(None)

    def say(msg: str) -> None:
        log.append(f"{time.perf_counter() - t0:7.2f}s {msg}")
        if progress:
            print(log[-1], flush=True)

    goal = max(lb, target or 0)  # the height at which every stage stops

    def target_done(h: int) -> bool:
        return h <= goal

    box = [None]
    act = np.nonzero(arr.active)[0]
    searchable = method in ("auto", "search") and not too_big(arr.lower[act], arr.upper[act], MAX_SEARCH_BUFFERS)
    # Without a search to follow, the greedy orders are the best use of the time, except on
    # big traces, where the small-long-lived-first family (.large) beats every plain order.
    big = method in ("auto", "greedy") and not searchable and len(act) >= LARGE_MIN_BUFFERS
    share = 0.4 if searchable else (0.3 if big else 0.8)
    sky, st_sky = None, {}
    if big:
        # The skyline passes first: on long traces they often reach the bound outright (Y_1),
        # and then a single greedy pass is all the heuristics stage needs to run.
        found = skyline_passes(arr, t0 + 0.4 * time_limit, None, goal, stats=st_sky)
        sky = arr.solution(*found) if found is not None else None
    early_done = sky is not None and target_done(sky.height)
    win, st_win = None, {}
    if big and not early_done:
        # Pack the peak window exactly and fill around it: reaches the bound where one short
        # stretch sets it (pangu_2.6B); it stops as soon as a layout reaches the goal.
        found = peak_window(arr, index, goal, t0 + 0.5 * time_limit,
                            sky.height if sky is not None else None, stats=st_win)
        win = arr.solution(*found) if found is not None else None
    early_done = early_done or (win is not None and target_done(win.height))
    t_greedy = time.perf_counter()
    best = box[0] = best_heuristic(problem, ORDERS, ("first", "best"),
                                   time_limit=0.0 if early_done else share * time_limit, stop_at=lb, arr=arr,
                                   index=index)
    tried = best.stats.get("heuristics", [])
    pass_s = (time.perf_counter() - t_greedy) / max(len(tried), 1)  # seconds per greedy pass

    def room(k: float = 1.5) -> bool:
        """Enough time left for a stage costing about k greedy passes."""
        return deadline - time.perf_counter() > k * pass_s
    if not is_valid(structural, best):  # pragma: no cover - the heuristics are exact by construction
        raise AssertionError("heuristic produced an invalid layout")
    say(f"heuristics: {best.height} ({best.method}), lower bound {lb}")

    def consider(sol: Solution | None, name: str) -> None:
        nonlocal best
        best = box[0]
        if sol is None:
            return
        if not is_valid(structural, sol):
            say(f"{name}: invalid result dropped")
            return
        if sol.height < best.height:
            best = box[0] = sol
            say(f"{name}: {sol.height} ({sol.height / max(lb, 1):.5f} x LB)")

    # Compaction never lowered a greedy layout of a big trace and costs a pass or more there.
    if not target_done(best.height) and room() and not big:
        offs = np.array([best.offsets[b.id] for b in problem.buffers], np.int64)
        c = arr.solution(compact(arr, index, offs, deadline=deadline), best.method + "+compact")
        consider(c, "compaction")
        best = box[0]

    if big:
        say(f"skyline: {st_sky.get('tried', 'no compiled kernel')}")
        if sky is not None:
            consider(sky, "skyline")
        if st_win:
            say(f"peak window: {st_win.get('tried')}")
        if win is not None:
            consider(win, "peak window")
        best = box[0]

    if big and not target_done(best.height) and room():
        # Leave time to validate what it returns (a sweep over all buffers).
        st: dict = {}
        found = improve_large(arr, index, lb, deadline - max(pass_s, 0.03 * time_limit), best.height,
                              goal, stats=st)
        say(f"small-long-first: {st.get('passes', 0)} passes")
        if found is not None:
            consider(arr.solution(*found), "small-long-first")
        best = box[0]

    if method in ("auto", "join") and not target_done(best.height) and room(3):
        for pieces in (2, 4, 8):
            if time.perf_counter() > deadline - 0.05 * time_limit or not room(3):
                break
            consider(join_solve(structural, pieces, arr, index, deadline), f"join-{pieces}")
        best = box[0]

    if searchable and not target_done(best.height) and 0 < len(act):
        # On training traces the peak window packs at the bound at once where the whole search
        # takes far longer (gru_tiny2: 0.2 s, against 12 s for the search at the bound): a short
        # first try, when no capacity asks for the search first; a longer one after an unsettled
        # probe at the bound if the first ran out of time.
        retry = [True]
        if problem.capacity is None:
            retry[0] = _window_fill(arr, index, act, box, goal, _share(deadline, WINDOW_FIRST_SHARE), say, consider)
            best = box[0]

        def after_probe(target: int) -> None:
            if retry[0]:
                _window_fill(arr, index, act, box, target, _share(deadline, WINDOW_SHARE), say, consider)
        if not target_done(best.height):
            _search_descent(problem, arr, act, box, goal, deadline, params, say, consider, after_probe)
        best = box[0]

    if method in ("auto", "greedy") and not target_done(best.height) and room():
        _iterated_greedy(arr, index, box, goal, deadline - pass_s, consider)
        best = box[0]

    if method in ("auto", "mip") and not target_done(best.height) and len(act) <= MAX_MIP_BUFFERS:
        left = deadline - time.perf_counter()
        if left > 0.5 or method == "mip":
            from .mip import solve_mip
            consider(solve_mip(structural, max(left, 1.0), best), "mip")
            best = box[0]

    best.stats.update(lower_bound=lb, seconds=time.perf_counter() - t0, log=log)
    if problem.capacity is not None:
        best.stats["fits"] = best.height <= problem.capacity
    return best


def _iterated_greedy(arr, index, box, goal, deadline, consider) -> None:
    """Largest-first best fit with jittered sizes, until the deadline (each pass is checked)."""
    from .heuristics import order_for, place
    rng = np.random.default_rng(0)
    k = 0
    t_start = time.perf_counter()
    while box[0].height > goal and time.perf_counter() < deadline:
        if k and time.perf_counter() + (time.perf_counter() - t_start) / k > deadline:
            break
        offs = place(arr, order_for(arr, "perturbed", rng), "best", index, deadline)
        if offs is None:
            break
        k += 1
        consider(arr.solution(offs, f"greedy-perturbed-{k}"), "iterated greedy")


def _share(deadline: float, part: float) -> float:
    """The perf_counter time at which ``part`` of the time left until ``deadline`` is spent."""
    now = time.perf_counter()
    return now + part * max(deadline - now, 0.0)


def _window_fill(arr, index, act, box, goal, end, say, consider) -> bool:
    """Pack the peak window at ``goal`` with the full search, place the rest around it (until ``end``).

    Returns True if more time could change the answer: a window's search ran out of
    time, or the stage did. Windows holding most of the buffers are skipped (the
    whole search again).
    """
    st: dict = {}
    found = peak_window(arr, index, goal, end, box[0].height, stats=st, settings=("full",),
                        max_buffers=int(WINDOW_MAX_PART * len(act)))
    tried = st.get("tried", [])
    say(f"peak window: {tried}")
    if found is not None:
        consider(arr.solution(*found), "peak window")
    return time.perf_counter() >= end or any(t[-1] == "not packed" for t in tried)


def height_step(size: np.ndarray, align: np.ndarray) -> int:
    """The step every canonical height moves in: the gcd of the sizes and alignments.

    A canonical layout puts each buffer at 0 or at an aligned top of another, so
    every offset and height is a multiple of this step; a capacity between two
    multiples asks the same question as the multiple below it.
    """
    vals = np.concatenate((np.asarray(size, np.int64), np.asarray(align, np.int64)))
    return max(int(np.gcd.reduce(vals[vals > 0])) if (vals > 0).any() else 1, 1)


def _search_descent(problem, arr, act, box, lb, deadline, params, say, consider, after_probe=None) -> None:
    """Ask the branch-and-bound for lower and lower capacities until time runs out.

    Capacities move in steps of :func:`height_step`. The lower bound gets a first
    probe of a third of the time, the bisection between it and the best height
    comes next (each try half of what is left), and what remains goes back to the
    highest capacity left unsettled below the best height: a hard bound does not
    eat the time that the easier capacities above it need. ``after_probe(target)``
    runs once, when the probe at the bound ends unsettled (out of time, not proved
    infeasible), before the bisection.
    """
    lo_a, up_a, sz_a, al_a = arr.lower[act], arr.upper[act], arr.size[act], arr.align[act]
    if too_big(lo_a, up_a, MAX_SEARCH_BUFFERS):
        say("search: skipped (a time-connected group is too large)")
        return
    step = height_step(sz_a, al_a)
    down = lambda c: (c // step) * step  # noqa: E731 - the multiple of step at or below c
    cap = problem.capacity
    infeasible_below = -(-lb // step) * step  # every height below it is infeasible (proved)
    unsettled: set[int] = set()  # capacities the search ran out of time on
    targets_tried = set()
    cache: dict = {}  # search tables, built once for every capacity tried
    first = down(cap) if (cap is not None and box[0].height > cap) else infeasible_below
    target = first
    retried = False
    while box[0].height > infeasible_below and time.perf_counter() < deadline:
        best = box[0]
        lo_try = max([infeasible_below] + [u + step for u in unsettled])
        if target in targets_tried or target >= best.height or target < lo_try:
            target = down((lo_try + best.height - 1) // 2)
            if target in targets_tried or target < lo_try or target >= best.height:
                # bisection done: the rest of the time to the highest (likeliest) unsettled capacity
                left_over = sorted(u for u in unsettled if infeasible_below <= u < best.height)
                if retried or not left_over:
                    break
                retried, target = True, left_over[-1]
                unsettled.discard(target)
                targets_tried.discard(target)
        targets_tried.add(target)
        left = deadline - time.perf_counter()
        if cap is not None and target == first and best.height > cap:
            share = left * 0.9  # fitting the capacity comes first; the rest goes to a fallback descent
        elif retried:
            share = left
        elif target == infeasible_below:
            share = left / 3
        else:
            share = left * 0.5
        st: dict = {}
        offs = search_fit(lo_a, up_a, sz_a, al_a, target, time_limit=share, params=params, stats=st, cache=cache)
        if offs is None:
            if st.get("proved_infeasible"):
                infeasible_below = target + step
                say(f"search: capacity {target} infeasible ({st.get('nodes')} nodes)")
            else:
                unsettled.add(target)
                say(f"search: capacity {target} not settled in {share:.1f}s ({st.get('nodes')} nodes)")
                if after_probe is not None and target == infeasible_below:
                    after_probe(target)
                    after_probe = None
            lo_try = max([infeasible_below] + [u + step for u in unsettled])
            target = down((lo_try + box[0].height - 1) // 2)
            continue
        full = np.zeros(arr.n, np.int64)
        full[act] = offs
        consider(arr.solution(full, f"search@{target}"), "search")
        lo_try = max([infeasible_below] + [u + step for u in unsettled])
        target = (infeasible_below if (infeasible_below not in targets_tried and lo_try <= infeasible_below)
                  else down((lo_try + box[0].height - 1) // 2))
