"""Byte budgets as the command line spells them (no TVM).

``--budget N`` takes either

* a byte count: an integer, or a number with a binary suffix ``KiB``, ``MiB``
  or ``GiB`` (``8GiB``, ``1.5 MiB``; an optional trailing ``B`` alone means
  bytes), rounded *down* to whole bytes so a budget is never loosened; or
* a fraction in (0, 1] with no suffix (``0.6``, ``1``): a share of roam's
  unbudgeted peak, resolved later by :func:`resolve_budget`.

A plain ``1`` is the fraction 1 (the unbudgeted peak), not one byte: the range
(0, 1] is reserved for fractions. Decimal suffixes (``GB``) are rejected
rather than guessed, since 8 GB and 8 GiB differ by 7%.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["Budget", "parse_budget", "resolve_budget", "format_bytes"]

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
_PATTERN = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class Budget:
    """A parsed budget: exactly one of ``bytes`` and ``fraction`` is set.

    Attributes
    ----------
    bytes : int or None
        An absolute budget in bytes.
    fraction : float or None
        A share in (0, 1] of the unbudgeted peak.
    text : str
        What the user wrote (for messages).
    """

    bytes: int | None = None
    fraction: float | None = None
    text: str = ""


def parse_budget(text: str) -> Budget:
    """Parse ``--budget``'s argument.

    Parameters
    ----------
    text : str
        ``"123456"``, ``"8GiB"``, ``"512 MiB"``, ``"0.6"``, ``"1"``.

    Returns
    -------
    Budget

    Raises
    ------
    ValueError
        On anything else, saying which forms are accepted.
    """
    hint = ("use a byte count (e.g. 8589934592, 8GiB, 512MiB, 64KiB) or a fraction in (0, 1] "
            "of roam's unbudgeted peak (e.g. 0.6)")
    if not isinstance(text, str):
        raise ValueError(f"budget must be a string, got {type(text).__name__}; {hint}")
    m = _PATTERN.match(text)
    if not m:
        raise ValueError(f"cannot read budget {text!r}; {hint}")
    number, unit = m.group(1), m.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(f"unknown unit {m.group(2)!r} in budget {text!r}; only the binary suffixes "
                         f"KiB, MiB, GiB (and B) are accepted; {hint}")
    value = float(number)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"budget {text!r} must be positive; {hint}")
    if unit == "":
        if value <= 1:
            return Budget(fraction=value, text=text)
        if not value.is_integer():
            raise ValueError(f"budget {text!r} is neither a whole number of bytes nor a fraction in "
                             f"(0, 1]; {hint}")
        return Budget(bytes=int(number.split(".")[0]), text=text)
    nbytes = _exact_floor(number, _UNITS[unit])
    if nbytes < 1:
        raise ValueError(f"budget {text!r} is less than one byte; {hint}")
    return Budget(bytes=nbytes, text=text)


def _exact_floor(number: str, scale: int) -> int:
    """``floor(number * scale)`` without float rounding (``number`` is a decimal string)."""
    whole, _, frac = number.partition(".")
    frac = frac or ""
    num = int((whole or "0") + frac) * scale
    return num // (10 ** len(frac))


def resolve_budget(budget: Budget | str | int, unbudgeted_peak: int) -> int:
    """Bytes of a budget; a fraction is taken of ``unbudgeted_peak`` and rounded down.

    Parameters
    ----------
    budget : Budget, str or int
        A parsed budget, a string for :func:`parse_budget`, or bytes.
    unbudgeted_peak : int
        Roam's peak without a budget (bytes), the base of a fraction.

    Returns
    -------
    int
    """
    if isinstance(budget, bool):
        raise ValueError("budget must be a byte count, a fraction string or a Budget, not a bool")
    if isinstance(budget, int):
        if budget < 1:
            raise ValueError(f"budget must be at least one byte, got {budget}")
        return budget
    if isinstance(budget, str):
        budget = parse_budget(budget)
    if budget.bytes is not None:
        return budget.bytes
    if unbudgeted_peak < 1:
        raise ValueError(f"cannot take a fraction of an unbudgeted peak of {unbudgeted_peak} bytes")
    return max(1, math.floor(budget.fraction * unbudgeted_peak))


def format_bytes(n: int) -> str:
    """``n`` bytes in a human unit, with the exact count: ``'1.50 MiB (1572864 B)'``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit} ({n} B)"
    return f"{n} B"
