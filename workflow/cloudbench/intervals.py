"""Intervals whose stated level is their real coverage, at the handful of repeats a campaign has.

A campaign measures each identity 3 to 10 times. At such n a bootstrap percentile interval
of a median is [min, max] (n <= 5) and covers the true median 75% of the time at n = 3, not
the 95% it would be labelled with. The report therefore uses only intervals whose coverage
is known exactly for every n, and it prints that coverage beside each interval:

* **median** (:func:`median_interval`): the distribution-free order-statistic interval
  (the binomial method, e.g. Conover, *Practical Nonparametric Statistics*, 3.2). For sorted
  values x(1) <= ... <= x(n), [x(k), x(n-k+1)] covers the population median with probability
  1 - 2 P(Bin(n, 1/2) <= k-1), whatever the distribution of the rates. The largest k whose
  coverage reaches the target (95%) is taken; when even [min, max] falls short (n <= 5),
  [min, max] is given with its real coverage (75% at n = 3, 87.5% at 4, 93.8% at 5).
* **ratio of two layouts** (:func:`ratio_interval`): a speed-up, a collapse, "clearly the
  fastest". The interval of the factor between two groups of rates from the exact
  Mann-Whitney distribution (Bauer 1972; R's ``wilcox.test(conf.int=TRUE)``) on log rates:
  the k-th smallest and k-th largest of the n x m pairwise ratios. Its coverage is exact and
  needs one assumption, stated wherever it is shown: the two groups differ by a factor (one
  layout multiplies the other's rates). 3 against 3 repeats give 90%, 4 against 4 97.1%.
  The point estimate stays the ratio of the medians.

Nothing is resampled, so no seed is involved and the same records give the same page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from typing import NamedTuple

import numpy as np

TARGET_LEVEL = 0.95  # what every interval aims for; the level it reaches is stated beside it
# below this many values there is no interval: [min, max] of 2 covers the median half the time
MIN_REPEATS_FOR_INTERVAL = 3


class Interval(NamedTuple):
    """An interval and its coverage (``level``: the probability that it holds the true
    value); all three NaN when there is none."""

    low: float
    high: float
    level: float


class RatioInterval(NamedTuple):
    """median(values) / median(baseline) with the interval of the factor between them."""

    ratio: float
    low: float
    high: float
    level: float


# How every page of the report explains its intervals (one sentence, said once)
INTERVALS_NOTE = (
    "Intervals: a median's is the distribution-free order-statistic interval, a speed-up's the "
    "exact Mann-Whitney interval of the factor between the two layouts (it assumes one "
    "multiplies the other's rates); the percentage after each is its real coverage for that "
    "many repeats (75% for the range of 3, 95% needs 6); none with fewer than "
    f"{MIN_REPEATS_FOR_INTERVAL} ok repeats."
)

NONE = Interval(math.nan, math.nan, math.nan)


def clean(values: Iterable[float]) -> np.ndarray:
    """The values as floats, NaNs dropped."""
    x = np.asarray(list(values), dtype=float)
    return x[~np.isnan(x)]


@cache
def median_coverage(n: int, k: int) -> float:
    """Coverage of [x(k), x(n-k+1)] for the median of n values: 1 - 2 P(Bin(n, 1/2) < k)."""
    tail = sum(math.comb(n, i) for i in range(k)) / 2**n
    return 1.0 - 2.0 * tail


def median_interval(values: Iterable[float], target: float = TARGET_LEVEL) -> Interval:
    """The order-statistic interval of the median with its exact coverage (module doc)."""
    x = np.sort(clean(values))
    n = x.size
    if n < MIN_REPEATS_FOR_INTERVAL:
        return NONE
    k = 1
    while k + 1 <= n // 2 and median_coverage(n, k + 1) >= target:
        k += 1
    return Interval(float(x[k - 1]), float(x[n - k]), median_coverage(n, k))


def _median(x: np.ndarray) -> float:
    """``np.median`` of clean values, the same float without its overhead (a repeat's
    handful of rates: np.median took three quarters of :func:`ratio_interval`'s time)."""
    s = np.sort(x)
    half = s.size // 2
    return float(s[half]) if s.size % 2 else float((s[half - 1] + s[half]) / 2)


@cache
def _mann_whitney_cdf(n: int, m: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0..n*m under the null: U counts the pairs (i, j) with x_i < y_j."""
    # counts[n][m][u]: number of arrangements of n x's and m y's with statistic u
    table = [[[1] if i == 0 or j == 0 else None for j in range(m + 1)] for i in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            a, b = table[i - 1][j], table[i][j - 1]  # last element an x (adds j), or a y
            counts = [0] * (i * j + 1)
            for u, c in enumerate(a):
                counts[u + j] += c
            for u, c in enumerate(b):
                counts[u] += c
            table[i][j] = counts
    total = math.comb(n + m, n)
    return tuple(float(c) for c in np.cumsum(table[n][m]) / total)


def ratio_coverage(n: int, m: int, k: int) -> float:
    """Coverage of the k-th smallest to k-th largest of the n x m pairwise ratios."""
    return 1.0 - 2.0 * _mann_whitney_cdf(n, m)[k - 1]


def ratio_interval(
    values: Iterable[float], baseline: Iterable[float], target: float = TARGET_LEVEL
) -> RatioInterval:
    """The factor between two groups of rates (module doc): NaN interval below
    ``MIN_REPEATS_FOR_INTERVAL`` values on either side or with a baseline rate of 0; NaN
    ratio if either is empty or the baseline's median is 0 (no factor relates to nothing)."""
    v, b = clean(values), clean(baseline)
    if v.size == 0 or b.size == 0 or _median(b) <= 0:
        return RatioInterval(math.nan, math.nan, math.nan, math.nan)
    ratio = _median(v) / _median(b)
    # a failed repeat counted as 0 MB/s has ratios of 0 to every baseline: ranks still hold
    if min(v.size, b.size) < MIN_REPEATS_FOR_INTERVAL or (v < 0).any() or (b <= 0).any():
        return RatioInterval(ratio, math.nan, math.nan, math.nan)
    pairs = np.sort((v[:, None] / b[None, :]).ravel())
    n, m = v.size, b.size
    k = 1
    while k + 1 <= pairs.size // 2 and ratio_coverage(n, m, k + 1) >= target:
        k += 1
    return RatioInterval(
        ratio, float(pairs[k - 1]), float(pairs[pairs.size - k]), ratio_coverage(n, m, k)
    )


def level_text(level: float) -> str:
    """A coverage as the report prints it: rounded down, so "95%" is never more than true
    (96.9% -> "96%", 75% -> "75%", 93.75% -> "93%")."""
    if math.isnan(level):
        return ""
    return f"{math.floor(level * 100 + 1e-9):.0f}%"
