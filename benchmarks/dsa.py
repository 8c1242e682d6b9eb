"""DSA benchmark: MiniMalloc's 11 challenging instances and the idealloc real traces.

    nice python benchmarks/dsa.py [--time-limit 60] [--only NAME] [--data DIR] [--out FILE]

Writes benchmarks/results/dsa.json: per instance the arena, lower bound, ratio,
seconds, whether it fits the capacity (MiniMalloc: 1,048,576) and whether the
independent validator accepts it, plus the command, versions, machine and
whether the search ran compiled (``ROAM_TVM_NATIVE=0`` measures pure Python).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from roam_tvm.layout import native, read_csv, solve, validate  # noqa: E402

MINIMALLOC_CAPACITY = 1048576


def versions() -> dict:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "cvxpy", "highspy"):
        try:
            m = __import__(mod)
            out[mod] = getattr(m, "__version__", None) or _dist_version(mod)
        except Exception:  # noqa: BLE001
            out[mod] = None
    return out


def _dist_version(name: str):
    from importlib.metadata import version
    try:
        return version(name)
    except Exception:  # noqa: BLE001
        return None


def instances(data: str) -> list[tuple[str, str, int | None]]:
    out = []
    for f in sorted(glob.glob(os.path.join(data, "minimalloc", "[A-K].1048576.csv"))):
        out.append((os.path.basename(f).split(".")[0], f, MINIMALLOC_CAPACITY))
    for f in sorted(glob.glob(os.path.join(data, "idealloc", "*.csv"))):
        out.append((os.path.basename(f)[:-4], f, None))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", action="append", default=None, help="instance name (repeatable), e.g. A or resnet50")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "benchmarks", "dsa"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "dsa.json"))
    args = ap.parse_args(argv)
    insts = instances(args.data)
    if not insts:
        print(f"error: no instances under {args.data}", file=sys.stderr)
        return 2
    if args.only:
        insts = [x for x in insts if x[0] in args.only]
    results = []
    for name, path, cap in insts:
        prob = read_csv(path, capacity=cap)
        lb = prob.lower_bound()
        t0 = time.perf_counter()
        sol = solve(prob, time_limit=args.time_limit, target=cap)
        dt = time.perf_counter() - t0
        viol = validate(prob.with_capacity(None), sol)
        r = {
            "instance": name, "file": os.path.relpath(path, args.data), "buffers": len(prob),
            "capacity": cap, "arena": sol.height, "lower_bound": lb, "ratio": round(sol.height / lb, 6),
            "seconds": round(dt, 2), "fits_capacity": None if cap is None else sol.height <= cap,
            "valid": not viol, "method": sol.method,
        }
        results.append(r)
        print(json.dumps(r), flush=True)
    out = {
        "command": ("ROAM_TVM_NATIVE=0 " if os.environ.get("ROAM_TVM_NATIVE") == "0" else "")
        + "nice python benchmarks/dsa.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "time_limit": args.time_limit,
        # the search runs compiled where a C compiler is present (same search, same answers, faster)
        "native_search": native.available(),
        "native_search_note": native.unavailable_reason() or "compiled kernel in use",
        "versions": versions(),
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpu_count": os.cpu_count()},
        "results": results,
    }
    if args.only and os.path.exists(args.out):
        try:
            old = json.load(open(args.out))
            keep = [r for r in old.get("results", []) if r["instance"] not in set(args.only)]
            out["results"] = keep + results
        except Exception:  # noqa: BLE001
            pass
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
