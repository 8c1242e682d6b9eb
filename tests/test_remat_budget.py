"""``--budget`` parsing (roam_tvm.remat.budget)."""
from __future__ import annotations

import pytest

from roam_tvm.remat import parse_budget, resolve_budget


@pytest.mark.parametrize("text, nbytes", [
    ("123456", 123456),
    ("2", 2),
    ("8GiB", 8 << 30),
    ("8 GiB", 8 << 30),
    ("512MiB", 512 << 20),
    ("64KiB", 64 << 10),
    ("1.5MiB", 3 << 19),
    ("0.5KiB", 512),
    ("100B", 100),
    ("8gib", 8 << 30),
    ("1.0000000001GiB", 1 << 30),  # rounded down: never looser than asked
])
def test_bytes(text, nbytes):
    b = parse_budget(text)
    assert b.bytes == nbytes and b.fraction is None
    assert resolve_budget(b, 10**12) == nbytes


@pytest.mark.parametrize("text, frac", [("0.6", 0.6), ("1", 1.0), ("1.0", 1.0), (".25", 0.25)])
def test_fractions(text, frac):
    b = parse_budget(text)
    assert b.fraction == frac and b.bytes is None
    assert resolve_budget(text, 1000) == int(frac * 1000)


def test_fraction_rounds_down_and_one_is_the_peak():
    assert resolve_budget("1", 987654321) == 987654321
    assert resolve_budget("0.3", 10) == 3
    assert resolve_budget("0.33", 10) == 3


@pytest.mark.parametrize("text, hint", [
    ("8GB", "binary suffixes"),
    ("8 TiB", "binary suffixes"),
    ("0", "positive"),
    ("0GiB", "positive"),
    ("-1", "cannot read"),
    ("1.5", "neither a whole number"),
    ("abc", "cannot read"),
    ("", "cannot read"),
    ("nan", "cannot read"),
    ("0.1B", "less than one byte"),
])
def test_errors_say_what_is_accepted(text, hint):
    with pytest.raises(ValueError, match=hint) as e:
        parse_budget(text)
    assert "KiB" in str(e.value) or "fraction" in str(e.value)


def test_resolve_rejects_bad_values():
    with pytest.raises(ValueError):
        resolve_budget(0, 100)
    with pytest.raises(ValueError):
        resolve_budget(True, 100)
    with pytest.raises(ValueError):
        resolve_budget("0.5", 0)


def test_cli_rejects_a_bad_budget_before_any_work():
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys, time; t = time.perf_counter(); from roam_tvm.cli import main; rc = main(sys.argv[1:]); "
            "print(rc, round(time.perf_counter() - t, 3), *(m in sys.modules for m in ('torch', 'tvm', 'scipy')))")
    p = subprocess.run([sys.executable, "-c", code, "compare", "--model", "mlp", "--budget", "8GB"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=root), cwd=root)
    rc, seconds, *loaded = p.stdout.split()
    assert rc == "2" and loaded == ["False"] * 3, p.stdout + p.stderr
    assert float(seconds) < 1.0
    last = p.stderr.strip().splitlines()[-1]
    assert "--budget" in last and "binary suffixes" in last and "Traceback" not in p.stderr
