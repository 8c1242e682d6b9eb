"""Planned against measured on a GPU: build each zoo step for CUDA, run it, count its device bytes.

    python benchmarks/gpu_truth.py                          # every zoo model at its default size, on CUDA
    python benchmarks/gpu_truth.py --small mlp cnn resnet18 # the zoo's small configurations
    python benchmarks/gpu_truth.py --batch 1 --seq 256 gpt2-small
    python benchmarks/gpu_truth.py --target llvm --small mlp   # no GPU: the same rows on the CPU

``--target auto`` (default) runs on CUDA GPU 0 when TVM can use one and otherwise falls back to
llvm, saying so in every entry (``device``, ``fallback``); a CPU run writes
``benchmarks/results/gpu_truth_llvm.json`` unless ``--out`` is given, so it never mixes with GPU
figures. ``--target cuda`` without a GPU is an error, before any work.

Per model and planner (``tvm-default``, ``roam``) each entry holds:

``planned_bytes``, ``peak_with_scratch_bytes``, ``pool_peak_bytes``
    ``roam-tvm compare``'s planned peak for the target, and with kernel scratch added;
``measured_bytes``
    the highest bytes live during a step, counted at the allocator in a child process
    (``roam_tvm.runtime.cpu_measure.measure_step``: ``cudaMalloc`` on CUDA, aligned host
    allocations on llvm; VM allocator ``naive``, exact sizes; two steps), arguments included;
``device_api_bytes`` (CUDA)
    the same step under the pooled allocator, read from the device API's memory statistics
    (``Device.available_global_memory`` before the arguments less after the step; driver pages);
``step_ms``
    the median of ``--repeat`` timed steps (``StepRunner``, pooled allocator, after a warm-up);
``bit_identical_to_default``
    whether every output and every argument updated in place is bit-for-bit the default plan's,
    from the same random arguments;
``loss``, ``loss_vs_pytorch``
    the step's loss from the model's own weights and batch, and its difference from PyTorch eager's
    first step on the same device (``null`` with a reason for models built with meta weights).

``pytorch`` holds PyTorch eager's loss, median step time and peak: ``torch.cuda.max_memory_allocated``
on CUDA (``roam_tvm.report.pytorch_peak.measure_cuda_step``), the simulated eager peak on the CPU.
Each entry records its command, the versions and the machine.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
_PASSES = {"tvm-default": (False, False), "roam": (True, True)}


def resolve_device(requested: str) -> dict:
    """``{"target", "device", "fallback"}`` for ``--target`` auto / cuda / llvm."""
    from roam_tvm.runtime.measure import cuda_available

    status = cuda_available()
    if requested == "llvm":
        return {"target": "llvm", "device": "cpu", "fallback": None, "gpu": status.reason}
    if status:
        return {"target": "cuda", "device": "cuda", "fallback": None, "gpu": status.reason}
    if requested == "cuda":
        raise SystemExit(f"gpu_truth.py: --target cuda, but {status.reason}. Run on a machine with a CUDA GPU, "
                         "or use --target llvm (or auto) for the CPU figures")
    return {"target": "llvm", "device": "cpu", "gpu": None,
            "fallback": f"no usable CUDA GPU ({status.reason}); ran on llvm/CPU, measured bytes from the CPU counter"}


def entry_key(model: str, args) -> str:
    if args.small:
        return f"{model}@small"
    sizes = [f"{k}{getattr(args, k)}" for k in ("batch", "seq", "image") if getattr(args, k)]
    return "@".join([model] + sizes) if sizes else model


def _flat_numpy(value) -> list:
    """Every tensor of a VM result (nested tuples flattened), as numpy arrays."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    out = []
    for item in value:
        out.extend(_flat_numpy(item))
    return out


