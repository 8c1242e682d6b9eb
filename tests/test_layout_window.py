"""The peak-window stage (roam_tvm.layout.window) and its hook in solve()."""
import time

import numpy as np
import pytest

from roam_tvm.layout.heuristics import Arrays, OverlapIndex, best_heuristic, order_for, place
from roam_tvm.layout.problem import Buffer, Problem
from roam_tvm.layout.solver import solve
from roam_tvm.layout.validate import is_valid, validate
from roam_tvm.layout.window import hot_window, live_profile, peak_window, window_lifespans


def peaked(seed: int, steps: int = 600, base: int = 8, extra: int = 6, peak: tuple[int, int] = (280, 330),
           long_lived: int = 10) -> Problem:
    """A planted perfect packing whose bound is set by a short window.

    ``base`` bands of back-to-back buffers run the whole trace, ``extra`` more only
    inside ``peak``, and ``long_lived`` buffers cross the window's edges. Every band
    holds one buffer at a time, so stacking the bands meets the lower bound.
    """
    rng = np.random.default_rng(seed)
    bufs = []

    def band(t0: int, t1: int, size: int, lo: int = 3, hi: int = 40) -> None:
        t = t0
        while t < t1:
            n = int(rng.integers(lo, hi))
            bufs.append(Buffer(f"b{len(bufs)}", t, min(t1, t + n), size))
            t += n
    for _ in range(base):
        band(0, steps, int(rng.integers(4, 40)))
    for _ in range(extra):
        band(*peak, int(rng.integers(4, 40)), 2, 12)
    for _ in range(long_lived):  # one band each: a long buffer across the window, short ones around it
        a, b = int(rng.integers(20, peak[0])), int(rng.integers(peak[1] + 1, steps - 20))
        size = int(rng.integers(1, 6))
        band(0, a, size)
        bufs.append(Buffer(f"b{len(bufs)}", a, b, size))
        band(b, steps, size)
    rng.shuffle(bufs)
    return Problem(bufs)


@pytest.mark.parametrize("mode", ["clip", "compress"])
def test_window_lifespans_keep_the_overlaps(mode):
    p = peaked(0)
    arr = Arrays(p)
    times, live = live_profile(arr)
    t0, t1 = hot_window(times, live, 0.95)
    w, lo, up = window_lifespans(arr, t0, t1, mode)
    assert set(w.tolist()) == set(np.flatnonzero((arr.lower < t1) & (arr.upper > t0)).tolist())
    inside = (lo >= arr.lower[w]) if mode == "clip" else np.ones(len(w), bool)
    assert inside.all() and (lo < up).all()
    before = (arr.lower[w][:, None] < arr.upper[w][None, :]) & (arr.lower[w][None, :] < arr.upper[w][:, None])
    after = (lo[:, None] < up[None, :]) & (lo[None, :] < up[:, None])
    assert (before == after).all()  # the window's search sees exactly the true conflicts


def test_compressed_lifespans_keep_the_order_of_the_crossing_ends():
    p = peaked(1)
    arr = Arrays(p)
    times, live = live_profile(arr)
    t0, t1 = hot_window(times, live, 0.95)
    w, lo, up = window_lifespans(arr, t0, t1, "compress")
    left = arr.lower[w] < t0
    assert left.any()
    # the same order of starts as the real ones, packed just below t0
    assert (np.sign(np.subtract.outer(arr.lower[w][left], arr.lower[w][left]))
            == np.sign(np.subtract.outer(lo[left], lo[left]))).all()
    assert lo[left].max() < t0 and lo[left].min() >= t0 - left.sum()


def test_hot_window_covers_the_peak():
    p = peaked(2)
    times, live = live_profile(Arrays(p))
    assert int(live.max()) == p.lower_bound()
    t0, t1 = hot_window(times, live, 0.99)
    peak_t = int(times[int(np.argmax(live))])
    assert t0 <= peak_t < t1
    wide = hot_window(times, live, 0.5)
    assert wide[0] <= t0 and wide[1] >= t1


def test_place_keeps_the_fixed_buffers():
    p = peaked(3)
    arr = Arrays(p)
    index = OverlapIndex(arr)
    ref = place(arr, order_for(arr, "size"), "first", index)
    fixed = np.zeros(arr.n, bool)
    fixed[::3] = True
    offs = place(arr, order_for(arr, "area"), "best", index, fixed=(ref, fixed))
    assert (offs[fixed] == ref[fixed]).all()
    assert is_valid(p, arr.solution(offs, "t"))


@pytest.mark.parametrize("seed", range(4))
def test_peak_window_reaches_the_planted_bound(seed):
    p = peaked(seed)
    arr = Arrays(p)
    lb = p.lower_bound()
    st: dict = {}
    found = peak_window(arr, OverlapIndex(arr), lb, time.perf_counter() + 20.0, stats=st)
    assert found is not None and st["tried"]
    sol = arr.solution(*found)
    assert validate(p, sol) == []
    assert sol.height == lb, st["tried"]


def test_peak_window_beats_the_greedy_orders():
    p = peaked(0, base=16, extra=12, long_lived=20)
    lb = p.lower_bound()
    assert best_heuristic(p).height > lb  # every greedy order leaves a hole somewhere
    arr = Arrays(p)
    found = peak_window(arr, OverlapIndex(arr), lb, time.perf_counter() + 20.0)
    assert found is not None
    sol = arr.solution(*found)
    assert validate(p, sol) == [] and sol.height == lb


def test_peak_window_returns_nothing_that_does_not_beat_the_caller():
    p = peaked(0)
    arr = Arrays(p)
    assert peak_window(arr, OverlapIndex(arr), p.lower_bound(), time.perf_counter() + 10.0,
                       height=p.lower_bound()) is None


def test_peak_window_honours_the_deadline():
    p = peaked(0)
    arr = Arrays(p)
    t = time.perf_counter()
    assert peak_window(arr, OverlapIndex(arr), p.lower_bound(), t - 1.0) is None
    assert time.perf_counter() - t < 1.0


def test_window_mode_is_checked():
    arr = Arrays(peaked(0))
    with pytest.raises(ValueError, match="clip"):
        window_lifespans(arr, 0, 10, "stretch")


def test_solve_uses_the_window_on_big_problems(monkeypatch):
    import roam_tvm.layout.solver as solver
    monkeypatch.setattr(solver, "MAX_SEARCH_BUFFERS", 10)
    monkeypatch.setattr(solver, "LARGE_MIN_BUFFERS", 10)
    monkeypatch.setattr(solver, "skyline_passes", lambda *a, **k: None)  # leave the bound to the window
    p = peaked(0, base=16, extra=12, long_lived=20)
    sol = solve(p, time_limit=20.0)
    assert is_valid(p, sol)
    assert sol.height == p.lower_bound()
    assert any("peak window" in line for line in sol.stats["log"])
