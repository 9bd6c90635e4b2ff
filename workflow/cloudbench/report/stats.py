"""The report's statistics: pure functions of the aggregated tables, with every rule written down.

Nothing here reads files or draws: each function takes numbers or DataFrames and returns
numbers or DataFrames, so the figures, the HTML tables, ``summary.tsv`` and the tests all use
the same definitions. Rates are MB/s = 10⁶ bytes per second throughout.

Definitions (the report captions repeat them; change both together):

* **rate** of a transfer: bytes / wall-clock seconds of the whole rclone run (``mb_per_s`` in
  ``transfers.tsv``); only transfers with status ``ok`` have one.
* **sustained rate** (:func:`sustained_rate`): the rate after ramp-up, from the per-second
  series of cumulative bytes. The window starts at the first sample at or after
  ``RAMP_FRACTION`` (10%) of the last sample's elapsed time and ends at the last sample;
  sustained = bytes moved in the window / the window's seconds. The interval before the first
  sample (process start, connection set-up) is therefore never in the window. With fewer
  than ``MIN_SERIES_POINTS`` (3) distinct samples, or a window shorter than
  ``MIN_WINDOW_S`` (1.5 s), it falls back to the whole-transfer rate and says so
  (``method == "whole-transfer"``).
* **interval of a median** (:func:`cloudbench.intervals.median_interval`): the
  distribution-free order-statistic interval, with its exact coverage stated beside it
  (``*_ci_level``): 95% where n allows (n >= 6), else [min, max] of the repeats with its real
  coverage (75% at n = 3). Fewer than ``MIN_REPEATS_FOR_INTERVAL`` (3) values give none.
* **speed-up** (:func:`speedup`): median rate of a strategy / median rate of ``plain`` for
  the same site, remote, direction and setting (whole-transfer rates); its interval is the
  exact Mann-Whitney interval of the factor between the two groups
  (:func:`cloudbench.intervals.ratio_interval`: 90% at 3 against 3 repeats), which assumes
  that one layout multiplies the other's rates.
* **outlier** (:func:`outlier_flags`): an ``ok`` repeat whose rate is below
  ``OUTLIER_FRACTION`` (0.5) x the median rate of its group (same site, remote, direction and
  layout, the repeat itself included), judged only in groups with at least
  ``OUTLIER_MIN_REPEATS`` (3) ``ok`` repeats: a collapse, not noise.
* **percentiles** P10/P50/P90: ``numpy.percentile`` with linear interpolation between order
  statistics (Hyndman-Fan type 7, the numpy and R default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from cloudbench.campaign.identity import GROUP, LABELS, LINK, MEASUREMENT, ROUTE, keys_without
from cloudbench.campaign.model import Setting
from cloudbench.intervals import (
    TARGET_LEVEL,
    RatioInterval,
    median_interval,
    ratio_interval,
)
from cloudbench.measure.record import STALL_NOTED_MIN_S, STALL_NOTED_S, STALL_NOTED_SHARE
from cloudbench.measure.series import counted_all
from cloudbench.measure.series import rates as rates_of
from cloudbench.report import burst
from cloudbench.report.select import same_keys

RAMP_FRACTION = 0.10
MIN_SERIES_POINTS = 3
# A window under one and a half of rclone's one-second stats intervals measures when the
# lines were written more than the link: 2.3 s copies capped at 8.39 MB/s read 9.16 MB/s
# over their last 1.3 s (the closing line comes a fraction of a second after the one before).
MIN_WINDOW_S = 1.5
OUTLIER_FRACTION = 0.5
OUTLIER_MIN_REPEATS = 3
EARTH_RADIUS_KM = 6371.0088  # IUGG mean Earth radius
BYTES_PER_GB = 10**9
BYTES_PER_TB = 10**12

# A group: the repeats of one measurement (campaign.identity.GROUP); a pair: what a layout's
# speed-up is judged in (the same site, remote, direction and setting: clients x concurrency).
PAIR = keys_without("layout", of=GROUP)
# Phases of a site's work, in order: the time budget reports each one's wall clock.
PHASES = {
    "prepare": ("generate", "checksum", "chunk"),
    "upload": ("upload",),
    "download": ("download",),
    "check": ("reassemble", "verify"),
}
SUMMARY_COLUMNS = [
    *MEASUREMENT, "n", "mean", "p10", "p50", "p90",
    "sustained_median", "sustained_ci_low", "sustained_ci_high", "sustained_ci_level",
    "sustained_from_whole", "speedup_vs_plain", "speedup_ci_low", "speedup_ci_high",
    "speedup_ci_level", "failed", "corrupt",
    "unverified", "retries", "outliers", "bursts", "burst_s", "burst_mb_per_s",
    "after_burst_mb_per_s", "connections",
]  # fmt: skip

Stat = Callable[..., np.ndarray]


# --- per-transfer numbers ---------------------------------------------------------------------


#: a sustained rate's method where no series says more: the whole transfer's own rate
WHOLE_TRANSFER = "whole-transfer"


class Sustained(NamedTuple):
    """A sustained rate and how it was obtained (window in seconds since the run started)."""

    mb_per_s: float
    method: str  # "series" or "whole-transfer"
    start_s: float
    end_s: float


def _samples(series: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(elapsed_s, cumulative bytes), sorted, one sample per instant (the largest byte count)."""
    s = series[["elapsed_s", "bytes"]].dropna()
    if s.empty:
        return np.array([]), np.array([])
    s = s.groupby("elapsed_s", as_index=False)["bytes"].max().sort_values("elapsed_s")
    return s["elapsed_s"].to_numpy(float), s["bytes"].to_numpy(float)