def _same_bits(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def _step_loss(ts, exe, spec, dev) -> float:
    """One step from the model's own weights and batch; the loss it returns."""
    from tvm import relax

    vm = relax.VirtualMachine(exe, dev)
    inputs = [t.numpy() for t in spec.example_inputs]
    targets = [t.numpy() for t in spec.targets]
    return ts.run(vm, inputs, targets, ts.initial_values(), device=dev)


def run_planner(ts, spec, planner: str, where: dict, step_args, args) -> tuple[dict, list]:
    """Build, measure, time and run one planner's step; (entry, the step's result bits)."""
    import tvm

    from roam_tvm.runtime import build
    from roam_tvm.runtime.cpu_measure import measure_step
    from roam_tvm.runtime.measure import StepRunner
    from roam_tvm.runtime.targets import cuda_target_for_device

    order, layout = _PASSES[planner]
    limits = {"time_limit": args.time_limit}
    target = cuda_target_for_device() if where["device"] == "cuda" else "llvm"
    start = time.perf_counter()
    exe = build(ts.mod, target, order=order, layout=layout, order_options=limits if order else None,
                layout_options=limits if layout else None)
    entry = {"build_seconds": time.perf_counter() - start}
    naive = measure_step(exe, step_args, ts.func_name, where["device"], allocator="naive", steps=2)
    entry.update(measured_bytes=naive.peak_bytes, measured=naive.to_dict())
    if where["device"] == "cuda":
        pooled = measure_step(exe, step_args, ts.func_name, "cuda", allocator="pooled", steps=2)
        entry.update(measured_pooled_bytes=pooled.peak_bytes, device_api_bytes=max(pooled.device_api_bytes))
    runner = StepRunner(exe, where["device"], func=ts.func_name, inputs=step_args)
    result = _flat_numpy(runner.run()) + [t.numpy() for t in runner.inputs]  # outputs, then in-place updates
    timing = runner.measure(repeat=args.repeat, warmup=1, memory=False)
    entry["step_ms"] = timing.median_s * 1e3
    dev = tvm.cuda(0) if where["device"] == "cuda" else tvm.cpu()
    entry["loss"] = None if ts.meta else _step_loss(ts, exe, spec, dev)
    return entry, result


def pytorch_eager(spec, where: dict, repeat: int) -> dict:
    """PyTorch eager on the same device: first-step loss, median step time, peak bytes."""
    import torch

    from roam_tvm.report.pytorch_peak import measure_cuda_step, simulate_eager_step
    from roam_tvm.zoo import LossWrapper, torch_optimizer

    out: dict = {"device": where["device"]}
    if where["device"] == "cuda":
        # fp32 as TVM computes it: no TF32 in cuDNN convolutions (PyTorch's default) or matmuls
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        out["tf32"] = False
        peak = measure_cuda_step(spec, device="cuda")
        out.update(max_memory_allocated_bytes=peak["peak_bytes"], peak=peak)
    else:
        peak = simulate_eager_step(spec)
        out.update(max_memory_allocated_bytes=None, simulated_peak_bytes=peak["peak_bytes"],
                   note="no GPU: torch.cuda.max_memory_allocated unavailable; the peak is PyTorch's eager "
                        "step simulated (roam_tvm.report.pytorch_peak)")
    if spec.meta:
        out.update(loss=None, step_ms=None, note_loss="meta weights: no values to run PyTorch's step on")
        return out
    dev = torch.device(where["device"])
    model = copy.deepcopy(spec.model).to(dev).train()
    wrapped = LossWrapper(model, spec.loss, len(spec.example_inputs))
    opt = torch_optimizer(spec.optimizer, [p for p in model.parameters() if p.requires_grad])
    batch = [a.to(dev) for a in spec.args]
    times, loss = [], None
    for i in range(1 + repeat):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        value = wrapped(*batch)
        value.backward()
        opt.step()
        if where["device"] == "cuda":
            torch.cuda.synchronize(dev)
        if i == 0:
            loss = float(value.detach())  # at the initial weights, as TVM's first step
        else:
            times.append(time.perf_counter() - start)
    out.update(loss=loss, step_ms=statistics.median(times) * 1e3 if times else None)
    return out


def measure_model(model: str, where: dict, args) -> dict:
    """Plan, build, measure and compare one model on the device; the JSON entry."""
    from roam_tvm.cli import load_step
    from roam_tvm.report.compare import compare_step, machine, versions
    from roam_tvm.runtime.measure import inputs_from_signature

    ts, spec = load_step(argparse.Namespace(model=model, batch=args.batch, seq=args.seq, image=args.image,
                                            small=args.small, optimizer=None, lr=None, loss=None, quiet=True,
                                            precision=None, loss_scale=None))
    limits = {"time_limit": args.time_limit}
    report = compare_step(ts, planners=list(args.planners), target=where["target"], cut=False, progress=False,
                          order_options=limits, layout_options=limits)
    step_args = inputs_from_signature(ts.mod[ts.func_name])
    torch_side = pytorch_eager(spec, where, args.repeat)
    out = {"model": model, "config": spec.config, "small": args.small, **where,
           "command": "python benchmarks/gpu_truth.py " + " ".join(sys.argv[1:]),
           "planners": {}, "pytorch": torch_side, "versions": versions(), "machine": machine()}
    results = {}
    for planner in args.planners:
        r = report["planners"][planner]
        entry, results[planner] = run_planner(ts, spec, planner, where, step_args, args)
        entry.update(planned_bytes=r["peak_bytes"], peak_with_scratch_bytes=r.get("peak_with_scratch_bytes"),
                     pool_peak_bytes=r.get("pool_peak_bytes"),
                     measured_over_planned=entry["measured_bytes"] / r["peak_bytes"])
        loss, ref = entry["loss"], torch_side.get("loss")
        entry["loss_vs_pytorch"] = None if loss is None or ref is None else loss - ref
        out["planners"][planner] = entry
        print(f"{model} {planner} on {where['device']}: planned {r['peak_bytes']:,} B, measured "
              f"{entry['measured_bytes']:,} B, {entry['step_ms']:.2f} ms/step, loss {loss} (PyTorch {ref})",
              flush=True)
    default = results.get("tvm-default")
    for planner, bits in results.items():
        out["planners"][planner]["bit_identical_to_default"] = None if default is None else _same_bits(bits, default)
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="zoo models or path/to/file.py:factory (default: every zoo model)")
    ap.add_argument("--target", choices=["auto", "cuda", "llvm"], default="auto",
                    help="auto: CUDA GPU 0 when present, else llvm (stated in the JSON)")
    ap.add_argument("--small", action="store_true", help="the zoo's small configurations")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--image", type=int)
    ap.add_argument("--planners", nargs="+", default=list(_PASSES), choices=list(_PASSES))
    ap.add_argument("--repeat", type=int, default=10, help="timed steps per planner (median reported)")
    ap.add_argument("--time-limit", type=float, default=10.0,
                    help="RoamOrder's and RoamLayout's time limit, seconds (as roam-tvm compare)")
    ap.add_argument("--out", default=None,
                    help="JSON to merge entries into (default benchmarks/results/gpu_truth.json on CUDA, "
                         "gpu_truth_llvm.json on the CPU)")
    return ap


def main(argv=None) -> int:
    from roam_tvm.zoo import MODELS

    ap = _parser()
    args = ap.parse_args(argv)
    models = args.models or list(MODELS)
    unknown = [m for m in models if m not in MODELS and ":" not in m]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; valid: {', '.join(MODELS)}, or path/to/file.py:factory")
    if args.repeat < 1 or args.time_limit <= 0:
        ap.error("--repeat must be at least 1 and --time-limit above 0")
    where = resolve_device(args.target)
    if where["fallback"]:
        print(f"gpu_truth.py: {where['fallback']}", file=sys.stderr)
    out_path = args.out or os.path.join(HERE, "results", "gpu_truth.json" if where["device"] == "cuda"
                                        else "gpu_truth_llvm.json")
    data = {"entries": {}}
    if os.path.exists(out_path):
        with open(out_path, encoding="utf-8") as f:
            data = json.load(f)
    for model in models:
        data["entries"][f"{entry_key(model, args)}@{where['device']}"] = measure_model(model, where, args)
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        with open(out_path, "w", encoding="utf-8") as f:  # after each model: a later failure keeps it
            json.dump(data, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
