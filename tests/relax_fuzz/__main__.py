"""``python -m tests.relax_fuzz --count N --seed S``: fuzz the memory planners, print a summary.

Case ``i`` uses seed ``S + i``. Every case that fails is printed with its
seed and the command that reproduces it (``--count 1 --seed X --show`` also
prints the Relax script).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .generator import Features
from .harness import ALL_PLANNERS, RAW_PLANNER
from .report import by_symptom, describe, summary
from .runner import run_many


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.relax_fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=50, help="number of functions (default 50)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first function (default 0)")
    ap.add_argument("--only", default=None, help=f"features to keep, comma-separated: {','.join(Features.names())}")
    ap.add_argument("--disable", default=None, help="features to turn off, comma-separated")
    ap.add_argument("--time-limit", type=float, default=1.0, help="solver seconds for RoamOrder/RoamLayout")
    ap.add_argument("--raw", action="store_true",
                    help="also judge RoamLayout(never_worse=False): roam's own plan even where TVM's is kept")
    ap.add_argument("--no-checker", action="store_true", help="skip roam_tvm.verify.check_plan")
    ap.add_argument("--no-isolate", action="store_true", help="run in this process (a crash ends the run)")
    ap.add_argument("--show", action="store_true", help="print the Relax script of failing cases")
    ap.add_argument("--quiet", action="store_true", help="print failures and the summary only")
    ap.add_argument("--json", default=None, help="also write every result (seed, status, problems) to this file")
    args = ap.parse_args(argv)
    if args.count < 1:
        ap.error(f"--count must be at least 1, got {args.count}")
    try:
        features = Features.parse(args.only, args.disable)
    except ValueError as err:
        ap.error(str(err))

    def show(res):
        if res.status != "ok":
            print(describe(res, features, script=args.show or args.count == 1), flush=True)
        elif not args.quiet:
            print(f"seed {res.seed}: ok ({res.seconds:.1f} s)", flush=True)

    start = time.perf_counter()
    seeds = range(args.seed, args.seed + args.count)
    planners = ALL_PLANNERS + ((RAW_PLANNER,) if args.raw else ())
    results = run_many(seeds, features, args.time_limit, not args.no_checker, not args.no_isolate, show, planners)
    print(summary(results, time.perf_counter() - start))
    if args.json:
        from collections import Counter

        from roam_tvm.report.compare import machine, versions

        record = {"command": "python -m tests.relax_fuzz " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "versions": versions(), "machine": machine(),
                  "statuses": dict(Counter(r.status for r in results)),
                  "cases": [{k: v for k, v in vars(r).items() if k != "script"} for r in results]}
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(record, out, indent=1)
    for key, seeds_ in by_symptom(results).items():
        print(f"  {len(seeds_)}x {key}: seeds {' '.join(map(str, seeds_[:20]))}")
    return 0 if all(r.status == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
