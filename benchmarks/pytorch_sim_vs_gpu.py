"""PyTorch's simulated eager peak against the one measured on a GPU, for the models of a gpu_run.py result.

    python benchmarks/pytorch_sim_vs_gpu.py benchmarks/results/gpu_truth_h200.json \\
        benchmarks/results/gpu_truth_h200_more.json --out benchmarks/results/pytorch_sim_vs_h200.json

Every table of this repo compares roam with PyTorch *simulated* (``roam_tvm.report.pytorch_peak``:
the eager step replayed on fake tensors, perfect packing of what autograd keeps). A GPU run measured
``torch.cuda.max_memory_allocated`` of the same steps; this puts the two side by side, so the
baseline's error is known. The caching allocator rounds each block up (512 B, and 2 MiB segments
for large ones), so measured is expected a little above simulated.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def rows(result: dict) -> list[dict]:
    """One row per model of a gpu_run.py result that has a PyTorch measurement."""
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.zoo import get_model

    sizes = {e["key"]: (e["model"], e["sizes"]) for e in result["entries"].values()}
    out = []
    for key, measured in result["pytorch"].items():
        if "error" in measured or key not in sizes:
            continue
        model, size = sizes[key]
        sim = simulate_eager_step(get_model(model, **size))["peak_bytes"]
        real = measured["max_memory_allocated_bytes"]
        out.append({"key": key, "model": model, "sizes": size, "simulated_bytes": sim, "measured_bytes": real,
                    "measured_over_simulated": real / sim, "gpu": result["machine"].get("gpu")})
        print(f"{key}: simulated {sim:,} B, measured {real:,} B ({real / sim:.4f})", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="gpu_run.py --out JSONs")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    from roam_tvm.report.compare import machine, versions

    out = {"command": "python benchmarks/pytorch_sim_vs_gpu.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "versions": versions(), "machine": machine(), "rows": []}
    for path in args.results:
        with open(path, encoding="utf-8") as f:
            out["rows"] += rows(json.load(f))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
