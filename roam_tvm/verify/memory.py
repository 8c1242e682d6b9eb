"""Abstract byte store for the plan checker: storages, allocations, views and value tokens.

Every byte range of every storage carries the token of the value last written there. Tokens are
content-addressed integers (see :class:`Tokens`), so the same computation gets the same token in the
reference and in the planned program whatever the binding order or the variable names.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Optional


class Unmodelled(Exception):
    """Raised by the executor for a construct the checker has no model for ("cannot verify")."""


class Tokens:
    """Hash-consing table: a structural key -> a small integer, shared by both runs of one check.

    Interning keeps token comparison O(1) however deep the computation is (nested keys would be
    hashed again and again, and shared sub-computations would blow up exponentially).
    """

    UNINIT = 0

    def __init__(self) -> None:
        self._ids: dict = {("uninit",): self.UNINIT}
        self._desc: dict[int, str] = {self.UNINIT: "uninitialised bytes"}

    def get(self, key: tuple, desc: str) -> int:
        tok = self._ids.get(key)
        if tok is None:
            tok = len(self._ids)
            self._ids[key] = tok
            self._desc[tok] = desc
        return tok

    def describe(self, tok: int) -> str:
        return self._desc.get(tok, f"token {tok}")


@dataclass
class Storage:
    """One allocation of raw memory: a fresh ``alloc_tensor`` or an ``alloc_storage``."""

    sid: int
    name: str
    size: Optional[int]  # bytes; None = exactly the one tensor it was made for
    device: int
    readonly: bool = False
    killed: bool = False
    # sorted, non-overlapping segments: parallel lists, one entry per segment
    starts: list = field(default_factory=list)
    ends: list = field(default_factory=list)
    toks: list = field(default_factory=list)  # (token, write_start, write_end, writer label)

    def write(self, lo: int, hi: int, tok: int, label: str) -> None:
        """Overwrite bytes [lo, hi) with ``tok``; segments sticking out of the range keep their ends."""
        if hi <= lo:
            return
        i = bisect.bisect_right(self.ends, lo)
        new_s, new_e, new_t = [], [], []
        j = i
        while j < len(self.starts) and self.starts[j] < hi:
            s, e, t = self.starts[j], self.ends[j], self.toks[j]
            if s < lo:
                new_s.append(s), new_e.append(lo), new_t.append(t)
            if e > hi:
                new_s.append(hi), new_e.append(e), new_t.append(t)
            j += 1
        seg = [(lo, hi, (tok, lo, hi, label))]
        seg += list(zip(new_s, new_e, new_t))
        seg.sort(key=lambda x: x[0])
        self.starts[i:j] = [x[0] for x in seg]
        self.ends[i:j] = [x[1] for x in seg]
        self.toks[i:j] = [x[2] for x in seg]

    def pieces(self, lo: int, hi: int) -> list:
        """(start, end, (token, write_start, write_end, writer)) covering [lo, hi); gaps are None."""
        out = []
        pos = lo
        i = bisect.bisect_right(self.ends, lo)
        while i < len(self.starts) and self.starts[i] < hi:
            s, e = max(self.starts[i], lo), min(self.ends[i], hi)
            if s > pos:
                out.append((pos, s, None))
            out.append((s, e, self.toks[i]))
            pos = e
            i += 1
        if pos < hi:
            out.append((pos, hi, None))
        return out


@dataclass
class Root:
    """One allocation object (the tensor an alloc op returns); views share their root.

    Contents are defined only for the bytes written *through this root*: bytes it never wrote read as
    uninitialised, whatever stale data the storage holds (an allocation's initial contents are
    unspecified in both programs).
    """

    rid: int
    name: str
    written: list = field(default_factory=list)  # merged [lo, hi) intervals, absolute in the storage

    def mark(self, lo: int, hi: int) -> None:
        ivs = sorted(self.written + [(lo, hi)])
        merged = [list(ivs[0])]
        for a, b in ivs[1:]:
            if a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.written = [tuple(x) for x in merged]

    def is_written(self, lo: int, hi: int) -> list:
        """Sub-ranges of [lo, hi) this root has written."""
        out = []
        for a, b in self.written:
            a, b = max(a, lo), min(b, hi)
            if a < b:
                out.append((a, b))
        return out


@dataclass
class TensorVal:
    """A tensor value: a byte range of a storage seen as ``shape``/``dtype``, reached through ``root``."""

    storage: Storage
    root: Root
    offset: int
    nbytes: int
    shape: tuple
    dtype: str
    oid: int  # object identity, for kill_tensor / kill_object

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass
class StorageVal:
    """A storage object as a Relax value (result of ``alloc_storage``)."""

    storage: Storage
    oid: int


@dataclass
class Opaque:
    """Any non-memory value (shape, prim value, string, dtype, extern result): its token only."""

    tok: int
    ints: Optional[tuple] = None  # concrete values of a shape / prim value, when known
    oid: int = -1


def overlaps(a: TensorVal, b: TensorVal) -> bool:
    return a.storage is b.storage and a.offset < b.end and b.offset < a.end


def read_token(tokens: Tokens, t: TensorVal) -> tuple[int, str]:
    """Token of the value a read of ``t`` sees, and a description of its bytes (for messages)."""
    pieces = []
    for s, e, seg in t.storage.pieces(t.offset, t.end):
        for a, b in _split_by_written(t.root, s, e):
            if not b[1] or seg is None:
                pieces.append((a, b[0], None))
            else:
                pieces.append((a, b[0], seg))
    # merge adjacent uninitialised pieces
    merged = []
    for a, b, seg in pieces:
        if merged and seg is None and merged[-1][2] is None:
            merged[-1] = (merged[-1][0], b, None)
        else:
            merged.append((a, b, seg))
    if t.nbytes == 0 or (len(merged) == 1 and merged[0][2] is None):
        return Tokens.UNINIT, "uninitialised bytes (never written through this allocation)"
    if len(merged) == 1:
        tok, ws, we, who = merged[0][2]
        if ws == t.offset and we == t.end:
            desc = tokens.describe(tok)
            return tok, desc if who in desc else f"{desc} (written by `{who}`)"
    key, parts = [], []
    for a, b, seg in merged:
        rel = (a - t.offset, b - t.offset)
        if seg is None:
            key.append((rel, Tokens.UNINIT, 0, 0))
            parts.append(f"[{rel[0]},{rel[1]}) uninitialised")
        else:
            tok, ws, we, who = seg
            key.append((rel, tok, a - ws, we - ws))
            parts.append(f"[{rel[0]},{rel[1]}) from {tokens.describe(tok)} written by `{who}`")
    desc = "mixed bytes: " + "; ".join(parts[:4]) + ("; ..." if len(parts) > 4 else "")
    return tokens.get(("mix", tuple(key)), desc), desc


def _split_by_written(root: Root, lo: int, hi: int) -> list:
    """[lo, hi) cut into (start, (end, written_by_root))."""
    out, pos = [], lo
    for a, b in root.is_written(lo, hi):
        if a > pos:
            out.append((pos, (a, False)))
        out.append((a, (b, True)))
        pos = b
    if pos < hi:
        out.append((pos, (hi, False)))
    return out
