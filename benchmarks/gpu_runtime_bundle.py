"""Make the runtime-only TVM that benchmarks/gpu_run.py runs with on a GPU machine.

    python benchmarks/gpu_runtime_bundle.py --out .devrt --wheels .whl --python-version 3.12

Copies this machine's ``tvm`` package without its compiler library (``lib/libtvm_compiler.so``, about
250 MB) and without the Python packages only the compiler uses (``relax``, ``topi``, ``s_tir``,
``web``), about 10 MB in all, into ``--out``; and downloads ``apache-tvm-ffi`` of this machine's
version, built for the GPU machine's Python, into ``--wheels`` (pip needs an index for that).
On the GPU machine::

    pip install --no-index --no-deps --target /tmp/site .whl/*.whl
    TVM_USE_RUNTIME_LIB=1 PYTHONPATH=$PWD/.devrt:/tmp/site:$PWD python benchmarks/gpu_run.py .gpu --out R.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

# packages of tvm that only the compiler imports (runtime-only ``import tvm`` works without them)
COMPILER_ONLY = ("relax", "topi", "s_tir", "web", "3rdparty", "src")


def copy_runtime(out: str) -> int:
    """Copy the ``tvm`` package without the compiler into ``out/tvm``; the bytes copied."""
    import tvm

    src = os.path.dirname(tvm.__file__)
    dst = os.path.join(out, "tvm")
    if os.path.exists(dst):
        shutil.rmtree(dst)
    skip = {os.path.join(src, name) for name in COMPILER_ONLY} | {os.path.join(src, "lib", "libtvm_compiler.so")}

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if os.path.join(folder, n) in skip or n == "__pycache__"]

    shutil.copytree(src, dst, ignore=ignore)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dst) for f in fs)


def download_ffi(wheels: str, python_version: str) -> None:
    """``apache-tvm-ffi`` of this machine's version, for the GPU machine's Python (manylinux x86-64)."""
    from importlib.metadata import version

    os.makedirs(wheels, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
           python_version, "--implementation", "cp", "-d", wheels,
           *[a for p in ("manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64")
             for a in ("--platform", p)], f"apache-tvm-ffi=={version('apache-tvm-ffi')}"]
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".devrt", help="folder for the runtime-only tvm package")
    ap.add_argument("--wheels", default=".whl", help="folder for the tvm_ffi wheel")
    ap.add_argument("--python-version", default="3.12", help="the GPU machine's Python (major.minor)")
    args = ap.parse_args(argv)
    size = copy_runtime(args.out)
    print(f"runtime-only tvm: {size / 2**20:.1f} MiB in {args.out}/tvm", flush=True)
    download_ffi(args.wheels, args.python_version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
