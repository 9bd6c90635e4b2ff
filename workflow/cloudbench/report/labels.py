"""How the report names and orders things, in figures and tables alike (no plotting library).

Layouts in one order (plain, chunked by chunk size, multithread), numbers in one style: on
the first screen and in the tables every rate in MB/s with one decimal (:func:`rate`: 4.2
beside 16.3, not 4.15 beside 16.3), every factor with two after a ``×`` (:func:`factor`:
×3.88, ×0.99), every interval followed by its coverage (:func:`with_interval`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cloudbench.intervals import (
    MIN_REPEATS_FOR_INTERVAL,
    level_text,
    median_interval,
    ratio_interval,
)
from cloudbench.sizes import SizeError, parse_size

NA = "–"  # a value that does not exist (no interval, no rate), in every figure and table
DIRECTIONS = ["upload", "download"]
RATE_UNIT = "(MB/s = 10⁶ B/s)"  # not mathtext: parsing it was 6% of a report's CPU
RATE_LABEL = f"rate {RATE_UNIT}"  # every rate axis and rate column


def _layout_key(label: str) -> tuple[int, float, tuple[str, int, int], str]:
    """plain, chunked by size, multithread, the rest; a setting after the layout (``plain
    rclone-4x32``, campaigns that sweep) orders by tool, clients, then concurrency."""
    base, _, setting = label.partition(" ")
    m = re.match(r"^([a-z0-9]+)-(\d+)x(\d+|auto)$", setting)
    order = (
        (m.group(1), int(m.group(2)), int(m.group(3)) if m.group(3).isdigit() else 0)
        if m
        else ("", 0, 0)
    )
    if base == "plain":
        return (0, 0, order, label)
    if base.startswith("chunked-"):
        try:
            return (1, parse_size(base.removeprefix("chunked-")), order, label)
        except SizeError:
            return (1, math.inf, order, label)
    if base == "multithread":
        return (2, 0, order, label)
    return (3, 0, order, label)


def layout_order(labels: Any) -> list[str]:
    """plain, chunked by chunk size, multithread, then anything else."""
    return sorted({str(v) for v in labels}, key=_layout_key)


def num(v: float) -> str:
    """Three significant figures below 100, whole numbers above, never an exponent:
    0.0123, 1.23, 12.3, 123, 1,234."""
    if v is None or math.isnan(v):
        return NA
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:#.3g}".rstrip(".")


def rate(v: float) -> str:
    """A rate in MB/s with one decimal whatever its size (4.2, 16.3, 162.0, 1,234.5), so
    that a column of them reads alike; under 0.1 MB/s two significant figures (0.042)."""
    if v is None or math.isnan(v):
        return NA
    if v != 0 and abs(v) < 0.1:
        return f"{v:.2g}"
    return f"{v:,.1f}"


def factor(v: float) -> str:
    """A factor (a speed-up, B over A) with two decimals always: 1.00 beside 1.01, never 1."""
    return NA if v is None or math.isnan(v) else f"{v:.2f}"


def with_interval(
    v: float,
    low: float,
    high: float,
    level: float,
    prefix: str = "",
    n: int | None = None,
    fmt: Callable[[float], str] = rate,
    unit: str = "",
) -> str:
    """A value with its interval and the interval's coverage, ``218.0 [200.1, 230.4] 75%``
    (a rate unless ``fmt`` says otherwise: :func:`factor` for ``×3.88 [3.86, 3.92] 90%``), or
    with the reason it has none: ``218.0 (n=2: too few repeats for an interval)``. The
    coverage is always printed, since at 3 repeats it is 75%, not the 95% a reader would
    assume. ``unit`` follows the value (``16.1 MB/s [16.0, 16.2] 75%``)."""
    if v is None or math.isnan(v):
        return NA
    if math.isnan(low):
        why = f" (n={n}: too few repeats for an interval)" if n is not None and n < 3 else ""
        return f"{prefix}{fmt(v)}{unit}{why}"
    return f"{prefix}{fmt(v)}{unit} [{fmt(low)}, {fmt(high)}] {level_text(level)}"


def setting_as_run(setting: Any, concurrency: Any) -> str:
    """A setting by the values it ran with: ``rclone-1xauto`` that ran 2 objects at once
    reads ``rclone-1x2`` (a reader saw "auto" where it was 2); any other is as named. Where
    it is shown, "auto" (the transfer job's threads) is said once."""
    text = str(setting)
    if (
        text.endswith("xauto")
        and isinstance(concurrency, int | float)
        and concurrency == concurrency
    ):
        return f"{text.removesuffix('auto')}{int(concurrency)}"
    return text


def coverage_note(repeats: Iterable[int]) -> str:
    """What the percentage after an interval is, with the levels the campaign's numbers of
    ``repeats`` give (the first screen shows both kinds: a median's at 3 repeats holds 75%,
    a factor's between two such 90%), said once where the intervals are shown."""
    what = "the percentage after an interval is its coverage, the chance it holds the true value"
    ns = sorted({int(n) for n in repeats if n >= MIN_REPEATS_FOR_INTERVAL})
    if not ns:
        return what
    levels = []
    for n in ns[:3]:  # the fewest repeats first: their levels are the lowest shown
        values = [1.0 + i / 1000 for i in range(n)]  # the levels depend on n alone
        median = median_interval(values).level
        ratio = ratio_interval(values, values).level
        levels.append(
            f"at {n}, {level_text(median)} and {level_text(ratio)}"
            if levels
            else f"at {n} repeats {level_text(median)} for a median, {level_text(ratio)} for a "
            "factor between two settings"
        )
    return f"{what} ({'; '.join(levels)})"


def flag_values(flags: Sequence[str], name: str) -> list[str]:
    """The values given to rclone flag ``name`` in ``flags`` (``name V`` or ``name=V``)."""
    return [
        flags[i + 1] if flag == name else flag.split("=", 1)[1]
        for i, flag in enumerate(flags)
        if (flag == name and i + 1 < len(flags)) or flag.startswith(f"{name}=")
    ]


def bwlimit_bytes(value: str) -> float | None:
    """Bytes per second of rclone's --bwlimit value: a bare number or a K/M/G suffix is
    KiB/MiB/GiB per second (rclone's binary units); None for ``UP:DOWN``, a timetable or
    what does not parse."""
    if not value or ":" in value or "," in value or " " in value:
        return None
    try:
        unit = value[-1].upper() if value[-1].isalpha() else "K"
        return float(parse_size(f"{value.rstrip('bBkKmMgGtT')}{unit}iB"))
    except (SizeError, IndexError, ValueError):
        return None