def sustained_rate(
    series: pd.DataFrame, whole_mb_per_s: float = math.nan, ramp_fraction: float = RAMP_FRACTION
) -> Sustained:
    """Rate after ramp-up, in MB/s, from one transfer's per-second series.

    ``series`` has ``elapsed_s`` (seconds since the rclone run started) and ``bytes``
    (cumulative bytes at that time), one row per rclone stats line. Samples at the same
    instant count once. With samples t_0 < ... < t_k and bytes b_0..b_k, the window starts at
    the first t_i >= ``ramp_fraction`` x t_k and the result is (b_k - b_i) / (t_k - t_i) / 10⁶.
    With fewer than ``MIN_SERIES_POINTS`` samples, or a window shorter than ``MIN_WINDOW_S``,
    the result is ``whole_mb_per_s`` (the whole-transfer rate) with method
    ``"whole-transfer"``. The series ends where its count reached the total
    (:func:`cloudbench.measure.series.counted_all`): an upload's counter runs ahead of the
    store by what the socket buffers hold, and the flat stretch after it read as a rate of
    0 (a user's rclone uploads: sustained 0.0 beside a median of 2.7 MB/s).
    """
    t, b = _samples(series)
    end = counted_all(b.tolist()) + 1  # the buffers draining after it are no rate
    t, b = t[:end], b[:end]
    fallback = Sustained(float(whole_mb_per_s), WHOLE_TRANSFER, math.nan, math.nan)
    if t.size < MIN_SERIES_POINTS:
        return fallback
    i = int(np.searchsorted(t, ramp_fraction * t[-1], side="left"))
    if i >= t.size - 1 or t[-1] - t[i] < MIN_WINDOW_S:
        return fallback
    return Sustained(
        float((b[-1] - b[i]) / (t[-1] - t[i]) / 1e6), "series", float(t[i]), float(t[-1])
    )


