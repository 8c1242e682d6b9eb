"""``roam-tvm layout FILE.csv``: solve a minimalloc-style CSV and report."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
import time

from .csv_io import read_csv, write_csv
from .fixed import check_fixed, solve_with_fixed
from .problem import LayoutError, Problem
from .solver import METHODS
from .validate import validate


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="roam-tvm layout",
                                description="Place buffers (CSV id,lower,upper,size[,offset]) in a minimal arena. "
                                            "A filled offset cell fixes that buffer's offset: it is kept, and "
                                            "fixed offsets that overlap in time and address are refused.")
    p.add_argument("file", help="input CSV with header id,lower,upper,size")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--alignment", type=int, default=1, help="offset alignment in bytes (default 1)")
    p.add_argument("--capacity", type=int, default=None, help="arena capacity to fit (optional)")
    p.add_argument("--method", choices=METHODS, default="auto")
    p.add_argument("--output", "-o", default=None, help="write the CSV with an offset column here")
    p.add_argument("--progress", action="store_true", help="print progress of the stages")
    p.add_argument("--ignore-offsets", action="store_true",
                   help="solve afresh, ignoring the file's offset column (e.g. to re-solve a solved CSV)")
    return p


def layout_main(argv: list[str] | None = None) -> int:
    p = _parser()
    try:
        args = p.parse_args(argv)
    except SystemExit as e:  # argparse already printed the message
        return 0 if e.code == 0 else 2
    if args.time_limit is not None and args.time_limit < 0:
        print("error: --time-limit must be >= 0", file=sys.stderr)
        return 2
    if args.alignment < 1:
        print("error: --alignment must be >= 1", file=sys.stderr)
        return 2
    if args.capacity is not None and args.capacity < 0:
        print("error: --capacity must be >= 0", file=sys.stderr)
        return 2
    lines: dict[str, int] = {}
    try:
        prob = read_csv(args.file, capacity=args.capacity, alignment=args.alignment, lines=lines)
        if args.ignore_offsets:
            prob = Problem([replace(b, offset=None) for b in prob.buffers], prob.capacity, prob.alignment)
        check_fixed(prob, lines, args.file)
    except LayoutError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n_fixed = sum(b.offset is not None for b in prob.buffers)
    t0 = time.perf_counter()
    sol = solve_with_fixed(prob, time_limit=args.time_limit, method=args.method, progress=args.progress,
                           target=args.capacity)
    dt = time.perf_counter() - t0
    lb = prob.lower_bound()
    problems = validate(prob.with_capacity(None), sol)
    print(f"buffers:     {len(prob)}")
    print(f"arena:       {sol.height}")
    print(f"lower bound: {lb}")
    print(f"ratio:       {sol.height / lb if lb else 1.0:.6f}")
    if args.capacity is not None:
        print(f"capacity:    {args.capacity} ({'fits' if sol.height <= args.capacity else 'does NOT fit'})")
    print(f"method:      {sol.method}")
    if n_fixed:
        kept = all(sol.offsets[b.id] == b.offset for b in prob.buffers if b.offset is not None)
        print(f"fixed:       {n_fixed} offsets {'kept' if kept else 'NOT kept'}")
    print(f"time:        {dt:.2f} s")
    print(f"valid:       {'yes' if not problems else 'NO'}")
    for v in problems[:10]:
        print(f"  {v}")
    if args.output:
        try:
            write_csv(args.output, prob, sol)
        except OSError as e:
            print(f"error: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"wrote:       {args.output}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(layout_main())
