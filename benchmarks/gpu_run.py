"""Run the steps ``gpu_export.py`` built, on a CUDA GPU, with TVM's runtime alone; planned against measured.

    TVM_USE_RUNTIME_LIB=1 PYTHONPATH=<tvm runtime>:. python benchmarks/gpu_run.py .gpu --out gpu_truth.json

``<tvm runtime>`` (``python benchmarks/gpu_runtime_bundle.py`` makes it, and the wheel below) is a
folder holding the ``tvm`` package of this machine's apache-tvm without
``lib/libtvm_compiler.so`` (about 10 MB once ``relax``, ``topi``, ``s_tir`` and ``web`` are left out too;
``TVM_USE_RUNTIME_LIB=1`` makes it load ``libtvm_runtime`` alone) and ``tvm_ffi`` for the GPU machine's
Python (``pip download apache-tvm-ffi==<this machine's version> --python-version 3.12 --only-binary=:all:``).
The GPU machine needs PyTorch and numpy (for the PyTorch rows), a C compiler (the allocation counter)
and the CUDA 13 runtime; the kernels come compiled from ``gpu_export.py``.

Per build of the manifest this records, beside the planned figures written at export:

``measured_bytes``
    the highest bytes live at ``cudaMalloc`` during a step (``measure_step``: a counter preloaded
    into a child process, the VM's ``naive`` allocator, exact sizes; two steps; arguments included);
``measured_pooled_bytes``, ``device_api_bytes``
    the same step under TVM's default ``pooled`` allocator: counted the same way, and read from
    ``cudaMemGetInfo`` before the arguments and after the step (driver pages; everything on the GPU);
``step_ms``
    the median of ``--repeat`` timed steps after a warm-up (pooled allocator);
``bit_identical``
    whether every output and every argument updated in place is bit for bit the reference build's
    (``tvm-default`` for ``roam``; the unbudgeted ``roam`` for ``roam-budget``), from the same
    arguments;
``measured_overhead_time`` (``roam-budget``)
    its median step time over the unbudgeted build's, less one: the recomputation's real cost on
    this GPU, beside the roofline prediction (``overhead_time``).

and per model PyTorch eager on the same GPU (``torch.cuda.max_memory_allocated`` and step time, no TF32).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from gpu_truth import _flat_numpy, _same_bits  # noqa: E402  (stdlib-only at import: no TVM compiler)


def run_build(entry: dict, folder: str, repeat: int) -> tuple[dict, list]:
    """Measure, time and run one build; (its measured figures, its result bits)."""
    from roam_tvm.runtime.cpu_measure import measure_step
    from roam_tvm.runtime.measure import StepRunner, inputs_from_specs

    library = os.path.join(folder, entry["library"])
    a = entry["arguments"]
    args = inputs_from_specs([(s, d) for s, d in a["specs"]], a["seed"], a["scale"])
    out: dict = {}
    start = time.perf_counter()
    # Bytes in fresh child processes (a process's allocator pools would blur one build into the next).
    for allocator in ("naive", "pooled"):
        try:
            m = measure_step(library, args, entry["func"], "cuda", allocator=allocator, steps=2)
        except Exception as err:  # pylint: disable=broad-except  # the counter failed: time the step all the same
            out[f"{allocator}_measure_error"] = f"{type(err).__name__}: {err}"[:4000]
            continue
        if allocator == "naive":
            out.update(measured_bytes=m.peak_bytes, measured=m.to_dict(),
                       measured_over_planned=m.peak_bytes / entry["planned_bytes"])
        else:  # TVM's default allocator: counted, and as the driver saw it (cudaMemGetInfo, 2 MiB pages)
            out.update(measured_pooled_bytes=m.peak_bytes,
                       device_api_bytes=max((b for b in m.device_api_bytes if b is not None), default=None))
    runner = StepRunner(library, "cuda", func=entry["func"], inputs=args)
    bits = _flat_numpy(runner.run()) + [t.numpy() for t in runner.inputs]  # outputs, then in-place updates
    runner.set_inputs(args)
    timing = runner.measure(repeat=repeat, warmup=1, memory=False)
    out.update(step_ms=timing.median_s * 1e3, times_ms=[t * 1e3 for t in timing.times_s],
               seconds=time.perf_counter() - start)
    del runner
    return out, bits


def pytorch_on_gpu(entry: dict, repeat: int) -> dict:
    """PyTorch eager's peak and step time for the entry's model and sizes."""
    from gpu_truth import pytorch_eager

    from roam_tvm.zoo import get_model

    spec = get_model(entry["model"], **{k: v for k, v in entry["sizes"].items()})
    import torch

    try:
        return pytorch_eager(spec, {"device": "cuda"}, repeat)
    except Exception as err:  # pylint: disable=broad-except  # reported, the TVM rows still count
        return {"error": f"{type(err).__name__}: {err}"[:2000]}
    finally:
        torch.cuda.empty_cache()  # give PyTorch's cached blocks back before the next TVM build runs


def _machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version()}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False, timeout=30)
        info["gpu"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        info["gpu"] = f"nvidia-smi failed: {err}"
    import torch

    import tvm

    info.update(torch=torch.__version__, tvm=getattr(tvm, "__version__", None))
    return info


def table(result: dict) -> str:
    """Markdown: planned against measured per build, and PyTorch eager on the same GPU (bytes, ms)."""
    lines = [f"GPU: {result['machine'].get('gpu')}; `{result['command']}`", "",
             "| model | planner | planned B | measured B | measured/planned | pooled B | driver B | step ms "
             "| bit-identical to | overhead: roofline / measured |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for e in result["entries"].values():
        if "error" in e:
            lines.append(f"| {e['key']} | {e['planner']} | {e['planned_bytes']:,} | error: {e['error'][:80]} |"
                         " | | | | | |")
            continue
        over = ""
        if e.get("overhead_time") is not None and e.get("measured_overhead_time") is not None:
            over = f"{100 * e['overhead_time']:.2f}% / {100 * e['measured_overhead_time']:.2f}%"
        ident = "" if e.get("bit_identical") is None else f"{e['bit_identical_to'].split('.')[-1]}: {e['bit_identical']}"
        measured = e.get("measured_bytes")
        ratio = "" if measured is None else f"{measured / e['planned_bytes']:.5f}"
        lines.append(f"| {e['key']} | {e['planner']} | {e['planned_bytes']:,} | "
                     f"{'n/a' if measured is None else f'{measured:,}'} | "
                     f"{ratio} | "
                     f"{e.get('measured_pooled_bytes') or 0:,} | {e.get('device_api_bytes') or 0:,} | "
                     f"{e['step_ms']:.1f} | {ident} | {over} |")
    lines += ["", "| model | PyTorch eager max_memory_allocated B | step ms |", "|---|---|---|"]
    for key, p in result["pytorch"].items():
        if "error" in p:
            lines.append(f"| {key} | error: {p['error'][:100]} | |")
        else:
            lines.append(f"| {key} | {p['max_memory_allocated_bytes']:,} | {p['step_ms']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="gpu_export.py's --out folder")
    ap.add_argument("--out", required=True, help="JSON to write")
    ap.add_argument("--repeat", type=int, default=5, help="timed steps per build (median reported)")
    ap.add_argument("--only", nargs="*", default=None, help="keys to run (default all)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds after which no further build is started (the JSON keeps what ran)")
    ap.add_argument("--table", action="store_true", help="print the Markdown table of an --out JSON and stop")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.out, encoding="utf-8") as f:
            print(table(json.load(f)), end="")
        return 0
    from roam_tvm.runtime.prebuilt_kernels import KERNELS_ENV, load_cuda_runtime, use_prebuilt_kernels

    with open(os.path.join(args.folder, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    kernels = os.path.abspath(os.path.join(args.folder, "kernels"))
    load_cuda_runtime()
    use_prebuilt_kernels(kernels)
    os.environ[KERNELS_ENV] = kernels  # the measuring children load the same binaries
    result = {"command": "python benchmarks/gpu_run.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "export": {k: manifest.get(k) for k in ("commands", "versions", "machine", "arch")},
              "machine": _machine(), "entries": {}, "pytorch": {}}
    bits: dict = {}

    def save() -> None:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)

    start = time.perf_counter()
    for entry in manifest["entries"]:
        if args.only and entry["key"] not in args.only:
            continue
        if args.deadline is not None and time.perf_counter() - start > args.deadline:
            result.setdefault("skipped", []).append(f"{entry['key']}.{entry['planner']} (deadline)")
            save()
            continue
        name = f"{entry['key']}.{entry['planner']}"
        try:
            measured, bits[name] = run_build(entry, args.folder, args.repeat)
        except Exception as err:  # pylint: disable=broad-except  # one failed build must not lose the others
            measured = {"error": f"{type(err).__name__}: {err}"[:4000]}
        row = {**{k: v for k, v in entry.items() if k not in ("arguments",)}, **measured}
        ref = entry.get("bit_identical_to")
        if ref and name in bits and ref in bits:
            row["bit_identical"] = _same_bits(bits[name], bits[ref])
            base = result["entries"][ref]
            row["measured_time_ratio"] = row["step_ms"] / base["step_ms"]
            if entry["planner"] == "roam-budget":
                row["measured_overhead_time"] = row["measured_time_ratio"] - 1
        result["entries"][name] = row
        print(f"{name}: planned {entry['planned_bytes']:,} measured {row.get('measured_bytes', 'n/a')} B, "
              f"{row.get('step_ms', float('nan')):.1f} ms, bit-identical {row.get('bit_identical')} "
              f"{row.get('error', '')}", flush=True)
        save()
        if entry["key"] not in result["pytorch"]:
            result["pytorch"][entry["key"]] = pytorch_on_gpu(entry, args.repeat)
            print(f"{entry['key']} pytorch: {result['pytorch'][entry['key']]}"[:600], flush=True)
            save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
