"""Tests of the layout core (roam_tvm.layout): fast, no TVM."""
from __future__ import annotations

import io
import itertools
import os

import numpy as np
import pytest

from roam_tvm.layout import (Buffer, LayoutError, Problem, Solution, best_heuristic, greedy, is_valid,
                             layout_main, read_csv, read_csv_string, solve, solve_mip, validate, write_csv)
from roam_tvm.layout.heuristics import ORDERS, Arrays, OverlapIndex
from roam_tvm.layout.join import join_solve
from roam_tvm.layout import native
from roam_tvm.layout.search import search_fit

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "benchmarks", "dsa")
needs_data = pytest.mark.skipif(not os.path.isdir(DATA), reason="shared DSA data not present")


def random_problem(rng, n=30, t=40, max_size=50, alignment=1):
    bufs = []
    for i in range(n):
        lo = int(rng.integers(0, t))
        up = lo + int(rng.integers(1, t // 3 + 2))
        bufs.append(Buffer(f"b{i}", lo, up, int(rng.integers(1, max_size))))
    return Problem(bufs, None, alignment)


def brute_force_height(p: Problem) -> int:
    """Optimal height by trying every order with lowest-fit placement (exact for canonical layouts)."""
    best = None
    arr = Arrays(p)
    idx = OverlapIndex(arr)
    from roam_tvm.layout.heuristics import place
    for perm in itertools.permutations(range(len(p.buffers))):
        offs = place(arr, np.array(perm), "first", idx)
        h = int((offs + arr.size).max())
        best = h if best is None else min(best, h)
    return best


# ---------------------------------------------------------------- CSV
def test_csv_round_trip(tmp_path):
    p = read_csv_string("id , lower,upper, size\n a, 0, 3, 4\nb,3,9,4\n\nc,0,9,8\n")
    assert [b.id for b in p.buffers] == ["a", "b", "c"] and p.buffers[2].size == 8
    sol = Solution({"a": 8, "b": 8, "c": 0}, 12)
    out = tmp_path / "o.csv"
    write_csv(out, p, sol)
    q = read_csv(out)
    assert [(b.id, b.lower, b.upper, b.size, b.offset) for b in q.buffers] == [
        ("a", 0, 3, 4, 8), ("b", 3, 9, 4, 8), ("c", 0, 9, 8, 0)]
    buf = io.StringIO()
    write_csv(buf, p)
    assert buf.getvalue().splitlines()[0] == "id,lower,upper,size"


@pytest.mark.parametrize("text, where", [
    ("id,lower,upper\na,0,1\n", ":1"),
    ("id,lower,upper,size\na,0,1\n", ":2"),
    ("id,lower,upper,size\na,0,x,1\n", ":2"),
    ("id,lower,upper,size\na,0,1,2\nb,5,1,2\n", ":3"),
    ("id,lower,upper,size\na,0,1,2\na,0,1,2\n", "duplicate"),
    ("", "empty"),
])
def test_csv_bad_input(text, where):
    with pytest.raises(LayoutError, match=where):
        read_csv_string(text)


# ---------------------------------------------------------------- validator
def test_validator_catches_overlap_misalignment_capacity():
    p = Problem([Buffer("a", 0, 10, 8), Buffer("b", 5, 15, 8), Buffer("c", 10, 20, 8)], capacity=16, alignment=4)
    assert validate(p, {"a": 0, "b": 8, "c": 0}) == []
    v = validate(p, {"a": 0, "b": 4, "c": 0})
    assert any("'a'" in m and "'b'" in m for m in v)
    assert any("'b'" in m and "'c'" in m for m in v)
    assert any("alignment" in m for m in validate(p, {"a": 0, "b": 10, "c": 0}))
    assert any("capacity" in m for m in validate(p, {"a": 0, "b": 12, "c": 0}))
    assert any("not placed" in m for m in validate(p, {"a": 0, "b": 8}))
    # touching lifespans [0,10) and [10,20) do not overlap
    assert is_valid(p, {"a": 0, "b": 8, "c": 0})


def test_validator_agrees_with_pairwise_check():
    rng = np.random.default_rng(1)
    for _ in range(200):
        p = random_problem(rng, n=8, t=12, max_size=6)
        offs = {b.id: int(rng.integers(0, 12)) for b in p.buffers}
        pair_ok = all(not (a.overlaps_in_time(b) and offs[a.id] < offs[b.id] + b.size
                           and offs[b.id] < offs[a.id] + a.size)
                      for a, b in itertools.combinations(p.buffers, 2))
        assert is_valid(p, offs) == pair_ok


def test_validator_large_is_fast():
    rng = np.random.default_rng(2)
    p = random_problem(rng, n=10000, t=5000, max_size=1000)
    sol = greedy(p, "size")
    assert validate(p, sol) == []


# ---------------------------------------------------------------- heuristics
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("fit", ["first", "best"])
def test_heuristics_valid_on_random(order, fit):
    rng = np.random.default_rng(3)
    for _ in range(5):
        p = random_problem(rng, n=60, alignment=int(rng.choice([1, 4, 16])))
        sol = greedy(p, order, fit)
        assert validate(p, sol) == []
        assert sol.height >= p.lower_bound()


def test_best_heuristic_and_lower_bound():
    p = read_csv_string("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n")
    assert p.lower_bound() == 12
    assert best_heuristic(p).height == 12


def test_zero_size_and_empty_lifespans():
    p = Problem([Buffer("z", 0, 5, 0), Buffer("e", 3, 3, 10), Buffer("a", 0, 5, 7)])
    s = solve(p, time_limit=2)
    assert validate(p, s) == [] and s.height == 7


# ---------------------------------------------------------------- exact methods
def test_mip_optimal_on_tiny():
    rng = np.random.default_rng(4)
    for _ in range(4):
        p = random_problem(rng, n=6, t=10, max_size=9)
        opt = brute_force_height(p)
        sol = solve_mip(p, time_limit=10)
        assert validate(p, sol) == []
        assert sol.height == opt


def test_search_matches_brute_force():
    rng = np.random.default_rng(5)
    for _ in range(6):
        p = random_problem(rng, n=6, t=10, max_size=9)
        opt = brute_force_height(p)
        arr = Arrays(p)
        a = arr.active
        assert search_fit(arr.lower[a], arr.upper[a], arr.size[a], arr.align[a], opt - 1, 5) is None
        offs = search_fit(arr.lower[a], arr.upper[a], arr.size[a], arr.align[a], opt, 5)
        full = np.zeros(arr.n, np.int64)
        full[a] = offs
        assert validate(p.with_capacity(opt), arr.solution(full, "s")) == []


def test_solve_random_valid_and_not_worse_than_greedy():
    rng = np.random.default_rng(6)
    for _ in range(3):
        p = random_problem(rng, n=40, alignment=8)
        s = solve(p, time_limit=3)
        assert validate(p, s) == []
        assert p.lower_bound() <= s.height <= greedy(p, "size").height


def test_join_valid():
    rng = np.random.default_rng(7)
    p = random_problem(rng, n=200, t=100)
    for k in (2, 4):
        s = join_solve(p, k)
        assert s is not None and validate(p, s) == []


# ---------------------------------------------------------------- data sets
@needs_data
def test_solve_input12():
    p = read_csv(os.path.join(DATA, "minimalloc", "input.12.csv"), capacity=12)
    s = solve(p, time_limit=5)
    assert s.height == 12 and validate(p, s) == []


@needs_data
def test_solve_small_real_trace():
    p = read_csv(os.path.join(DATA, "idealloc", "G_1.csv"))
    s = solve(p, time_limit=10)
    assert validate(p, s) == []
    assert s.height <= 1.002 * p.lower_bound()


@needs_data
def test_minimalloc_instance_fits():
    p = read_csv(os.path.join(DATA, "minimalloc", "H.1048576.csv"), capacity=1048576)
    s = solve(p, time_limit=20, target=1048576)
    assert s.height <= 1048576 and validate(p, s) == []


# ---------------------------------------------------------------- graph + CLI
def test_problem_from_graph_and_plan():
    from roam_tvm.graph.model import GraphBuilder
    from roam_tvm.layout import plan_layout, problem_from_graph
    gb = GraphBuilder()
    x = gb.tensor(1000, kind="input")
    (a,) = gb.op([x], [300])
    (b,) = gb.op([a], [500])
    (c,) = gb.op([a, b], [700])
    gb.op([c], [10])
    g = gb.build()
    p = problem_from_graph(g, alignment=256)
    assert all(b.size % 256 == 0 for b in p.buffers)
    assert {b.id for b in p.buffers} == {str(t) for t in g.allocated if t in g.lifetimes()}
    plan = plan_layout(g, alignment=256, time_limit=2)
    assert plan.valid and plan.arena_bytes >= plan.lower_bound_bytes
    assert set(plan.offsets) == {int(b.id) for b in p.buffers}


def test_cli(tmp_path, capsys):
    f = tmp_path / "in.csv"
    f.write_text("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n")
    out = tmp_path / "out.csv"
    assert layout_main([str(f), "--time-limit", "2", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "arena:       12" in text and "valid:       yes" in text
    q = read_csv(out)
    assert all(b.offset is not None for b in q.buffers)
    bad = tmp_path / "bad.csv"
    bad.write_text("id,lower,upper,size\nb1,0,zz,4\n")
    assert layout_main([str(bad)]) == 2
    assert "bad.csv:2" in capsys.readouterr().err
    assert layout_main([str(tmp_path / "missing.csv")]) == 2
    assert layout_main(["--bogus"]) == 2


# ---------------------------------------------------------------- search internals
@pytest.mark.parametrize("flags", [
    {},
    {"memo": False},
    {"suffix_check": False, "hatless": False},
    {"check_dominance": False, "decompose": False},
])
def test_search_pruning_is_exact_with_twins(flags):
    """Every pruning rule keeps the search exact (duplicated buffers exercise the twin rule)."""
    from roam_tvm.layout.search import SearchParams
    rng = np.random.default_rng(11)
    for _ in range(3):
        p = random_problem(rng, n=4, t=8, max_size=7)
        p = Problem(p.buffers + [Buffer(b.id + "'", b.lower, b.upper, b.size) for b in p.buffers[:2]])
        opt = brute_force_height(p)
        arr = Arrays(p)
        a = arr.active
        params = SearchParams(**flags)
        args = (arr.lower[a], arr.upper[a], arr.size[a], arr.align[a])
        assert search_fit(*args, opt - 1, 5, params=params) is None
        offs = search_fit(*args, opt, 5, params=params)
        assert offs is not None
        full = np.zeros(arr.n, np.int64)
        full[a] = offs
        assert validate(p.with_capacity(opt), arr.solution(full, "s")) == []


def test_solve_respects_time_limit_on_large_trace():
    rng = np.random.default_rng(12)
    p = random_problem(rng, n=3000, t=3000, max_size=1000)
    import time as _t
    t0 = _t.perf_counter()
    s = solve(p, time_limit=3)
    assert validate(p, s) == []
    assert _t.perf_counter() - t0 < 3 + 2.0


@needs_data
@pytest.mark.parametrize("name", ["G", "I", "K"])
def test_minimalloc_hardest_fit_quickly(name):
    """The three instances the search missed before it re-ranked decomposed subproblems."""
    p = read_csv(os.path.join(DATA, "minimalloc", f"{name}.1048576.csv"), capacity=1048576)
    s = solve(p, time_limit=30, target=1048576)
    assert s.height <= 1048576 and validate(p, s) == []


@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("name", list("ABCDEFGHIJK"))
def test_minimalloc_challenging_fits(name):
    p = read_csv(os.path.join(DATA, "minimalloc", f"{name}.1048576.csv"), capacity=1048576)
    s = solve(p, time_limit=60, target=1048576)
    assert s.height <= 1048576 and validate(p, s) == []


# ---------------------------------------------------------------- native kernel
needs_native = pytest.mark.skipif(not native.available(), reason=f"no C compiler: {native.unavailable_reason()}")


@needs_native
@pytest.mark.parametrize("seed", range(6))
def test_native_search_matches_python(seed):
    """The compiled kernel runs the very same search: same answer, same node count."""
    from roam_tvm.layout.search import SearchParams
    rng = np.random.default_rng(100 + seed)
    p = random_problem(rng, n=16, t=24, max_size=40, alignment=1 + seed % 2 * 3)
    arr = Arrays(p)
    a = arr.active
    args = (arr.lower[a], arr.upper[a], arr.size[a], arr.align[a])
    lb = p.lower_bound()
    for cap in (lb, lb + lb // 20, lb + lb // 8):
        runs = []
        for use_native in (False, True):
            st: dict = {}
            params = SearchParams(native=use_native, preorders=("TLA",))
            offs = search_fit(*args, cap, 10, params=params, stats=st)
            runs.append((offs, st["nodes"], offs is not None or st.get("proved_infeasible", False)))
        (po, pn, pdone), (no, nn, ndone) = runs
        assert pdone, "the Python search should settle these small instances"
        assert ndone and (po is None) == (no is None) and pn == nn
        if no is not None:
            assert np.array_equal(po, no)
            full = np.zeros(arr.n, np.int64)
            full[a] = no
            assert validate(p.with_capacity(cap), arr.solution(full, "native")) == []


@needs_native
@pytest.mark.parametrize("light", [False, True], ids=["all-tests", "light"])
def test_native_search_is_exact_on_tiny_problems(light):
    """Exact with every pruning test, and without the two costly ones (the peak window's light setting)."""
    from roam_tvm.layout.search import SearchParams
    rng = np.random.default_rng(7)
    for _ in range(6):
        p = random_problem(rng, n=5, t=8, max_size=7)
        opt = brute_force_height(p)
        arr = Arrays(p)
        a = arr.active
        args = (arr.lower[a], arr.upper[a], arr.size[a], arr.align[a])
        for use_native in (True, False):
            params = SearchParams(native=use_native, suffix_check=not light, unallocated_floor=not light)
            assert search_fit(*args, opt - 1, 5, params=params) is None
            offs = search_fit(*args, opt, 5, params=params)
            assert offs is not None
            full = np.zeros(arr.n, np.int64)
            full[a] = offs
            assert validate(p.with_capacity(opt), arr.solution(full, "search")) == []


def test_native_build_failure_falls_back(monkeypatch, tmp_path):
    """No working compiler: the kernel reports why, and the search stays in Python."""
    from roam_tvm.layout import search as search_mod
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_why", "")
    monkeypatch.setenv("ROAM_TVM_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert not native.available()
    assert "no-such-compiler" in native.unavailable_reason()
    p = random_problem(np.random.default_rng(3), n=12, t=16, max_size=9)
    arr = Arrays(p)
    a = arr.active
    offs = search_mod.search_fit(arr.lower[a], arr.upper[a], arr.size[a], arr.align[a], 10 ** 9, 5)
    assert offs is not None
