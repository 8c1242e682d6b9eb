"""The big-instance improvement stage (roam_tvm.layout.large) and its hook in solve()."""
import time

import numpy as np

from roam_tvm.layout.heuristics import Arrays, OverlapIndex, order_for, place
from roam_tvm.layout.large import SEEDS, Setting, improve, small_long_first
from roam_tvm.layout.problem import Buffer, Problem
from roam_tvm.layout.solver import solve
from roam_tvm.layout.validate import is_valid


def planted(seed: int, bands: int = 12, steps: int = 400, tiny: int = 6, alignment: int = 1) -> Problem:
    """A perfect packing: each band is a chain of back-to-back buffers of one size, plus tiny long-lived ones.

    Every time step has exactly one live buffer per band, so the lower bound is met by the planted layout.
    """
    rng = np.random.default_rng(seed)
    bufs = []
    for k in range(bands + tiny):
        size = int(rng.integers(1, 40)) * alignment * (1 if k < bands else 0) or alignment
        t = 0
        while t < steps:
            n = steps if k >= bands else int(rng.integers(3, 60))  # the tiny ones live throughout
            bufs.append(Buffer(f"b{len(bufs)}", t, min(steps, t + n), size))
            t += n
    rng.shuffle(bufs)
    return Problem(bufs, alignment=alignment)


def greedy_height(p: Problem) -> int:
    arr = Arrays(p)
    return int((place(arr, order_for(arr, "size"), "first") + arr.size)[arr.active].max())


def test_small_long_first_puts_them_first():
    p = planted(0)
    arr = Arrays(p)
    order = small_long_first(arr, Setting("size", 0.5, 0.01), p.lower_bound())
    assert sorted(order.tolist()) == np.nonzero(arr.active)[0].tolist()
    k = int((arr.size[order] <= 0.01 * p.lower_bound()).sum())
    head = order[:k]
    assert (arr.length[head] >= 0.5 * 400).all()


def test_improve_matches_or_beats_greedy_and_is_valid():
    for seed in range(4):
        p = planted(seed)
        arr, lb = Arrays(p), p.lower_bound()
        g = greedy_height(p)
        st: dict = {}
        found = improve(arr, OverlapIndex(arr), lb, time.perf_counter() + 2.0, stats=st)
        assert found is not None and st["passes"] >= 1
        sol = arr.solution(*found)
        assert is_valid(p, sol)
        assert lb <= sol.height <= g


def test_improve_returns_none_when_nothing_beats_the_caller():
    p = planted(1)
    arr, lb = Arrays(p), p.lower_bound()
    assert improve(arr, OverlapIndex(arr), lb, time.perf_counter() + 1.0, height=lb - 1) is None


def test_improve_respects_alignment():
    p = planted(2, alignment=8)
    arr = Arrays(p)
    found = improve(arr, OverlapIndex(arr), p.lower_bound(), time.perf_counter() + 1.0)
    sol = arr.solution(*found)
    assert is_valid(p, sol)
    assert all(o % 8 == 0 for o in sol.offsets.values())


def test_improve_honours_the_deadline():
    p = planted(3, bands=40, steps=2000)
    arr = Arrays(p)
    idx = OverlapIndex(arr)
    t0 = time.perf_counter()
    improve(arr, idx, p.lower_bound(), t0 + 0.3, goal=0)
    assert time.perf_counter() - t0 < 1.5
    # An expired deadline: nothing is placed at all.
    assert improve(arr, idx, p.lower_bound(), time.perf_counter() - 1) is None


def test_seed_settings_are_distinct():
    assert len(set(SEEDS)) == len(SEEDS)


def test_solve_uses_the_stage_on_big_problems(monkeypatch):
    import roam_tvm.layout.solver as solver
    monkeypatch.setattr(solver, "MAX_SEARCH_BUFFERS", 10)
    monkeypatch.setattr(solver, "LARGE_MIN_BUFFERS", 10)
    p = planted(4, bands=20, steps=600)
    t0 = time.perf_counter()
    sol = solve(p, time_limit=3.0)
    assert time.perf_counter() - t0 < 6.0
    assert is_valid(p, sol)
    assert sol.height <= greedy_height(p)


# ---------------------------------------------------------------- skyline passes (compiled kernel)
import pytest  # noqa: E402

from roam_tvm.layout import native  # noqa: E402
from roam_tvm.layout.large import skyline_passes  # noqa: E402

needs_native = pytest.mark.skipif(not native.available(), reason=f"no C compiler: {native.unavailable_reason()}")


def _skyline_reference(lo, up, sz, al, rank):
    """Plain-Python skyline: the lowest-resting buffer next, ties by rank."""
    pts = np.unique(np.concatenate((lo, up)))
    sl, su = np.searchsorted(pts, lo), np.searchsorted(pts, up)
    sky = np.zeros(len(pts), np.int64)
    off = np.full(len(sz), -1, np.int64)
    for _ in range(len(sz)):
        rest = np.flatnonzero(off < 0)
        mo = np.array([-(-int(sky[sl[i]:su[i]].max()) // int(al[i])) * int(al[i]) for i in rest])
        i = rest[np.lexsort((rank[rest], mo))[0]]
        off[i] = mo[np.flatnonzero(rest == i)[0]]
        sky[sl[i]:su[i]] = off[i] + sz[i]
    return off


@needs_native
@pytest.mark.parametrize("alignment", [1, 8])
def test_native_skyline_matches_reference(alignment):
    rng = np.random.default_rng(alignment)
    n = 60
    lo = rng.integers(0, 50, n)
    up = lo + rng.integers(1, 20, n)
    sz = rng.integers(1, 30, n) * alignment
    al = np.full(n, alignment)
    rank = rng.permutation(n)
    got = native.skyline(lo, up, sz, al, rank, 10)
    assert np.array_equal(got, _skyline_reference(lo, up, sz, al, rank))


@needs_native
def test_skyline_passes_valid_and_reported():
    p = planted(5, alignment=8)
    arr = Arrays(p)
    st: dict = {}
    found = skyline_passes(arr, time.perf_counter() + 10, None, 0, stats=st)
    assert found is not None and [k for k, _ in st["tried"]] == ["skyline-SL", "skyline-A"]
    offs, name = found
    sol = arr.solution(offs, name)
    assert is_valid(p, sol) and all(o % 8 == 0 for o in sol.offsets.values())
    assert sol.height == min(h for _, h in st["tried"])
