"""The compiled kernel of the layout search (``_search.c``), built on first use.

The branch-and-bound in :mod:`.search` spends all its time in per-node work
that Python runs at a few thousand nodes a second; the hard MiniMalloc
instances need millions. ``_search.c`` is the same search compiled. It is
built once per source version with the system C compiler (``$CC``, else
``cc``) into ``$ROAM_TVM_CACHE`` (default ``~/.cache/roam_tvm``) and loaded
with ctypes. Where no compiler works, :func:`available` is False and the
search stays in Python; ``ROAM_TVM_NATIVE=0`` forces that.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_search.c")
FOUND, INFEASIBLE, NODE_LIMIT, TIME_LIMIT = 1, 0, -1, -2
MEMO_SLOTS = 1 << 21  # 16 MiB of refutation hashes per search

_lib: ctypes.CDLL | None = None
_tried = False
_why = ""


def cache_dir() -> str:
    return os.environ.get("ROAM_TVM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "roam_tvm")


def _build() -> str:
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    path = os.path.join(cache_dir(), f"roam_search_{digest}_{sys.platform}.so")
    if os.path.exists(path):
        return path
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise OSError("no C compiler found (set CC)")
    os.makedirs(cache_dir(), exist_ok=True)
    # build beside the target and rename: concurrent first uses never load a half-written file
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=cache_dir())
    os.close(fd)
    try:
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, SOURCE], check=True,
                       capture_output=True, text=True, timeout=120)
        os.replace(tmp, path)
    except subprocess.CalledProcessError as e:
        raise OSError(f"{cc} failed: {e.stderr.strip()[:500]}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _load() -> ctypes.CDLL | None:
    global _lib, _tried, _why
    if _tried:
        return _lib
    _tried = True
    if os.environ.get("ROAM_TVM_NATIVE", "1") == "0":
        _why = "disabled by ROAM_TVM_NATIVE=0"
        return None
    try:
        lib = ctypes.CDLL(_build())
    except (OSError, subprocess.SubprocessError) as e:
        _why = str(e)
        return None
    p64, p32 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32)
    lib.roam_search.restype = ctypes.c_int
    lib.roam_search.argtypes = [ctypes.c_int, ctypes.c_int, p64, p64, p64, p64, p64, ctypes.c_char_p, ctypes.c_int,
                                ctypes.c_int64,
                                p64, p32,
                                p32, p32, p32, p32, p64, p64, ctypes.c_int64, ctypes.c_double,
                                ctypes.POINTER(ctypes.c_uint64), ctypes.c_int64, p64, p64]
    lib.roam_skyline.restype = ctypes.c_int
    lib.roam_skyline.argtypes = [ctypes.c_int, ctypes.c_int, p64, p64, p64, p64, p64, p64, ctypes.c_double]
    _lib = lib
    return _lib


def available() -> bool:
    """True if the compiled kernel could be built and loaded."""
    return _load() is not None


def unavailable_reason() -> str:
    _load()
    return _why


def _csr(lists: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, np.int32)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.concatenate(lists).astype(np.int32) if lists and ptr[-1] else np.zeros(1, np.int32)
    return ptr, np.ascontiguousarray(idx)


class Tables:
    """The CSR tables of one search group, built once and reused for every capacity."""

    def __init__(self, sub) -> None:
        self.nbr_ptr, self.nbr_idx = _csr(sub.nbrs)
        self.sec_ptr, self.sec_idx = _csr([row[row < sub.m] for row in sub.members])  # rows padded with m
        self.arrays = [np.ascontiguousarray(a, np.int64) for a in (sub.sl, sub.su, sub.size, sub.align, sub.length)]
        self.total0 = np.ascontiguousarray(sub.total0, np.int64)
        self.cuts0 = np.ascontiguousarray(sub.cuts0, np.int64)


def search(sub, tables: Tables, rank: np.ndarray, twin: np.ndarray, capacity: int, node_limit: int,
           seconds: float, memo: np.ndarray | None, key: str | None = None, energetic: bool = True,
           unallocated_floor: bool = True) -> tuple[int, np.ndarray, int]:
    """Run the compiled search once: (status, offsets, nodes).

    ``memo``: uint64 slots (a power of two) or None; ``key``: the preorder key
    string, used to re-rank subproblems split off by a decomposition;
    ``energetic`` / ``unallocated_floor``: the two costly pruning tests
    (:class:`~roam_tvm.layout.search.SearchParams` ``suffix_check`` / ``unallocated_floor``).
    """
    lib = _load()
    if lib is None:
        raise RuntimeError(f"native search unavailable: {_why}")
    p64 = ctypes.POINTER(ctypes.c_int64)
    p32 = ctypes.POINTER(ctypes.c_int32)

    def ptr(a, t):
        return a.ctypes.data_as(t)
    rank = np.ascontiguousarray(rank, np.int64)
    twin = np.ascontiguousarray(twin, np.int32)
    out = np.zeros(max(sub.m, 1), np.int64)
    nodes = np.zeros(1, np.int64)
    if memo is None:
        memo_arr, slots = np.zeros(1, np.uint64), 0
    else:
        memo_arr, slots = memo, len(memo)
    sl, su, size, align, length = tables.arrays
    status = lib.roam_search(sub.m, sub.nsec, ptr(sl, p64), ptr(su, p64), ptr(size, p64), ptr(align, p64),
                             ptr(length, p64), (key or "").encode(), int(energetic) | 2 * int(unallocated_floor), int(capacity), ptr(rank, p64),
                             ptr(twin, p32), ptr(tables.nbr_ptr, p32), ptr(tables.nbr_idx, p32), ptr(tables.sec_ptr, p32), ptr(tables.sec_idx, p32),
                             ptr(tables.total0, p64), ptr(tables.cuts0, p64), int(node_limit), float(seconds),
                             memo_arr.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), slots,
                             ptr(out, p64), ptr(nodes, p64))
    return status, out[:sub.m], int(nodes[0])


def skyline(lower: np.ndarray, upper: np.ndarray, size: np.ndarray, align: np.ndarray, rank: np.ndarray,
            seconds: float) -> np.ndarray | None:
    """Bottom-up skyline placement (compiled): offsets, or None past ``seconds``.

    Repeatedly places the unplaced buffer whose lowest feasible offset (the top
    of the skyline over its lifespan) is least, ties by ``rank``, there.
    Every buffer rests on the skyline, so the layout is valid by construction.
    """
    lib = _load()
    if lib is None:
        raise RuntimeError(f"native kernel unavailable: {_why}")
    lower = np.asarray(lower, np.int64)
    upper = np.asarray(upper, np.int64)
    pts = np.unique(np.concatenate((lower, upper)))
    sl = np.ascontiguousarray(np.searchsorted(pts, lower), np.int64)
    su = np.ascontiguousarray(np.searchsorted(pts, upper), np.int64)
    arrays = [np.ascontiguousarray(a, np.int64) for a in (size, align, rank)]
    out = np.zeros(max(len(sl), 1), np.int64)
    p64 = ctypes.POINTER(ctypes.c_int64)
    status = lib.roam_skyline(len(sl), max(len(pts) - 1, 1), sl.ctypes.data_as(p64), su.ctypes.data_as(p64),
                              *(a.ctypes.data_as(p64) for a in arrays), out.ctypes.data_as(p64), float(seconds))
    return out[:len(sl)] if status == 1 else None