def interval_rates(series: pd.DataFrame) -> pd.DataFrame:
    """Per-interval rates (MB/s) of one transfer, for plotting rate against time and for
    the burst: the one rate convention of every series (:func:`cloudbench.measure.series.rates`,
    the same numbers as ``mb_per_s`` of timeseries.tsv): rclone's closing stats line, a few
    milliseconds after the one before, is merged into it rather than drawn as a drop to
    zero; a byte count that went down shows as a negative rate, never clamped away.
    Returns ``elapsed_s``, ``bytes``, ``mb_per_s`` (rate over the interval ending at
    ``elapsed_s``; the first interval starts at 0 s with 0 bytes).
    """
    t, b = _samples(series)
    out = rates_of(zip(t.tolist(), b.tolist(), strict=True))
    return pd.DataFrame(
        {
            "elapsed_s": [p[0] for p in out],
            "bytes": [float(p[1]) for p in out],
            "mb_per_s": [p[2] / 1e6 for p in out],
        }
    )


# --- intervals ---------------------------------------------------------------------------------


def speedup(values: Iterable[float], baseline: Iterable[float]) -> RatioInterval:
    """median(values) / median(baseline) with the factor's exact interval (module doc)."""
    return ratio_interval(values, baseline, TARGET_LEVEL)


# --- distance ------------------------------------------------------------------------------


def haversine_km(a: Sequence[float], b: Sequence[float]) -> float:
    """Great-circle distance in km between [lat, lon] points a and b (degrees), on a sphere of
    radius ``EARTH_RADIUS_KM`` (within about 0.5% of the ellipsoidal distance)."""
    lat1, lon1, lat2, lon2 = (math.radians(float(v)) for v in (*a, *b))
    h = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


@dataclass(frozen=True)
class LinearFit:
    """Ordinary least squares y = intercept + slope * x, with standard errors."""

    slope: float
    intercept: float
    slope_se: float
    intercept_se: float
    n: int
    r_squared: float


def linear_fit(x: Iterable[float], y: Iterable[float]) -> LinearFit:
    """OLS fit of y on x. Standard errors use the residual variance SSR / (n - 2), so they are
    NaN with only 2 points; fewer than 2 distinct x values cannot be fitted (ValueError)."""
    xs = np.asarray(list(x), dtype=float)
    ys = np.asarray(list(y), dtype=float)
    ok = ~(np.isnan(xs) | np.isnan(ys))
    xs, ys = xs[ok], ys[ok]
    if np.unique(xs).size < 2:
        raise ValueError("a linear fit needs at least 2 distinct x values")
    n = xs.size
    xm, ym = xs.mean(), ys.mean()
    sxx = float(((xs - xm) ** 2).sum())
    slope = float(((xs - xm) * (ys - ym)).sum() / sxx)
    intercept = float(ym - slope * xm)
    resid = ys - (intercept + slope * xs)
    ssr = float((resid**2).sum())
    sst = float(((ys - ym) ** 2).sum())
    r2 = 1 - ssr / sst if sst > 0 else 1.0
    if n > 2:
        s2 = ssr / (n - 2)
        slope_se = math.sqrt(s2 / sxx)
        intercept_se = math.sqrt(s2 * (1 / n + xm**2 / sxx))
    else:
        slope_se = intercept_se = math.nan
    return LinearFit(slope, intercept, slope_se, intercept_se, n, r2)


# --- groups --------------------------------------------------------------------------------


def with_setting(transfers: pd.DataFrame) -> pd.DataFrame:
    """Tables written before settings existed (and hand-built ones) measured one client at
    the job's threads: the default setting."""
    if "setting" in transfers.columns:
        return transfers
    return transfers.assign(setting=Setting().label)


def ok_rates(transfers: pd.DataFrame) -> pd.DataFrame:
    """The transfers with status ``ok`` and a rate."""
    ok = transfers[(transfers["status"] == "ok") & transfers["mb_per_s"].notna()]
    return ok.copy()


