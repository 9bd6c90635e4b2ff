"""A burst, then a lower sustained rate: one change point in a transfer's per-second rates.

Stores and their clients often start fast and settle lower: a provider's burst credit, a token
bucket, back-off after SlowDown answers (s5cmd and AWS CLI users report it: peak/s5cmd#402,
aws/aws-cli#6736). One whole-transfer rate, or a sustained rate after a ramp, hides both
numbers. Here each transfer's per-interval rates (``stats.interval_rates``) are split once,
where a change in the mean explains the most of their spread (least squares: the "l2" cost of
binary segmentation, as ``ruptures.Binseg(model="l2")`` finds one break; a single break needs
no library: two cumulative sums). The split is a burst only if

* the fit gains more than the penalty ``PENALTY * sigma^2 * ln(n)`` for the one parameter it
  adds (a BIC penalty); sigma is the rates' noise, estimated from the median absolute
  difference of successive rates, so the step itself does not inflate it;
* each side lasts at least ``MIN_SIDE_S`` seconds (a first second of ramp-up is no burst);
* the rate after it is at most ``1 - MIN_DROP`` of the rate before (a slow start that speeds
  up is a ramp, which the sustained rate already leaves out);
* bytes moved in at least ``MIN_MOVING_SHARE`` of the intervals after it: a copy that moved
  nothing for most of that time was stalled (a store down, its last answer awaited), not
  settled at a lower rate; ``longest_stall_s`` and the front page's stall sentence say that
  (a user's 7 s outage at the end of an upload was called "a burst allowance or throttling:
  a longer copy settles at" 0 MB/s).

Each side's rate is its bytes over its seconds, not a mean of per-second rates, so every byte
counts once; the one interval in which the rate changed holds both rates and is left out of the
rate after.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cloudbench.campaign.identity import ROUTE
from cloudbench.measure.series import rates as series_rates
from cloudbench.report.select import same_keys

MIN_SIDE_S = 3.0
MIN_DROP = 0.2  # the rate after the burst is at least 20% lower
MIN_MOVING_SHARE = 0.5  # of the intervals after it, the share that moved bytes
PENALTY = 2.0  # BIC: 2 sigma^2 ln n for one more mean (and a margin over 1 x for noise)
COLUMNS = ["burst_s", "burst_mb_per_s", "after_mb_per_s"]


@dataclass(frozen=True)
class Burst:
    """A burst of ``seconds`` at ``rate`` MB/s, then ``after`` MB/s to the end."""

    seconds: float
    rate: float
    after: float


def change_point(values: np.ndarray) -> tuple[int, float]:
    """The split k (1 <= k < n) of ``values`` into ``values[:k]`` and ``values[k:]`` with the
    least total squared deviation from each part's mean, and what it gains over no split."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        return 0, 0.0
    c1, c2 = np.cumsum(x), np.cumsum(x * x)
    k = np.arange(1, n)
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (n - k)
    whole = c2[-1] - c1[-1] ** 2 / n
    cost = left + right
    best = int(np.argmin(cost))
    return best + 1, float(whole - cost[best])


def noise_sigma(values: np.ndarray) -> float:
    """Robust standard deviation of the noise: MAD of successive differences / (0.6745 sqrt 2)
    (a single step adds one large difference, which the median ignores)."""
    d = np.diff(np.asarray(values, dtype=float))
    if d.size == 0:
        return 0.0
    return float(np.median(np.abs(d - np.median(d))) / 0.6745 / math.sqrt(2))


def find_burst(elapsed_s: np.ndarray, cumulative_bytes: np.ndarray) -> Burst | None:
    """The burst of one transfer from its samples (elapsed seconds and cumulative bytes since
    the copy started, as in timeseries.tsv), or None (module docstring)."""
    if np.asarray(elapsed_s).size < 2 * MIN_SIDE_S:
        return None
    # the one rate convention of every series (cloudbench.measure.series.rates)
    times = np.asarray(elapsed_s, float).tolist()
    points = series_rates(zip(times, np.asarray(cumulative_bytes).tolist(), strict=True))
    t = np.array([p[0] for p in points], dtype=float)
    b = np.array([p[1] for p in points], dtype=float)
    rates = np.array([p[2] for p in points], dtype=float) / 1e6
    k, gain = change_point(rates)
    if k == 0:
        return None
    sigma = noise_sigma(rates)
    if gain <= PENALTY * max(sigma, 1e-9) ** 2 * math.log(rates.size):
        return None
    at, end = t[k - 1], t[-1]
    if at < MIN_SIDE_S or end - at < MIN_SIDE_S:
        return None
    before = b[k - 1] / at / 1e6
    # the first interval after the split holds both rates (the change fell inside it)
    j = k if k < t.size - 1 else k - 1
    after = (b[-1] - b[j]) / (end - t[j]) / 1e6
    if after > (1 - MIN_DROP) * before:
        return None
    if np.mean(np.diff(b[j:]) > 0) < MIN_MOVING_SHARE:
        return None  # stalled, not slower
    return Burst(float(at), float(before), float(after))


def bursts(transfers: pd.DataFrame, series: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``COLUMNS`` for every row of ``transfers`` (NaN where no burst, or not ok), from the
    per-second ``series`` of the same transfer (rows matched on ``keys``)."""
    out = pd.DataFrame(math.nan, index=transfers.index, columns=COLUMNS)
    if series.empty or transfers.empty:
        return out
    by_key = {k: g for k, g in series.groupby(keys)}
    for i, row in zip(transfers.index, transfers[keys].itertuples(index=False), strict=True):
        if transfers.at[i, "status"] != "ok":
            continue
        s = by_key.get(tuple(row))
        if s is None:
            continue
        s = s.groupby("elapsed_s", as_index=False)["bytes"].max().sort_values("elapsed_s")
        found = find_burst(s["elapsed_s"].to_numpy(), s["bytes"].to_numpy())
        if found is not None:
            out.loc[i, COLUMNS] = [found.seconds, found.rate, found.after]
    return out


def burst_lines(metrics: pd.DataFrame) -> list[str]:
    """One sentence per site, remote, direction and layout with bursts, for the front page."""
    if "burst_s" not in metrics or metrics["burst_s"].isna().all():
        return []
    lines = []
    hit = metrics[metrics["burst_s"].notna()]
    ok = metrics[metrics["status"] == "ok"]
    keys = [*ROUTE, "layout"]
    for key, g in hit.groupby(keys, sort=False):
        k = dict(zip(keys, key, strict=True))
        n = len(ok[same_keys(ok, k, keys)])
        lines.append(
            f"{k['site']} {k['direction']} ({k['remote']}) {k['layout']}: {len(g)} of {n} "
            "transfers started fast, "
            f"then slowed: {g['burst_mb_per_s'].median():.3g} MB/s for the first "
            f"{g['burst_s'].median():.0f} s, then {g['after_mb_per_s'].median():.3g} MB/s "
            "(medians; a burst allowance or throttling: a longer copy settles at the second)"
        )
    return lines
