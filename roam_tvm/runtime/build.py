"""Build a training module for llvm or CUDA with the roam pipeline; export; check kernels.

On a machine without a CUDA driver, TVM 0.27 still builds for CUDA: the device module
then holds CUDA C source (the fallback module) instead of a cubin/fatbin.
``compile_cuda_kernels`` extracts that source and runs ``nvcc -cubin`` on it, so tests
can verify that the generated kernels really compile.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

import tvm
from tvm import relax

from .pipeline import pipeline
from .targets import as_target, cuda_target

logger = logging.getLogger(__name__)

__all__ = [
    "cuda_target",
    "resolve_target",
    "build",
    "export",
    "cuda_source",
    "nvcc_path",
    "compile_cuda_kernels",
    "NvccResult",
]

def resolve_target(target) -> tvm.target.Target:
    """"llvm" -> llvm Target; "cuda" -> cuda_target(); a Target passes through."""
    return as_target(target)


def build(
    mod: tvm.ir.IRModule,
    target="llvm",
    order: bool = True,
    layout: bool = True,
    **options,
) -> relax.VMExecutable:
    """Compile ``mod`` with ``pipeline(target, order, layout, **options)``.

    Returns a ``relax.VMExecutable`` (load with ``relax.VirtualMachine(exe, dev)``).
    options are routed as in ``pipeline`` (``order_*``/``layout_*``/``schedule``);
    ``tir_pipeline=...`` is passed to ``tvm.compile``.
    """
    target = resolve_target(target)
    tir_pipeline = options.pop("tir_pipeline", "default")
    t0 = time.perf_counter()
    exe = tvm.compile(
        mod,
        target,
        relax_pipeline=pipeline(target, order=order, layout=layout, **options),
        tir_pipeline=tir_pipeline,
    )
    logger.info(
        "build(%s, order=%s, layout=%s): %.2fs", target.kind.name, order, layout, time.perf_counter() - t0
    )
    return exe


def export(exe, path: str | os.PathLike, **kwargs) -> str:
    """Export an executable as a shared library (``.so``) loadable by ``tvm.runtime.load_module``."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    exe.export_library(path, **kwargs)
    return path


# --------------------------------------------------------------------------- CUDA kernels
def _modules(mod):
    seen = []
    stack = [mod]
    while stack:
        m = stack.pop()
        if any(m.same_as(s) for s in seen):
            continue
        seen.append(m)
        stack.extend(list(m.imports))
    return seen


def cuda_source(exe_or_mod, target=None) -> str:
    """The CUDA C source of all kernels of an executable / runtime module / IRModule.

    For a ``relax.VMExecutable`` or ``tvm.runtime.Module`` the imported CUDA module's
    source is read (``inspect_source("cu")``). For an ``IRModule`` (scheduled TIR or
    a Relax module) the module is built first for ``target`` (default cuda_target()).
    """
    if isinstance(exe_or_mod, tvm.ir.IRModule):
        target = cuda_target() if target is None else resolve_target(target)
        has_relax = any(isinstance(f, relax.Function) for f in exe_or_mod.functions.values())
        if has_relax:
            exe_or_mod = build(exe_or_mod, target, order=False, layout=False)
        else:
            exe_or_mod = tvm.tirx.build(exe_or_mod, target=target)
    rt_mod = exe_or_mod.mod if hasattr(exe_or_mod, "mod") else exe_or_mod
    sources = []
    for m in _modules(rt_mod):
        if m.kind == "cuda":
            src = _inspect(m, "cuda") or _inspect(m, "cu") or _inspect(m, "")
            if src:
                sources.append(src)
    if not sources:
        raise ValueError(
            "no CUDA module with source found (kinds: "
            f"{[m.kind for m in _modules(rt_mod)]}); was it built for cuda?"
        )
    return "\n".join(sources)


def _inspect(m, fmt: str) -> str:
    for getter in ("inspect_source", "get_source"):
        fn = getattr(m, getter, None)
        if fn is None:
            continue
        try:
            src = fn(fmt)
        except Exception:  # pylint: disable=broad-except
            continue
        if src and "__global__" in src:
            return src
    return ""


def nvcc_path() -> str | None:
    """Path of nvcc ($CUDA_HOME/bin, /usr/local/cuda/bin or PATH), or None."""
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base:
            cand = os.path.join(base, "bin", "nvcc")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    return shutil.which("nvcc")


_KERNEL_RE = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\(\s*\d+\s*\)\s+)?(\w+)\s*\(")


def kernel_names(src: str) -> list[str]:
    """Names of the __global__ kernels in CUDA source (declarations and definitions merged)."""
    return sorted(set(_KERNEL_RE.findall(src)))


@dataclass
class NvccResult:
    """What ``compile_cuda_kernels`` did."""

    cubin: bytes
    kernels: int
    source_bytes: int
    seconds: float
    command: list[str]


def compile_cuda_kernels(
    exe_or_mod, arch: str = "sm_90a", workdir: str | None = None, extra_flags=()
) -> NvccResult:
    """Extract the CUDA C source of a build and compile it with ``nvcc -cubin -arch=<arch>``.

    Raises RuntimeError with nvcc's output if compilation fails, FileNotFoundError if
    nvcc is missing.
    """
    src = cuda_source(exe_or_mod)
    nvcc = nvcc_path()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found (set CUDA_HOME or put nvcc on PATH)")
    own_dir = workdir is None
    workdir = tempfile.mkdtemp(prefix="roam_nvcc_") if own_dir else workdir
    try:
        cu = os.path.join(workdir, "kernels.cu")
        out = os.path.join(workdir, "kernels.cubin")
        with open(cu, "w", encoding="utf-8") as fh:
            fh.write(src)
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-O3", "-o", out, cu, *extra_flags]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        secs = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(
                f"nvcc failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-4000:]}"
            )
        with open(out, "rb") as fh:
            cubin = fh.read()
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    kernels = len(kernel_names(src))
    return NvccResult(cubin=cubin, kernels=kernels, source_bytes=len(src), seconds=secs, command=cmd)
