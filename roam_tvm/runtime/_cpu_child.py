"""Child process of ``cpu_measure``: run a step under the allocation counter, print JSON.

Run as a script (``python _cpu_child.py REQUEST.json``), with ``LD_PRELOAD`` set to the
counter, so that it imports TVM and numpy only, not roam_tvm (whose planners would
allocate and lengthen the start).
"""
import ctypes
import json
import os
import sys


def _counter() -> ctypes.CDLL:
    lib = ctypes.CDLL(os.environ["ROAM_TVM_COUNTER"])
    for name in ("roam_counter_live", "roam_counter_peak", "roam_counter_count", "roam_counter_largest"):
        getattr(lib, name).restype = ctypes.c_int64
    return lib


def main(request_path: str) -> None:
    with open(request_path, encoding="utf-8") as f:
        req = json.load(f)
    import numpy as np
    import tvm
    from tvm import relax

    counter = _counter()
    before_load = counter.roam_counter_live()
    exe = tvm.runtime.load_module(req["library"])
    vm = relax.VirtualMachine(exe, tvm.cpu(), memory_cfg=req["allocator"])
    fn = vm[req["func"]]
    # What loading left live (the module's constants) is reported apart, not in the step's bytes.
    base = counter.roam_counter_live()
    with np.load(req["arguments"]) as npz:
        args = [tvm.runtime.tensor(np.array(npz[f"a{i}"], order="C"), tvm.cpu()) for i in range(len(npz.files))]
    resident = counter.roam_counter_live() - base
    steps = []
    for _ in range(req["steps"]):
        counter.roam_counter_reset_peak()
        out = fn(*args)
        peak = counter.roam_counter_peak() - base
        with_outputs = counter.roam_counter_live() - base
        del out
        steps.append({"peak_bytes": peak, "live_with_outputs_bytes": with_outputs,
                      "retained_bytes": counter.roam_counter_live() - base - resident,
                      "allocations": counter.roam_counter_count(),
                      "largest_bytes": counter.roam_counter_largest()})
    threads = tvm.get_global_func("runtime.NumThreads")()
    print(json.dumps({"loaded_bytes": base - before_load, "resident_bytes": resident, "steps": steps, "threads": int(threads)}))


if __name__ == "__main__":
    main(sys.argv[1])