def stalls(transfers: pd.DataFrame, at_least_s: float = STALL_NOTED_S) -> list[tuple[int, float]]:
    """(repeat, seconds) of the ``ok`` repeats in which rclone moved nothing for at least
    ``at_least_s``, or for ``STALL_NOTED_SHARE`` of the copy's seconds and at least
    ``STALL_NOTED_MIN_S``: a store outage rclone waited out. Their rates include it."""
    ok = ok_rates(transfers)
    if ok.empty or "longest_stall_s" not in ok:
        return []
    stall = pd.to_numeric(ok["longest_stall_s"], errors="coerce")
    seconds = pd.to_numeric(ok["seconds"], errors="coerce") if "seconds" in ok else math.inf
    share = (stall >= STALL_NOTED_SHARE * seconds) & (stall >= STALL_NOTED_MIN_S)
    long = ok[(stall >= at_least_s) | share]
    return [
        (int(r), float(s)) for r, s in zip(long["repeat"], long["longest_stall_s"], strict=True)
    ]


def resent_bytes(transfers: pd.DataFrame) -> int:
    """Bytes that the ``ok`` repeats without a whole-copy retry moved beyond what they had to:
    data rclone sent again after a low-level retry (a failed part or request), which rclone
    does not log at ``-v`` but its byte count shows. Their time is in the rates."""
    ok = ok_rates(transfers)
    if ok.empty or "bytes_moved" not in ok:
        return 0
    ok = ok[pd.to_numeric(ok["retries"], errors="coerce").fillna(0) == 0]
    extra = pd.to_numeric(ok["bytes_moved"], errors="coerce") - pd.to_numeric(
        ok["bytes_requested"], errors="coerce"
    )
    return int(extra.clip(lower=0).fillna(0).sum())


def outlier_flags(
    transfers: pd.DataFrame,
    fraction: float = OUTLIER_FRACTION,
    min_repeats: int = OUTLIER_MIN_REPEATS,
) -> pd.Series:
    """True for each ``ok`` transfer whose rate < ``fraction`` x its group's median rate.

    A group is one site, remote, direction and layout; only groups with at least
    ``min_repeats`` ``ok`` repeats are judged (the median includes the repeat itself).
    Transfers that are not ``ok``, or in smaller groups, are False. Index as ``transfers``.
    """
    flags = pd.Series(False, index=transfers.index)
    ok = ok_rates(with_setting(transfers))
    if ok.empty:
        return flags
    grp = ok.groupby(GROUP)["mb_per_s"]
    med = grp.transform("median")
    count = grp.transform("count")
    hit = (count >= min_repeats) & (ok["mb_per_s"] < fraction * med)
    flags.loc[hit[hit].index] = True
    return flags


def transfer_metrics(transfers: pd.DataFrame, series: pd.DataFrame) -> pd.DataFrame:
    """``transfers`` plus ``sustained_mb_per_s``, ``sustained_method``, ``group_median``,
    ``outlier`` and a burst's ``burst.COLUMNS`` per row (sustained and bursts only for ``ok``
    transfers)."""
    out = with_setting(transfers).copy()
    keys = LABELS  # the group and the repeat
    series = with_setting(series)
    by_key = {k: g for k, g in series.groupby(keys)} if not series.empty else {}
    sus, method = [], []
    for row in out.itertuples(index=False):
        if row.status != "ok" or pd.isna(row.mb_per_s):
            sus.append(math.nan)
            method.append("")
            continue
        s = by_key.get(tuple(getattr(row, k) for k in keys))
        if s is None:  # no series: the whole transfer's rate, as sustained_rate gives it
            sus.append(float(row.mb_per_s))
            method.append(WHOLE_TRANSFER)
            continue
        r = sustained_rate(s, float(row.mb_per_s))
        sus.append(r.mb_per_s)
        method.append(r.method)
    out["sustained_mb_per_s"] = sus
    out["sustained_method"] = method
    out[burst.COLUMNS] = burst.bursts(out, series, keys)
    ok = ok_rates(out)
    out["group_median"] = ok.groupby(GROUP)["mb_per_s"].transform("median").reindex(out.index)
    out["outlier"] = outlier_flags(out)
    return out


def _median(values: pd.Series) -> float:
    """The median of the values present (NaN when none is)."""
    v = values.dropna()
    return float(v.median()) if len(v) else math.nan


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q, method="linear")) if x.size else math.nan


