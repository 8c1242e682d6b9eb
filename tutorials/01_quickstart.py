"""Tutorial 1: from a PyTorch model to a memory-planned TVM training step.

    python tutorials/01_quickstart.py            # an MLP 784-1024-1024-10, batch 64, Adam (about a minute)
    python tutorials/01_quickstart.py --fast     # tiny sizes (seconds), what the tests run

What it does:

1. writes a small PyTorch model, its example batch and an optimizer;
2. turns model + loss + optimizer into ONE Relax function ``train_step``
   (forward, backward, in-place Adam update) with ``roam_tvm.frontend.from_torch``;
3. compiles it for the CPU with the ``roam`` pipeline
   (``RoamOrder`` chooses the operator order, ``RoamLayout`` places every
   intermediate tensor in one arena) and runs one step;
4. checks the loss and the updated parameters against PyTorch's own step;
5. compares the peak memory of the step under every planner (TVM's default,
   each roam pass alone, both, PyTorch's eager step) and the lower bounds,
   prints a table and saves a bar chart.

Outputs (``--out``, default ``tutorials/out/01_quickstart``): ``planner_peaks.png``, ``report.json``.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time

import numpy as np


def build_model(fast: bool):
    """The model, one batch and the optimizer settings (all plain PyTorch)."""
    import torch

    torch.manual_seed(0)
    feat, hidden, classes, batch = (32, 16, 4, 4) if fast else (784, 1024, 10, 64)
    model = torch.nn.Sequential(
        torch.nn.Linear(feat, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, classes),
    )
    x = torch.randn(batch, feat)
    y = torch.randint(0, classes, (batch,))
    return model, x, y


def peak_table(report: dict) -> str:
    """Peaks per planner and the lower bounds, in a unit that suits their size."""
    from roam_tvm.report.plots import byte_unit

    rows = {**{k: v["peak_bytes"] for k, v in report["planners"].items()},
            **{f"bound:{k}": v for k, v in report["lower_bounds"].items()}}
    unit, scale = byte_unit(max(rows.values()))
    lines = [f"{'planner':18s} {'peak ' + unit:>12s}  {'plan s':>7s}  how", "-" * 52]
    for k, v in rows.items():
        r = report["planners"].get(k, {})
        secs = f"{r['plan_seconds']:7.2f}" if r else " " * 7
        lines.append(f"{k:18s} {v / scale:12,.1f}  {secs}  {r.get('method', 'lower bound') if r else 'lower bound'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fast", action="store_true", help="tiny sizes (seconds), for CI")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "01_quickstart"),
                    help="folder for the PNG and JSON")
    ap.add_argument("--target", default="llvm", choices=["llvm", "cuda"],
                    help="target whose lowering is planned for the comparison (the step itself runs on llvm)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    import torch
    import tvm
    from tvm import relax

    import roam_tvm.runtime  # registers the "roam" pipeline; roam_tvm.runtime.pipeline is the factory
    from roam_tvm.frontend import from_torch
    from roam_tvm.cli import optimizer_from_config
    from roam_tvm.report.compare import compare_step
    from roam_tvm.report.plots import plot_planner_bars
    from roam_tvm.report.pytorch_peak import pytorch_peak
    from roam_tvm.zoo import ModelSpec, OptimizerConfig, torch_optimizer

    # ---- 1. the PyTorch side -------------------------------------------------------------
    model, x, y = build_model(args.fast)
    opt_cfg = OptimizerConfig("adam", lr=1e-3)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters, batch {x.shape[0]}, Adam(lr={opt_cfg.lr})")

    # ---- 2. one Relax function: forward + backward + in-place update ----------------------
    start = time.perf_counter()
    ts = from_torch(copy.deepcopy(model), (x,), (y,), loss="cross_entropy",
                    optimizer=optimizer_from_config(opt_cfg), quiet=True)
    print(f"imported train_step in {time.perf_counter() - start:.1f} s: "
          f"{len(ts.param_names)} parameters, {len(ts.state_names)} optimizer states")

    # ---- 3. compile with the roam pipeline and run one step on the CPU --------------------
    start = time.perf_counter()
    exe = tvm.compile(ts.mod, target="llvm", relax_pipeline=roam_tvm.runtime.pipeline("llvm"))
    print(f"compiled with the roam pipeline in {time.perf_counter() - start:.1f} s")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    state = ts.initial_values()
    tvm_loss = ts.run(vm, [x.numpy()], [y.numpy()], state)

    # ---- 4. the same step in PyTorch --------------------------------------------------------
    ref = copy.deepcopy(model).train()
    ref_opt = torch_optimizer(opt_cfg, ref.parameters(), foreach=False)
    ref_opt.zero_grad()
    loss_t = torch.nn.functional.cross_entropy(ref(x), y)
    loss_t.backward()
    ref_loss = loss_t.item()
    ref_opt.step()
    ref_params = {n: p.detach().numpy() for n, p in ref.named_parameters()}
    # ts.param_names follow the wrapped module's parameter order (= named_parameters order)
    diffs = [float(np.max(np.abs(state[tn] - ref_params[rn])))
             for tn, rn in zip(ts.param_names, ref_params)]
    loss_err = abs(tvm_loss - ref_loss)
    loss_ok = loss_err <= 1e-4 * max(1.0, abs(ref_loss))
    params_ok = max(diffs) <= 1e-4
    print(f"loss: TVM {tvm_loss:.6f}  PyTorch {ref_loss:.6f}  |diff| {loss_err:.2e}  "
          f"{'OK' if loss_ok else 'MISMATCH'}")
    print(f"parameters after one Adam step: max |TVM - PyTorch| = {max(diffs):.2e}  "
          f"{'OK' if params_ok else 'MISMATCH'}")

    # ---- 5. peak memory per planner ----------------------------------------------------------
    spec = ModelSpec(name="quickstart-mlp", model=model, example_inputs=(x,), targets=(y,),
                     loss="cross_entropy", optimizer=opt_cfg,
                     config={"batch": int(x.shape[0]), "optimizer": "adam"})
    report = compare_step(ts, ["tvm-default", "roam-order-only", "roam-layout-only", "roam", "pytorch"],
                          target=args.target, pytorch=lambda: pytorch_peak(spec), progress=False,
                          order_options={"time_limit": 5.0 if args.fast else 20.0},
                          layout_options={"time_limit": 5.0 if args.fast else 20.0})
    report.update(model="quickstart-mlp", config=spec.config,
                  step={"tvm_loss": tvm_loss, "pytorch_loss": ref_loss, "max_param_diff": max(diffs)},
                  command="python tutorials/01_quickstart.py " + " ".join(sys.argv[1:] if argv is None else argv))
    print()
    print(f"peak memory of one training step (target {args.target}; {report['ops']} ops, "
          f"{report['planned_ops']} after fusion):")
    print(peak_table(report))
    peaks = {k: v["peak_bytes"] for k, v in report["planners"].items()}
    base = peaks["tvm-default"]
    print()
    for k in ("roam-order-only", "roam-layout-only", "roam"):
        print(f"{k:17s} {100 * (1 - peaks[k] / base):5.1f} % below tvm-default")
    print(f"{'roam':17s} {100 * (1 - peaks['roam'] / peaks['pytorch']):5.1f} % below PyTorch's eager step "
          f"({report['planners']['pytorch']['method']})")
    png = plot_planner_bars(report, os.path.join(args.out, "planner_peaks.png"),
                            title=f"one training step of the quickstart MLP (batch {x.shape[0]}, Adam)")
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {png} and {os.path.join(args.out, 'report.json')}")
    return 0 if (loss_ok and params_ok) else 1


if __name__ == "__main__":
    sys.exit(main())
