"""Run CUDA steps built on another machine, with TVM's runtime alone.

A library that TVM 0.27 builds for CUDA on a machine without a GPU keeps its kernels as
CUDA C source (format ``cuda``); the CUDA runtime compiles that source when the library is
loaded, through the global function ``tvm_callback_cuda_compile``, which TVM's compiler
package registers. A GPU machine that has only TVM's runtime (no compiler, so nothing that
registers it) can still run such a library when the binaries were compiled where it was
built (``benchmarks/gpu_export.py`` does so with ``nvcc -cubin``):

    >>> load_cuda_runtime()                  # libcudart + libtvm_runtime_cuda, before any module
    >>> use_prebuilt_kernels("/path/kernels")  # <sha256 of the source>.cubin files

The callback answers with the binary whose name is the SHA-256 of the source it is asked
for; a source with no binary there is an error naming the digest and the folder (never a
silent compile with other flags). ``_cpu_child.py`` calls both when ``ROAM_TVM_KERNELS``
names the folder, so measurement children load the same binaries.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import sys

__all__ = ["KERNELS_ENV", "load_cuda_runtime", "use_prebuilt_kernels"]

#: environment variable naming the folder of prebuilt kernels for measurement children
KERNELS_ENV = "ROAM_TVM_KERNELS"


def _cudart_candidates() -> list[str]:
    """Where a CUDA 13 runtime library may be: the CUDA toolkit, then pip's nvidia packages."""
    pats = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libcudart.so.13*"),
            "/usr/local/cuda*/lib*/libcudart.so.13*"]
    pats += [os.path.join(p, "nvidia", "*", "lib", "libcudart.so.13*") for p in sys.path if p]
    found = []
    for pat in pats:
        found += sorted(glob.glob(pat))
    return found


def load_cuda_runtime() -> str:
    """Load ``libcudart.so.13`` (globally) and TVM's CUDA runtime library; the path of the latter.

    TVM's runtime-only import does not load its CUDA library, and that library needs the CUDA
    runtime by soname, which the loader finds only if it is already loaded or on the library path.
    """
    import tvm

    try:
        ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        for path in _cudart_candidates():
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError:
                continue
        else:
            raise OSError("libcudart.so.13 not found (set CUDA_HOME, LD_LIBRARY_PATH, or install the CUDA 13 runtime)")
    lib = os.path.join(os.path.dirname(tvm.__file__), "lib", "libtvm_runtime_cuda.so")
    if not os.path.exists(lib):
        raise OSError(f"TVM's CUDA runtime library is missing: {lib}")
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    return lib


def use_prebuilt_kernels(folder: str) -> None:
    """Register ``tvm_callback_cuda_compile`` to answer with ``folder/<sha256>.cubin``."""
    import tvm_ffi

    folder = os.path.abspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"no prebuilt kernel folder {folder}")

    def compile_from_cache(code, *_target) -> bytes:
        text = code if isinstance(code, str) else bytes(code).decode()
        digest = hashlib.sha256(text.encode()).hexdigest()
        path = os.path.join(folder, f"{digest}.cubin")
        if not os.path.exists(path):
            raise FileNotFoundError(f"no prebuilt kernels for source {digest} in {folder}: build the step with "
                                    "benchmarks/gpu_export.py, which compiles them")
        with open(path, "rb") as f:
            return f.read()

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", compile_from_cache, override=True)