def _connections(group: pd.DataFrame) -> str:
    """The connections a group's transfers used: one number, or the range if they differ."""
    c = pd.to_numeric(group.get("connections", pd.Series(dtype=float)), errors="coerce").dropna()
    if c.empty:
        return ""
    lo, hi = int(c.min()), int(c.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _same_setting(m: pd.DataFrame, group: pd.DataFrame, setting: str) -> pd.Series:
    """Rows of ``m`` run like ``group``: the same tool and clients at the same concurrency
    as run (``auto`` is the job's threads, so plain at auto and chunked at 2 on a 2-core job
    are one setting); by label where the table has no such columns."""
    cols = ("tool", "clients", "concurrency")
    if not all(c in m.columns for c in cols):
        return m["setting"] == setting
    run = group[list(cols)].dropna().drop_duplicates()
    if len(run) != 1:
        return m["setting"] == setting
    tool, clients, conc = run.iloc[0]
    return (m["tool"] == tool) & (m["clients"] == clients) & (m["concurrency"] == conc)


def counted_sum(values: pd.Series) -> float:
    """The sum of a count over the repeats, NaN when no repeat counted it: a tool that
    reports no retries (s5cmd, the AWS CLI) leaves its rows' ``retries`` empty, and a sum
    of 0 would claim none happened (a user read "retried 0" for s5cmd on the front page)."""
    return float(pd.to_numeric(values, errors="coerce").sum(min_count=1))


def summarise(
    transfers: pd.DataFrame, series: pd.DataFrame, metrics: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per site x remote x direction x layout: rate statistics of the ``ok`` repeats
    (n, mean, P10/P50/P90), the sustained median with its interval and that interval's
    coverage, the speed-up over ``plain`` with its interval and coverage, and counts of
    failed/corrupt/unverified transfers, retries and outliers. Columns: ``SUMMARY_COLUMNS``.
    ``metrics``: :func:`transfer_metrics` of the same tables, when the caller has them (the
    report needs both: the per-transfer numbers are then computed once)."""
    if transfers.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    m = metrics if metrics is not None else transfer_metrics(with_setting(transfers), series)
    rows = []
    for key, g in m.groupby(GROUP, sort=False):
        k = dict(zip(GROUP, key, strict=True))
        setting = k["setting"]
        ok = g[(g["status"] == "ok") & g["mb_per_s"].notna()]
        rates = ok["mb_per_s"].to_numpy(float)
        sus = ok["sustained_mb_per_s"].to_numpy(float)
        sus_iv = median_interval(sus)
        plain = m[
            same_keys(m, k, ROUTE)
            & (m["layout"] == "plain")
            & _same_setting(m, g, setting)
            & (m["status"] == "ok")
        ]["mb_per_s"]
        if k["layout"] == "plain":
            sp = RatioInterval(1.0 if rates.size else math.nan, math.nan, math.nan, math.nan)
        else:
            sp = speedup(rates, plain)
        rows.append(k | {
            "tool": Setting.from_label(str(setting)).tool, "strategy": g["strategy"].iloc[0],
            "n": int(rates.size),
            "mean": float(rates.mean()) if rates.size else math.nan,
            "p10": _pct(rates, 10), "p50": _pct(rates, 50), "p90": _pct(rates, 90),
            "sustained_median": float(np.median(sus)) if sus.size else math.nan,
            "sustained_ci_low": sus_iv.low, "sustained_ci_high": sus_iv.high,
            "sustained_ci_level": sus_iv.level,
            "sustained_from_whole": int((ok["sustained_method"] == WHOLE_TRANSFER).sum()),
            "speedup_vs_plain": sp.ratio, "speedup_ci_low": sp.low, "speedup_ci_high": sp.high,
            "speedup_ci_level": sp.level,
            "failed": int((g["status"] == "failed").sum()),
            "corrupt": int((g["status"] == "corrupt").sum()),
            "unverified": int((g["status"] == "unverified").sum()),
            "retries": counted_sum(g["retries"]),
            "outliers": int(g["outlier"].sum()),
            "bursts": int(ok["burst_s"].notna().sum()),
            "burst_s": _median(ok["burst_s"]),
            "burst_mb_per_s": _median(ok["burst_mb_per_s"]),
            "after_burst_mb_per_s": _median(ok["after_mb_per_s"]),
            "connections": _connections(g),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


# --- distance against rate --------------------------------------------------------------------


def site_remote_distances(sites: Mapping[str, Any], remotes: Mapping[str, Any]) -> pd.DataFrame:
    """``site``, ``remote``, ``distance_km`` for every pair where both locations are known.

    ``sites`` and ``remotes`` map names to dicts with an optional ``location`` [lat, lon]
    (the shape of the report-info JSON)."""
    rows = []
    for s, sv in sites.items():
        for r, rv in remotes.items():
            a, b = (sv or {}).get("location"), (rv or {}).get("location")
            if a is not None and b is not None:
                rows.append({"site": s, "remote": r, "distance_km": haversine_km(a, b)})
    return pd.DataFrame(rows, columns=[*LINK, "distance_km"])


# The fewest distinct places (distances, round-trip times) a trend line is drawn through: two
# clusters of points would give a line whatever the truth (the user check's two RTTs on one
# host, 24 us apart, drew a slope of +2,090 MB/s per ms at R² 0.02)
TREND_MIN_PLACES = 3


class DistanceTrend(NamedTuple):
    """Rate against distance for one direction: the points fitted and the fit (None when
    fewer than :data:`TREND_MIN_PLACES` distinct distances)."""

    points: pd.DataFrame  # site, remote, distance_km, median_mb_per_s, transfers
    fit: LinearFit | None
    distinct_distances: int


def distance_trend(
    transfers: pd.DataFrame, distances: pd.DataFrame, direction: str
) -> DistanceTrend:
    """Median ``ok`` rate of each site and remote (all layouts pooled) against distance.

    One point per site-remote pair, so repeats at one place do not pose as independent
    evidence about distance; the OLS fit (slope in MB/s per km, its standard error from the
    residuals) needs :data:`TREND_MIN_PLACES` distinct distances, else ``fit`` is None.
    """
    ok = ok_rates(transfers)
    ok = ok[ok["direction"] == direction]
    cols = [*LINK, "distance_km", "median_mb_per_s", "transfers"]
    if ok.empty or distances.empty:
        return DistanceTrend(pd.DataFrame(columns=cols), None, 0)
    pts = (
        ok.groupby(LINK, as_index=False)
        .agg(median_mb_per_s=("mb_per_s", "median"), transfers=("mb_per_s", "size"))
        .merge(distances, on=LINK, how="inner")
    )[cols]
    distinct = int(pts["distance_km"].round(3).nunique())
    enough = distinct >= TREND_MIN_PLACES
    fit = linear_fit(pts["distance_km"], pts["median_mb_per_s"]) if enough else None
    return DistanceTrend(pts, fit, distinct)


# --- where the time goes ----------------------------------------------------------------------


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals: jobs that ran at the same time count
    once, as a wall clock would have seen them."""
    total, reach = 0.0, -math.inf
    for start, end in sorted((a, b) for a, b in intervals if b > a):
        if start > reach:
            total += end - start
        elif end > reach:
            total += end - reach
        reach = max(reach, end)
    return total


def _intervals(frame: pd.DataFrame) -> list[tuple[float, float]]:
    start = pd.to_datetime(frame["started_utc"], utc=True, errors="coerce")
    secs = pd.to_numeric(frame["seconds"], errors="coerce")
    ok = start.notna() & secs.notna()
    t0 = (start[ok] - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    return list(zip(t0, t0 + secs[ok], strict=True))


def time_budget(steps: pd.DataFrame, transfers: pd.DataFrame) -> pd.DataFrame:
    """Per site: the wall-clock seconds of each phase, end to end, and two throughputs.

    A phase (``PHASES``: prepare = generate/checksum/chunk, upload, download, check =
    reassemble/verify) lasts the union of its records' [started_utc, started_utc + seconds]
    intervals, so jobs that ran in parallel are not added up; ``end_to_end_s`` is the union
    of every interval of the site (phases that overlapped count once).

    * ``raw_mb_per_s``: bytes of the site's ``ok`` transfers / the wall clock of those
      transfers;
    * ``effective_mb_per_s``: the same bytes / ``end_to_end_s``: verified bytes per second
      of everything the site spent on them.

    Columns: ``site``, one per phase, ``end_to_end_s``, ``ok_bytes``, ``raw_mb_per_s``,
    ``effective_mb_per_s``.
    """
    cols = ["site", *PHASES, "end_to_end_s", "ok_bytes", "raw_mb_per_s", "effective_mb_per_s"]
    parts, timed = [], ["site", "step", "started_utc", "seconds"]
    if not steps.empty:
        parts.append(steps[timed])
    if not transfers.empty:  # a transfer is a step named by its direction
        parts.append(transfers.rename(columns={"direction": "step"})[timed])
    if not parts:
        return pd.DataFrame(columns=cols)
    long = pd.concat(parts, ignore_index=True)
    phase_of = {step: phase for phase, members in PHASES.items() for step in members}
    long["phase"] = long["step"].map(phase_of)
    ok = ok_rates(transfers) if not transfers.empty else transfers
    rows = []
    for site, g in long.groupby("site", sort=False):
        row: dict[str, Any] = {"site": site}
        for phase in PHASES:
            row[phase] = union_seconds(_intervals(g[g["phase"] == phase]))
        row["end_to_end_s"] = union_seconds(_intervals(g))
        mine = ok[ok["site"] == site] if not ok.empty else ok
        okb = float(pd.to_numeric(mine["bytes_requested"]).sum()) if not mine.empty else 0.0
        ok_wall = union_seconds(_intervals(mine)) if not mine.empty else 0.0
        row["ok_bytes"] = okb
        row["raw_mb_per_s"] = okb / ok_wall / 1e6 if ok_wall > 0 else math.nan
        e2e = row["end_to_end_s"]
        row["effective_mb_per_s"] = okb / e2e / 1e6 if e2e > 0 else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


# --- cost ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """List prices of one remote: per GB (10⁹ bytes) downloaded, per GB stored for a month."""

    egress_per_gb: float
    storage_per_gb_month: float
    currency: str

    @classmethod
    def from_config(cls, d: Mapping[str, Any] | None) -> Prices | None:
        if not d:
            return None
        return cls(
            float(d["egress_per_gb"]), float(d["storage_per_gb_month"]), str(d.get("currency", ""))
        )


NO_PRICES = "no prices configured for this remote (set prices: in the config)"


def _stored_bytes(t: pd.DataFrame) -> float:
    """The bytes the campaign's uploads left on the remote: each upload that arrived holds
    its dataset (``bytes_requested``), once, however many bytes its retries sent."""
    arrived = (t["direction"] == "upload") & (t["status"] != "failed")
    return float(pd.to_numeric(t.loc[arrived, "bytes_requested"], errors="coerce").fillna(0).sum())


def campaign_cost(transfers: pd.DataFrame, prices: Mapping[str, Prices | None]) -> pd.DataFrame:
    """What the campaign cost on each remote, at the configured list prices.

    * egress = bytes of every download attempt (any status, and the attempts a rerun
      replaced or a kill cut short: the store billed their bytes too; the column
      ``bytes_moved_all_attempts`` where the table has it) / 10⁹ x ``egress_per_gb``;
      uploads (ingress) are assumed free;
    * storage = the dataset's bytes (``bytes_requested``) of every upload that arrived (each
      repeat and layout is a copy kept on the remote; a failed upload's partial objects and
      the bytes a retry sent again are not stored data) / 10⁹ x ``storage_per_gb_month``,
      for one month;
    * requests (API calls), minimum storage durations, taxes and discounts are not included.

    Costs are NaN, with ``note`` saying why, for a remote without prices.
    """
    rows = []
    names = list(dict.fromkeys([*prices.keys(), *transfers.get("remote", pd.Series()).unique()]))
    for remote in names:
        t = transfers[transfers["remote"] == remote] if not transfers.empty else transfers
        moved = pd.to_numeric(t["bytes_moved"], errors="coerce").fillna(0) if not t.empty else t
        billed = (
            pd.to_numeric(t["bytes_moved_all_attempts"], errors="coerce").fillna(moved)
            if "bytes_moved_all_attempts" in t and not t.empty
            else moved
        )
        down = float(billed[t["direction"] == "download"].sum()) if not t.empty else 0.0
        tries = pd.to_numeric(t.get("attempts", pd.Series(dtype=float)), errors="coerce")
        attempts = int(tries[t["direction"] == "download"].fillna(1).sum()) if not t.empty else 0
        up = _stored_bytes(t) if not t.empty else 0.0
        p = prices.get(remote)
        row = {
            "remote": remote,
            "downloaded_gb": down / BYTES_PER_GB,
            "download_attempts": attempts,
            "stored_gb": up / BYTES_PER_GB,
            "currency": p.currency if p else "",
            "egress_cost": math.nan,
            "storage_cost_month": math.nan,
            "total_cost": math.nan,
            "note": NO_PRICES if p is None else "",
        }
        if p is not None:
            row["egress_cost"] = egress_cost(down, "download", p)
            row["storage_cost_month"] = row["stored_gb"] * p.storage_per_gb_month
            row["total_cost"] = row["egress_cost"] + row["storage_cost_month"]
        rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[
            "remote",
            "downloaded_gb",
            "download_attempts",
            "stored_gb",
            "currency",
            "egress_cost",
            "storage_cost_month",
            "total_cost",
            "note",
        ],
    )


def egress_cost(nbytes: float, direction: str, prices: Prices | None) -> float:
    """What moving ``nbytes`` costs in egress at the remote's list prices: bytes / 10⁹ x
    ``egress_per_gb`` for a download, 0 for an upload (ingress is assumed free), NaN
    without prices. The one rule the cost block and ``cloudbench estimate`` apply."""
    if prices is None:
        return math.nan
    return nbytes / BYTES_PER_GB * prices.egress_per_gb if direction == "download" else 0.0


def hours_per_tb(mb_per_s: float) -> float:
    """Hours to move 1 TB (10^12 bytes) at ``mb_per_s`` MB/s."""
    if not mb_per_s or math.isnan(mb_per_s) or mb_per_s <= 0:
        return math.nan
    return BYTES_PER_TB / (mb_per_s * 1e6) / 3600


def per_tb(summary: pd.DataFrame, prices: Mapping[str, Prices | None]) -> pd.DataFrame:
    """For each site x remote x direction x layout: hours to move 1 TB at the measured median
    (P50) rate, the egress cost of downloading 1 TB (uploads: 0, ingress assumed free), and
    the cost of keeping 1 TB on the remote for one month."""
    rows, keys = [], keys_without("tool", "strategy", "setting", "repeat")
    for r in summary.itertuples(index=False):
        p = prices.get(r.remote)
        tb_gb = BYTES_PER_TB / BYTES_PER_GB
        rows.append({
            **{k: getattr(r, k) for k in keys},
            "median_mb_per_s": r.p50, "hours_per_tb": hours_per_tb(r.p50),
            "currency": p.currency if p else "",
            "egress_cost_per_tb": egress_cost(BYTES_PER_TB, r.direction, p),
            "storage_cost_per_tb_month": tb_gb * p.storage_per_gb_month if p else math.nan,
            "note": NO_PRICES if p is None else "",
        })  # fmt: skip
    return pd.DataFrame(
        rows,
        columns=[
            *keys,
            "median_mb_per_s",
            "hours_per_tb",
            "currency",
            "egress_cost_per_tb",
            "storage_cost_per_tb_month",
            "note",
        ],
    )
