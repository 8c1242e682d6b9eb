"""Fixed offsets in a layout problem: conflicts found exactly, fixed buffers kept, free ones placed around."""
from __future__ import annotations

import itertools
import random

import pytest

from roam_tvm.layout import Buffer, LayoutError, Problem, layout_main, read_csv, validate
from roam_tvm.layout.fixed import check_fixed, fixed_conflicts, solve_with_fixed


def _brute_conflicts(p: Problem) -> set:
    fx = [b for b in p.buffers if b.offset is not None and b.size > 0 and b.upper > b.lower]
    return {frozenset((a.id, b.id)) for a, b in itertools.combinations(fx, 2)
            if a.lower < b.upper and b.lower < a.upper
            and a.offset < b.offset + b.size and b.offset < a.offset + a.size}


def _random_problem(rng: random.Random, n: int) -> Problem:
    bufs = []
    for i in range(n):
        lo = rng.randint(0, 10)
        bufs.append(Buffer(str(i), lo, lo + rng.randint(1, 6), rng.randint(0, 5),
                           rng.choice([None, rng.randint(0, 12)])))
    return Problem(bufs)


def test_conflicts_match_brute_force():
    rng = random.Random(0)
    for _ in range(1500):
        p = _random_problem(rng, rng.randint(1, 8))
        got, want = fixed_conflicts(p, limit=100), _brute_conflicts(p)
        assert bool(got) == bool(want) and all(frozenset(g) in want for g in got), (p.buffers, got, want)


def test_fixed_offsets_kept_and_layout_valid():
    rng = random.Random(1)
    solved = 0
    for _ in range(300):
        p = _random_problem(rng, rng.randint(1, 10))
        if _brute_conflicts(p):
            with pytest.raises(LayoutError, match="overlap in time and address"):
                check_fixed(p)
            continue
        sol = solve_with_fixed(p, time_limit=1)
        assert validate(p, sol) == []
        assert all(sol.offsets[b.id] == b.offset for b in p.buffers if b.offset is not None)
        solved += 1
    assert solved > 100


def test_misaligned_fixed_offset_names_the_line():
    p = Problem([Buffer("a", 0, 4, 8, 3)], alignment=4)
    with pytest.raises(LayoutError, match=r"'a' \(line 7\).*alignment 4"):
        check_fixed(p, {"a": 7})


def test_ignore_offsets_resolves(tmp_path, capsys):
    f = tmp_path / "in.csv"
    f.write_text("id,lower,upper,size,offset\na,0,10,50,0\nb,5,15,50,40\n")  # conflicting: refused as is
    assert layout_main([str(f)]) == 2
    out = tmp_path / "out.csv"
    assert layout_main([str(f), "--ignore-offsets", "--time-limit", "1", "--output", str(out)]) == 0
    assert {b.id: b.offset for b in read_csv(str(out)).buffers} in ({"a": 0, "b": 50}, {"a": 50, "b": 0})
    capsys.readouterr()
