"""What redoing attention probabilities in the backward saves (``frontend/backward_attention.py``).

Two mid-size models from ``roam_tvm/zoo/families.py``, each planned twice by ``roam-tvm compare``
(Adam, planned for cuda): as built, and with the recompute switched off (the step keeps
``P = softmax(QKᵀ + mask)`` for the backward, as before the rewrite)::

    python benchmarks/attention_recompute.py        # writes benchmarks/results/attention_recompute.json

The factories also work alone: ``roam-tvm compare --model benchmarks/attention_recompute.py:llama_mid``.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "attention_recompute.json")


def llama_mid():
    """LLaMA (RoPE, GQA, causal mask built by transformers), 2 layers, width 256, batch 2 x 512 tokens."""
    from roam_tvm.zoo import families

    return families._lm("llama", 2, 512, layers=2, width=256, heads=4, kv_heads=2, ffn=512, vocab=1000)


def t5_mid():
    """T5 (relative position bias), 2+2 layers, width 256, batch 2, 256 source / 64 target tokens."""
    from roam_tvm.zoo import families

    return families._t5(2, 256, 64, layers=2, width=256, heads=4, ffn=512, vocab=1000)


def _compare(factory: str, recompute: bool) -> dict:
    """One ``roam-tvm compare`` run in this process; the recompute is switched off by replacing it."""
    from roam_tvm import cli
    from roam_tvm.frontend import autodiff

    kept = autodiff.recompute_attention_in_backward
    if not recompute:
        autodiff.recompute_attention_in_backward = lambda func: func
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "row.json")
            rc = cli.main(["compare", "--model", f"{__file__}:{factory}", "--optimizer", "adam",
                           "--planners", "tvm-default", "pytorch", "roam", "--quiet", "--json", path])
            if rc:
                raise SystemExit(f"compare failed for {factory} (recompute={recompute}): exit {rc}")
            with open(path) as f:
                return json.load(f)
    finally:
        autodiff.recompute_attention_in_backward = kept


def main() -> int:
    rows, meta = [], {}
    for factory in ("llama_mid", "t5_mid"):
        for recompute in (True, False):
            report = _compare(factory, recompute)
            meta = {"versions": report.get("versions"), "machine": report.get("machine")}
            peaks = {name: p["peak_bytes"] for name, p in report["planners"].items()}
            rows.append({"model": factory, "recompute_attention": recompute, "ops": report["ops"],
                         "peak_bytes": peaks, "cut_bytes": report["lower_bounds"]["cut"],
                         "roam_plan_seconds": report["planners"]["roam"]["plan_seconds"]})
            print(f"{factory:10s} recompute={recompute!s:5s} roam {peaks['roam']:>12,} B  "
                  f"cut {report['lower_bounds']['cut']:>12,}  pytorch {peaks['pytorch']:>12,}  "
                  f"tvm-default {peaks['tvm-default']:>12,}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"command": "python benchmarks/attention_recompute.py", **meta, "rows": rows}, f, indent=1)
    print(f"wrote {os.path.relpath(OUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
