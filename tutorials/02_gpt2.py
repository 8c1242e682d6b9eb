"""Tutorial 2: GPT-2 -- how the peak grows with batch size and sequence length, and what one step looks like.

    python tutorials/02_gpt2.py            # a 2-layer GPT-2 (width 256, vocab 8192): a few minutes on 2 cores
    python tutorials/02_gpt2.py --fast     # tiny GPT-2 (seconds per point), what the tests run
    python tutorials/02_gpt2.py --layers 12 --width 768 --heads 12 --vocab 50257   # GPT-2 small (slow)

What it does:

1. for each batch size (sequence length fixed), then for each sequence length (batch fixed), builds the
   training step of a GPT-2 language model (next-token cross-entropy, AdamW), runs every planner on it
   and records the peak: ``tvm-default``, ``roam-order-only``, ``roam-layout-only``, ``roam``, and
   PyTorch's eager step (``pytorch``: measured on a GPU, simulated from PyTorch's own op order otherwise);
2. draws peak vs batch and peak vs sequence length, one line per planner;
3. draws the memory timeline of one step (step on x, offset on y, one rectangle per allocation) under
   ``tvm-default`` and under ``roam``, side by side on the same axes.

TVM's default planner (StaticPlanBlockMemory) allocates each storage on its own, so its timeline stacks
the storages for display only; the figure that counts is the total of live storages (dotted line).
``roam`` places every intermediate tensor at an offset in one arena: what is drawn is the real plan.

Outputs (``--out``, default ``tutorials/out/02_gpt2``): ``peak_vs_batch.png``, ``peak_vs_seq.png``,
``timeline.png``, ``sweep.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

PLANNERS = ["tvm-default", "roam-order-only", "roam-layout-only", "roam", "pytorch"]


def gpt2_spec(cfg: dict, batch: int, seq: int):
    """A zoo-style ``ModelSpec`` for a GPT-2 LM with the given sizes (random init, no downloads)."""
    import torch

    from roam_tvm.zoo import ModelSpec, OptimizerConfig
    from roam_tvm.zoo.text import GPT2LM, gpt2_config

    torch.manual_seed(0)
    model = GPT2LM(gpt2_config(cfg["layers"], cfg["width"], cfg["heads"], cfg["vocab"], max(cfg["positions"], seq)))
    model.train()
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg["vocab"], (batch, seq + 1), generator=gen)
    return ModelSpec(name="gpt2", model=model, example_inputs=(tokens[:, :-1].contiguous(),),
                     targets=(tokens[:, 1:].contiguous(),), loss="cross_entropy",
                     optimizer=OptimizerConfig("adamw", lr=1e-4, weight_decay=0.01),
                     config={**cfg, "batch": batch, "seq": seq, "optimizer": "adamw"})


def import_step(spec):
    from roam_tvm.cli import optimizer_from_config
    from roam_tvm.frontend import from_torch

    return from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                      optimizer=optimizer_from_config(spec.optimizer), quiet=True)


def point(cfg, batch, seq, target, time_limit):
    """Peaks (bytes) of every planner for one (batch, seq)."""
    from roam_tvm.report.compare import compare_step
    from roam_tvm.report.pytorch_peak import pytorch_peak

    spec = gpt2_spec(cfg, batch, seq)
    start = time.perf_counter()
    ts = import_step(spec)
    rep = compare_step(ts, PLANNERS, target=target, pytorch=lambda: pytorch_peak(spec), cut=False,
                       progress=False, order_options={"time_limit": time_limit},
                       layout_options={"time_limit": time_limit})
    out = {k: v["peak_bytes"] for k, v in rep["planners"].items()}
    out["bound:order"] = rep["lower_bounds"]["order"]
    out["always_live"] = rep["always_live_bytes"]
    out["seconds"] = time.perf_counter() - start
    out["pytorch_method"] = rep["planners"]["pytorch"]["method"]
    return out, ts


def timeline(ts, target: str, time_limit: float, path: str, title: str) -> dict:
    """Side-by-side timelines of one step: tvm-default (storages, stacked for display) and roam (its arena)."""
    import matplotlib.pyplot as plt

    from roam_tvm.layout import Problem, greedy, live_peak
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.plan import plan_problem, storage_buffers
    from roam_tvm.report.plots import byte_unit, human_bytes, plot_timeline, save
    from roam_tvm.report.simulate import run_planner, schedule_for

    func = ts.func_name
    scheduled = schedule_for(with_param_kinds(ts), target)
    opts = {"time_limit": time_limit}
    roam, rx = run_planner(scheduled, "roam", target, func, opts, opts)
    default, dx = run_planner(scheduled, "tvm-default", target, func)

    def stack(bufs, base=0):
        if not bufs:
            return {}
        return {k: int(v) + base for k, v in greedy(Problem(bufs, None, 1), "size").offsets.items()}

    d_bufs, d_names, d_peak, _ = storage_buffers(dx["planned_graph"], dx["unplanned"])
    d_offsets = stack(d_bufs)
    rec = rx["layout_record"]
    arena = rec is not None and rec.status == "roam" and bool(rec.offsets)
    r_extra, _, _, _ = storage_buffers(rx["planned_graph"], rx["unplanned"], ("roam_arena",) if arena else ())
    prof = rx["unplanned"].live_profile()
    r_peak = max(range(len(prof)), key=prof.__getitem__) if prof else None

    if arena:
        problem, sol = plan_problem(rec)
        r_bufs, r_offsets, r_height = problem.buffers, dict(sol.offsets), rec.arena_bytes
    else:  # RoamLayout kept StaticPlanBlockMemory's plan for this function
        r_bufs, r_offsets, r_height = r_extra, stack(r_extra), None
        r_extra = []
    extra_offsets = stack(r_extra, base=r_height or 0)
    tops = [r_height or 0] + [r_offsets[b.id] + b.size for b in r_bufs] + \
           [extra_offsets[b.id] + b.size for b in r_extra] + [d_offsets[b.id] + b.size for b in d_bufs]
    unit, scale = byte_unit(max(tops + [1]))
    fig, axes = plt.subplots(1, 2, figsize=(18, 5.5), sharey=True, gridspec_kw={"wspace": 0.55})
    plot_timeline(axes[0], d_bufs, d_offsets, peak_step=d_peak, unit=unit, lower_bound=live_peak(d_bufs),
                  height_label="stacked for display", bound_label="sum of live storages", label_top=6,
                  labels=d_names, xlabel="step (op index, program order)")
    axes[0].set_title(f"tvm-default: {len(d_bufs)} separate allocations\npeak {human_bytes(default.peak_bytes)}",
                      fontsize=10)
    plot_timeline(axes[1], r_bufs, r_offsets, peak_step=r_peak, unit=unit, height=r_height,
                  lower_bound=rec.lower_bound_bytes if arena else live_peak(r_bufs),
                  extra=[(b, extra_offsets[b.id]) for b in r_extra],
                  extra_label="outside the arena (returned tensors)",
                  xlabel="step (op index, roam's order)")
    how = f"{len(r_bufs)} tensors in one arena" if arena else f"StaticPlanBlockMemory kept ({rec.status if rec else '?'})"
    axes[1].set_title(f"roam: {how}\npeak {human_bytes(roam.peak_bytes)}", fontsize=10)
    ymax = max(tops + [1]) / scale * 1.1
    for ax in axes:
        ax.set_ylim(0, ymax)
    fig.suptitle(title + " (parameters and optimizer state, always live, not drawn)", fontsize=11)
    save(fig, path)
    return {"tvm-default": default.peak_bytes, "roam": roam.peak_bytes, "arena": arena}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fast", action="store_true", help="tiny GPT-2 and two points per sweep, for CI")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "02_gpt2"))
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--width", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=None)
    ap.add_argument("--batches", type=int, nargs="+", default=None, help="batch sizes (at the middle seq)")
    ap.add_argument("--seqs", type=int, nargs="+", default=None, help="sequence lengths (at the first batch)")
    ap.add_argument("--target", default="llvm", choices=["llvm", "cuda"],
                    help="target whose lowering is planned (nothing is run)")
    ap.add_argument("--time-limit", type=float, default=None, help="solver seconds per piece")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    import roam_tvm.runtime  # noqa: F401  (the pipeline stages the planners use)
    from roam_tvm.report.plots import plot_lines

    if args.fast:
        cfg = dict(layers=1, width=32, heads=2, vocab=128, positions=64)
        batches, seqs, tl = [1, 2], [8, 16], 2.0
    else:
        cfg = dict(layers=2, width=256, heads=4, vocab=8192, positions=512)
        batches, seqs, tl = [1, 2, 4, 8], [64, 128, 256, 512], 10.0
    for k in ("layers", "width", "heads", "vocab"):
        if getattr(args, k):
            cfg[k] = getattr(args, k)
    batches = args.batches or batches
    seqs = args.seqs or seqs
    tl = args.time_limit or tl
    seq0 = seqs[len(seqs) // 2 - 1] if len(seqs) > 1 else seqs[0]
    batch0 = batches[0]
    print(f"GPT-2 {cfg}, AdamW, target {args.target}")

    cache: dict = {}
    steps: dict = {}

    def run(b, s):
        if (b, s) not in cache:
            res, ts = point(cfg, b, s, args.target, tl)
            cache[(b, s)] = res
            steps[(b, s)] = ts
            r = res["roam"]
            print(f"  batch {b:3d} seq {s:4d}: " + "  ".join(f"{k} {res[k] / 2**20:8.2f}" for k in PLANNERS)
                  + f" MiB  (roam -{100 * (1 - r / res['tvm-default']):.1f}% vs tvm-default, "
                  f"-{100 * (1 - r / res['pytorch']):.1f}% vs pytorch; {res['seconds']:.0f} s)", flush=True)
        return cache[(b, s)]

    print(f"peak vs batch size (seq {seq0}):")
    by_batch = [run(b, seq0) for b in batches]
    print(f"peak vs sequence length (batch {batch0}):")
    by_seq = [run(batch0, s) for s in seqs]

    def series(rows):
        out = {k: [r[k] / 2**20 for r in rows] for k in PLANNERS}
        out["lower bound (order)"] = [r["bound:order"] / 2**20 for r in rows]
        return out

    pytorch_how = by_batch[0]["pytorch_method"]
    paths = [
        plot_lines(batches, series(by_batch), os.path.join(args.out, "peak_vs_batch.png"), "batch size",
                   "peak memory (MiB)", f"GPT-2 training step, seq {seq0} (pytorch {pytorch_how})"),
        plot_lines(seqs, series(by_seq), os.path.join(args.out, "peak_vs_seq.png"), "sequence length",
                   "peak memory (MiB)", f"GPT-2 training step, batch {batch0} (pytorch {pytorch_how})"),
    ]
    # slope per sample: what one more sequence in the batch costs
    if len(batches) > 1:
        db = batches[-1] - batches[0]
        print("MiB per extra sample: " + ", ".join(
            f"{k} {(by_batch[-1][k] - by_batch[0][k]) / db / 2**20:.2f}" for k in PLANNERS))
    tb, tsq = batches[min(1, len(batches) - 1)], seq0
    print(f"timeline of one step at batch {tb}, seq {tsq} ...")
    tl_res = timeline(steps[(tb, tsq)] if (tb, tsq) in steps else point(cfg, tb, tsq, args.target, tl)[1],
                      args.target, tl, os.path.join(args.out, "timeline.png"),
                      f"GPT-2 {cfg['layers']} layers, width {cfg['width']}, batch {tb}, seq {tsq}")
    paths.append(os.path.join(args.out, "timeline.png"))
    print(f"  tvm-default {tl_res['tvm-default'] / 2**20:.2f} MiB, roam {tl_res['roam'] / 2**20:.2f} MiB"
          + ("" if tl_res["arena"] else " (RoamLayout kept StaticPlanBlockMemory's plan)"))
    from roam_tvm.report.compare import machine, versions

    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump({"config": cfg, "target": args.target, "batches": batches, "seq_for_batches": seq0,
                   "seqs": seqs, "batch_for_seqs": batch0,
                   "points": [{"batch": b, "seq": s, **v} for (b, s), v in cache.items()],
                   "command": "python tutorials/02_gpt2.py " + " ".join(sys.argv[1:] if argv is None else argv),
                   "versions": versions(), "machine": machine()}, f, indent=1)
    for p in paths:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
