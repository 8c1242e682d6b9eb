"""Child process of ``cpu_measure``: run a step under the allocation counter, print JSON.

Run as a script (``python _cpu_child.py REQUEST.json``), with ``LD_PRELOAD`` set to the
counter, so that it imports TVM and numpy only, not roam_tvm (whose planners would
allocate and lengthen the start).

``device`` "cpu" counts the aligned host allocations; "cuda" counts ``cudaMalloc`` /
``cudaFree`` and, besides, reads the device API's memory statistics
(``Device.available_global_memory``, TVM's ``kAvailableGlobalMemory``) before the
arguments are copied and after each step.
"""
import ctypes
import json
import os
import sys

_READERS = ("live", "peak", "count", "largest")


def _counter() -> ctypes.CDLL:
    lib = ctypes.CDLL(os.environ["ROAM_TVM_COUNTER"])
    for name in _READERS:
        getattr(lib, f"roam_counter_{name}").restype = ctypes.c_int64
        getattr(lib, f"roam_counter_device_{name}").restype = ctypes.c_int64
    return lib


def _reader(counter, device: str):
    """``read("live")`` etc. for the memory that holds the step's tensors."""
    prefix = "roam_counter_device_" if device == "cuda" else "roam_counter_"
    return lambda what: getattr(counter, prefix + what)()


def main(request_path: str) -> None:
    with open(request_path, encoding="utf-8") as f:
        req = json.load(f)
    import numpy as np
    import tvm
    from tvm.runtime.vm import VirtualMachine  # the runtime's VM: no compiler needed

    device = req.get("device", "cpu")
    if os.environ.get("ROAM_TVM_KERNELS"):  # a CUDA step built elsewhere: see prebuilt_kernels.py
        from prebuilt_kernels import load_cuda_runtime, use_prebuilt_kernels  # this script's folder

        load_cuda_runtime()
        use_prebuilt_kernels(os.environ["ROAM_TVM_KERNELS"])
    counter = _counter()
    read = _reader(counter, device)
    dev = tvm.cuda(0) if device == "cuda" else tvm.cpu()
    before_load = read("live")
    exe = tvm.runtime.load_module(req["library"])
    vm = VirtualMachine(exe, dev, memory_cfg=req["allocator"])
    fn = vm[req["func"]]
    dev.sync()
    # What loading left live (the module's constants) is reported apart, not in the step's bytes.
    base = read("live")
    free_before = dev.available_global_memory  # None on the CPU (no such statistic)
    with np.load(req["arguments"]) as npz:
        args = [tvm.runtime.tensor(np.array(npz[f"a{i}"], order="C"), dev) for i in range(len(npz.files))]
    dev.sync()
    resident = read("live") - base
    steps = []
    for _ in range(req["steps"]):
        counter.roam_counter_reset_peak()
        out = fn(*args)
        dev.sync()
        peak = read("peak") - base
        with_outputs = read("live") - base
        free_after = dev.available_global_memory
        del out
        steps.append({"peak_bytes": peak, "live_with_outputs_bytes": with_outputs,
                      "retained_bytes": read("live") - base - resident,
                      "allocations": read("count"), "largest_bytes": read("largest"),
                      "device_api_bytes": None if free_before is None else int(free_before - free_after)})
    threads = tvm.get_global_func("runtime.NumThreads")()
    print(json.dumps({"loaded_bytes": base - before_load, "resident_bytes": resident, "steps": steps,
                      "threads": int(threads), "device_name": None if device == "cpu" else str(dev.device_name)}))


if __name__ == "__main__":
    main(sys.argv[1])
