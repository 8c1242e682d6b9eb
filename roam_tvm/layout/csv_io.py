"""Read and write minimalloc-style CSV files: ``id,lower,upper,size[,offset]``.

The header line names the columns (any order, extra whitespace tolerated; an
``alignment`` column is accepted too). Bad input raises :class:`LayoutError`
naming the file and line. Lifespans ``[lower, upper)`` must be non-empty
(``upper > lower``), as in minimalloc. A filled ``offset`` cell fixes that
buffer's offset (see :mod:`.fixed`).
"""
from __future__ import annotations

import io
import os
from typing import TextIO

from .problem import Buffer, LayoutError, Problem, Solution

REQUIRED = ("id", "lower", "upper", "size")
OPTIONAL = ("offset", "alignment")


def _parse(text_lines, name: str, capacity, alignment, lines: dict | None = None) -> Problem:
    header = None
    buffers: list[Buffer] = []
    for lineno, raw in enumerate(text_lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if header is None:
            header = [c.lower() for c in cells]
            missing = [c for c in REQUIRED if c not in header]
            unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
            if missing or unknown:
                raise LayoutError(
                    f"{name}:{lineno}: bad header {line!r}: expected columns id,lower,upper,size[,offset]"
                    + (f"; missing {missing}" if missing else "") + (f"; unknown {unknown}" if unknown else ""))
            if len(set(header)) != len(header):
                raise LayoutError(f"{name}:{lineno}: duplicate column in header {line!r}")
            continue
        if len(cells) != len(header):
            raise LayoutError(f"{name}:{lineno}: expected {len(header)} fields, got {len(cells)}: {line!r}")
        row = dict(zip(header, cells))
        vals = {}
        for k in header:
            if k == "id":
                continue
            v = row[k]
            if k == "offset" and v == "":
                vals[k] = None
                continue
            try:
                vals[k] = int(v)
            except ValueError:
                try:
                    f = float(v)
                except ValueError:
                    f = None
                if f is None or not f.is_integer():
                    raise LayoutError(f"{name}:{lineno}: column {k!r} is not an integer: {v!r}") from None
                vals[k] = int(f)
        if row["id"] == "":
            raise LayoutError(f"{name}:{lineno}: empty id")
        b = Buffer(row["id"], vals["lower"], vals["upper"], vals["size"], vals.get("offset"),
                   vals.get("alignment", 1))
        if b.size < 0:
            raise LayoutError(f"{name}:{lineno}: buffer {b.id!r} has a negative size {b.size}")
        if b.upper <= b.lower:
            raise LayoutError(f"{name}:{lineno}: buffer {b.id!r} has upper {b.upper} <= lower {b.lower}; "
                              "a lifespan [lower, upper) must be non-empty")
        if b.offset is not None and b.offset < 0:
            raise LayoutError(f"{name}:{lineno}: negative offset {b.offset}")
        if b.alignment < 1:
            raise LayoutError(f"{name}:{lineno}: alignment must be >= 1")
        if lines is not None:
            if b.id in lines:
                raise LayoutError(f"{name}:{lineno}: duplicate buffer id {b.id!r} (first on line {lines[b.id]})")
            lines[b.id] = lineno
        buffers.append(b)
    if header is None:
        raise LayoutError(f"{name}: empty file (expected a header id,lower,upper,size)")
    try:
        return Problem(buffers, capacity, alignment)
    except LayoutError as e:
        raise LayoutError(f"{name}: {e}") from None


def read_csv(path_or_file, capacity: int | None = None, alignment: int = 1, lines: dict | None = None) -> Problem:
    """Read a problem. Offsets present in the file are kept on the buffers.

    ``lines``: a dict to fill with each buffer's line number (for messages about rows).
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        name = os.fspath(path_or_file)
        try:
            with open(name, newline="") as f:
                return _parse(f, name, capacity, alignment, lines)
        except OSError as e:
            raise LayoutError(f"cannot read {name}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise LayoutError(f"{name}: not a text CSV file") from None
    return _parse(path_or_file, getattr(path_or_file, "name", "<stream>"), capacity, alignment, lines)


def read_csv_string(text: str, capacity: int | None = None, alignment: int = 1, lines: dict | None = None) -> Problem:
    return _parse(io.StringIO(text), "<string>", capacity, alignment, lines)


def solution_from_problem(problem: Problem) -> Solution:
    """A solution from the offsets stored on the buffers (as read from a CSV)."""
    offs = {b.id: b.offset for b in problem.buffers if b.offset is not None}
    return Solution.from_offsets(problem, offs, "csv")


def write_csv(path_or_file, problem: Problem, solution: Solution | None = None) -> None:
    """Write ``id,lower,upper,size[,offset]`` (offsets from ``solution`` if given)."""
    def emit(f: TextIO) -> None:
        with_align = any(b.alignment != 1 for b in problem.buffers)
        offs = solution.offsets if solution is not None else {
            b.id: b.offset for b in problem.buffers if b.offset is not None}
        with_off = bool(offs)
        cols = ["id", "lower", "upper", "size"] + (["alignment"] if with_align else []) + (["offset"] if with_off else [])
        f.write(",".join(cols) + "\n")
        for b in problem.buffers:
            row = [b.id, str(b.lower), str(b.upper), str(b.size)]
            if with_align:
                row.append(str(b.alignment))
            if with_off:
                o = offs.get(b.id)
                row.append("" if o is None else str(o))
            f.write(",".join(row) + "\n")

    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "w", newline="") as f:
            emit(f)
    else:
        emit(path_or_file)
