"""The device half of the allocation counter, and measure_step on CUDA.

Without a GPU the counter's ``cudaMalloc``/``cudaFree`` wrappers are checked against a
stand-in CUDA runtime (``libfakecudart``, built here with ``cc``) called from another
library, the way TVM's ``libtvm_runtime_cuda.so`` calls libcudart: the bytes expected are
the sizes the test asks for. On a GPU, ``measure_cuda_step`` runs a real CUDA build.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from roam_tvm.runtime.cpu_measure import counter_library, measure_cuda_step, measure_step  # noqa: E402
from roam_tvm.runtime.measure import CudaUnavailable, cuda_available  # noqa: E402

CUDA = cuda_available()
CC = shutil.which("cc") or shutil.which("gcc")

_FAKE_CUDART = """
#include <stdlib.h>
int cudaMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); return 0; }
int cudaFree(void *p) { free(p); return 0; }
"""
_CONSUMER = """
#include <stddef.h>
int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
void *take(size_t n) { void *p = 0; cudaMalloc(&p, n); return p; }
void give(void *p) { cudaFree(p); }
"""
_DRIVER = """
import ctypes, json, os, sys
counter = ctypes.CDLL(os.environ["ROAM_TVM_COUNTER"])
for n in ("live", "peak", "count", "largest"):
    getattr(counter, "roam_counter_device_" + n).restype = ctypes.c_int64
    getattr(counter, "roam_counter_" + n).restype = ctypes.c_int64
lib = ctypes.CDLL(sys.argv[1])
lib.take.restype = ctypes.c_void_p
lib.take.argtypes = [ctypes.c_size_t]
lib.give.argtypes = [ctypes.c_void_p]
host0 = counter.roam_counter_live()
counter.roam_counter_reset_peak()
a = lib.take(1000); b = lib.take(300000)
live2 = counter.roam_counter_device_live()
lib.give(b)
c = lib.take(5000)
print(json.dumps({"live2": live2, "live_end": counter.roam_counter_device_live(),
                  "peak": counter.roam_counter_device_peak(), "count": counter.roam_counter_device_count(),
                  "largest": counter.roam_counter_device_largest(),
                  "host_delta": counter.roam_counter_live() - host0}))
"""


@pytest.mark.skipif(CC is None or not sys.platform.startswith("linux"), reason="needs cc and LD_PRELOAD (Linux)")
def test_counter_counts_cuda_malloc_called_from_another_library(tmp_path):
    for name, src in (("fake.c", _FAKE_CUDART), ("consumer.c", _CONSUMER), ("driver.py", _DRIVER)):
        (tmp_path / name).write_text(textwrap.dedent(src))
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(tmp_path / "libfakecudart.so"), str(tmp_path / "fake.c")],
                   check=True)
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(tmp_path / "libconsumer.so"), str(tmp_path / "consumer.c"),
                    f"-L{tmp_path}", "-lfakecudart", f"-Wl,-rpath,{tmp_path}"], check=True)
    counter = counter_library()
    env = dict(os.environ, LD_PRELOAD=counter, ROAM_TVM_COUNTER=counter)
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "libconsumer.so")],
                          env=env, capture_output=True, text=True, check=True, timeout=120)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["live2"] == 1000 + 300000
    assert got["live_end"] == 1000 + 5000
    assert got["peak"] == 1000 + 300000
    assert got["count"] == 3 and got["largest"] == 300000
    assert got["host_delta"] == 0  # device bytes are not host bytes (the stand-in uses plain malloc)


def test_measure_step_rejects_an_unknown_device():
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        measure_step(None, [], "main", device="tpu")


def test_measure_cuda_step_without_gpu_says_why():
    if CUDA:
        pytest.skip("a GPU is present")
    with pytest.raises(CudaUnavailable, match="CUDA"):
        measure_cuda_step(None, [np.zeros(4, "float32")], "main")


N, M = 1000, 999


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason=f"needs a CUDA GPU: {CUDA.reason}")
def test_measure_cuda_step_counts_arguments_and_output():
    from tvm import relax

    from roam_tvm.runtime import build
    from roam_tvm.runtime.targets import cuda_target_for_device

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((N, M), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.sum(relax.op.multiply(x, relax.const(2.0, "float32")), axis=[1]))
        bb.emit_func_output(out)
    exe = build(bb.get(), cuda_target_for_device(), order=False, layout=False)
    args = [np.ones((N, M), "float32")]
    naive = measure_cuda_step(exe, args, "main", allocator="naive", steps=2)
    assert naive.device == "cuda" and naive.device_name
    assert naive.resident_bytes == N * M * 4  # the argument, byte for byte
    assert naive.peak_bytes >= N * M * 4 + N * 4  # argument and output at least
    pooled = measure_cuda_step(exe, args, "main", allocator="pooled", steps=2)
    # the pool keeps every storage, so the driver saw at least the counted high-water mark
    assert pooled.device_api_bytes[-1] >= pooled.peak_bytes
