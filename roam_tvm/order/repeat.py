"""Structural hashing of pieces, so repeated pieces are solved once.

Two pieces get the same key when their ops have the same kinds and names up to
digits (``fwd12`` ~ ``fwd13``), the same workspaces, the same local dependency
structure and the same tensors (size, local users, boundary flags), in their
current local order. The constant live bytes are left out: adding a constant to
every step does not change which order is best. A cached order is re-checked
(valid, not worse) before it is used, so a collision can never do harm.
"""
from __future__ import annotations

import hashlib
import re

from .piece import Piece

__all__ = ["piece_key"]

_DIGITS = re.compile(r"\d+")


def piece_key(piece: Piece) -> str:
    """A canonical hash of the piece's structure (see module docstring)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr([_DIGITS.sub("#", lab) for lab in piece.labels]).encode())
    h.update(repr(piece.ws).encode())
    h.update(repr(piece.preds).encode())
    h.update(repr(sorted((s, tuple(u), b, a) for s, u, b, a in piece.tensors)).encode())
    return h.hexdigest()
