"""The one place that turns human size strings into exact byte counts.

Sizes are exact to the byte: "3.8GiB" is 3.8 * 2**30 bytes (rounded to the nearest
byte, because a fraction of a byte cannot be written), never rounded to MiB.  The old
study's scripts called bytes "MB"; here every unit means what its SI/IEC symbol says.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
    "KI": 2**10,
    "MI": 2**20,
    "GI": 2**30,
    "TI": 2**40,
}

# rclone and split read a bare M as MiB, most other tools as MB: refused, never guessed.
AMBIGUOUS = ("K", "M", "G", "T")
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


class SizeError(ValueError):
    """A size string that cannot be read as a byte count."""


def parse_size(value: str | int) -> int:
    """Return the exact number of bytes that ``value`` names.

    Integers pass through.  Strings take a decimal number and an optional unit
    (B, KB/MB/GB/TB = powers of 1000, KiB/MiB/GiB/TiB = powers of 1024; case-insensitive).
    """
    if isinstance(value, bool):
        raise SizeError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise SizeError(f"size must not be negative: {value}")
        return value
    if isinstance(value, float):
        raise SizeError(f"give sizes as strings or whole bytes, not a float: {value!r}")
    match = _SIZE_RE.match(str(value))
    if not match:
        raise SizeError(f"not a size: {value!r} (expected e.g. 3.8GiB, 100MB, 104857601)")
    number, unit = match.groups()
    if unit.upper() in AMBIGUOUS:
        raise SizeError(
            f"{value}: write {number}{unit.upper()}iB or {number}{unit.upper()}B "
            f"(a bare {unit} means 2^n to rclone and split, 10^n to others)"
        )
    factor = UNITS.get(unit.upper())
    if factor is None:
        raise SizeError(
            f"unknown size unit {unit!r} in {value!r} (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    try:
        exact = Decimal(number) * factor
    except InvalidOperation as err:  # pragma: no cover - the regex already rules this out
        raise SizeError(f"not a size: {value!r}") from err
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))


def size_label(n: int) -> str:
    """An exact, reversible label for file names and figures: ``64MiB``, or ``104857601B``.

    Only exact IEC multiples get a unit, so ``parse_size(size_label(n)) == n`` always holds
    and two different chunk sizes can never share a directory name.
    """
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(value: str | int | float) -> float:
    """Seconds named by ``value``: a number of seconds, or a number with s, m or h."""
    if isinstance(value, bool):
        raise SizeError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        unit = text[-1:].lower()
        try:
            seconds = float(text[:-1]) * _DURATION_UNITS[unit]
        except (KeyError, ValueError):
            raise SizeError(f"not a duration: {value!r} (expected e.g. 90s, 30m, 6h)") from None
    if seconds <= 0:
        raise SizeError(f"a duration must be positive: {value!r}")
    return seconds
