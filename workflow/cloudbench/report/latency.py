"""Statistics for the report's Latency and Tools sections: pure functions of tables.

Definitions (captions repeat them; change both together):

* **RTT** of a site-remote pair: the median, over that pair's probe records (before and
  after the transfers), of each record's P50 TCP connect time. A TCP connect takes one
  round trip, and the P50 of several is robust to a slow accept.
* **rate vs RTT**: the ``ok`` transfers' rates (MB/s) against their pair's RTT in ms,
  with an ordinary least-squares line (``stats.linear_fit``) per direction; no line with
  fewer than 3 distinct RTTs (``stats.TREND_MIN_PLACES``), as for distance.
* **window ceiling**: one TCP stream cannot move more than window / RTT bytes per second;
  ``streams`` parallel streams at most ``streams`` times that. Stated only where the
  window is known (a site's configured or measured window), never guessed.
* **failure rate** of a tool: rows whose status is not ``ok`` (failed, corrupt,
  unverified) over all its rows, as SaladCloud tabulated it: what a campaign ended with.
  A failure that a rerun measured again is gone from the rows but kept as an attempt, so
  the **attempt failure rate** (failed attempts over every attempt, each killed one
  included) is what a user's copy meets: a tool that fails every other try and succeeds
  on the rerun has a failure rate of 0 and an attempt failure rate of 50%.
* **tool x strategy rate**: per measurement identity, median of the ``ok`` rates with its
  order-statistic interval and coverage (:mod:`cloudbench.intervals`; none below 3 repeats).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from cloudbench.campaign.identity import LINK, MEASUREMENT, ROUTE
from cloudbench.intervals import median_interval
from cloudbench.report.select import same_keys
from cloudbench.report.stats import TREND_MIN_PLACES, LinearFit, linear_fit

MS = 1000.0
PROBE_COLUMNS = [
    *LINK, "when", "started_utc", "time_of_day_utc", "endpoint_host", "scheme",
    "count", "object_bytes", "status",
    "connect_p50_ms", "tls_p50_ms", "get_ttfb_p50_ms", "get_ttfb_p90_ms", "get_ttfb_p99_ms",
    "put_ttfb_p50_ms", "put_ttfb_p90_ms", "put_ttfb_p99_ms",
    "list_after_write_p50_ms", "list_after_write_p90_ms", "list_after_write_p99_ms",
    "read_after_write_p50_ms", "read_after_write_p90_ms", "read_after_write_p99_ms",
    "tcp_rmem_max_bytes", "tcp_wmem_max_bytes", "clock_ahead_low_s", "clock_ahead_high_s",
    "reason",
]  # fmt: skip
CEILING_COLUMNS = [
    *ROUTE, "rtt_ms", "window_bytes", "connections", "ceiling_mb_s",
    "median_mb_s", "of_ceiling",
]  # fmt: skip
# The buffer that bounds a direction's window at the site: it receives downloads, sends uploads.
WINDOW_OF = {"download": "tcp_rmem_max_bytes", "upload": "tcp_wmem_max_bytes"}
FAILURE_COLUMNS = [
    "tool", "direction", "rows", "not_ok", "failed", "corrupt", "failure_rate",
    "attempts", "failed_attempts", "attempt_failure_rate",
]  # fmt: skip
# A measurement's identity less the repeat, in the order tables show it: a statistic pools
# the repeats of one identity and nothing else (a table without a column has one value of it)
IDENTITY = MEASUREMENT
TOOL_COLUMNS = [*IDENTITY, "n", "median", "ci_low", "ci_high", "ci_level", "not_ok"]
PER_OBJECT_COLUMNS = [*IDENTITY, "n", "files_per_s", "s_per_object"]


def identity_of(table: pd.DataFrame) -> list[str]:
    """The identity columns ``table`` has: the keys its statistics group by."""
    return [c for c in IDENTITY if c in table.columns]


def _ms(record: Mapping[str, Any], key: str, stat: str) -> float:
    """A probe summary's statistic in ms, NaN where the record has none (http: no TLS)."""
    summary = record.get(key)
    if not summary or summary.get(stat) is None:
        return math.nan
    return round(float(summary[stat]) * MS, 6)  # ns resolution; no float noise in the TSV


def probe_table(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per probe record (``probe.run_probe``); skipped probes keep their row with
    NaN times so the report can say which remotes were not probed."""
    rows = []
    for r in records:
        rows.append({
            "site": r.get("site"), "remote": r.get("remote"), "when": r.get("when"),
            "started_utc": r.get("started_utc"), "time_of_day_utc": r.get("time_of_day_utc"),
            "endpoint_host": r.get("endpoint_host"), "scheme": r.get("scheme"),
            "count": r.get("count"), "object_bytes": r.get("object_bytes"),
            "status": r.get("status"),
            "connect_p50_ms": _ms(r, "tcp_connect_s", "p50"),
            "tls_p50_ms": _ms(r, "tls_handshake_s", "p50"),
            **{f"{op}_ttfb_{q}_ms": _ms(r, f"{op}_ttfb_s", q)
               for op in ("get", "put") for q in ("p50", "p90", "p99")},
            **{f"{op}_after_write_{q}_ms": _ms(r, f"{op}_after_write_s", q)
               for op in ("list", "read") for q in ("p50", "p90", "p99")},
            "tcp_rmem_max_bytes": r.get("tcp_rmem_max_bytes"),
            "tcp_wmem_max_bytes": r.get("tcp_wmem_max_bytes"),
            "clock_ahead_low_s": (r.get("clock_ahead_of_store_s") or {}).get("low"),
            "clock_ahead_high_s": (r.get("clock_ahead_of_store_s") or {}).get("high"),
            "reason": r.get("reason"),  # why a probe was skipped
        })  # fmt: skip
    return pd.DataFrame(rows, columns=PROBE_COLUMNS)


def pair_rtt(probes: pd.DataFrame) -> pd.DataFrame:
    """``site``, ``remote``, ``rtt_ms``, ``probes``: each pair's RTT (see the definitions)."""
    ok = probes[probes["connect_p50_ms"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=[*LINK, "rtt_ms", "probes"])
    g = ok.groupby(LINK, sort=True)["connect_p50_ms"]
    return g.agg(rtt_ms="median", probes="size").reset_index()


VISIBILITY_COLUMNS = [
    *LINK, "copies_read", "min_copy_age_s", "median_copy_age_s",
    "clock_correction_low_s", "clock_correction_high_s",
    "min_age_store_clock_low_s", "min_age_store_clock_high_s",
]  # fmt: skip


def clock_ahead(probes: pd.DataFrame) -> pd.DataFrame:
    """Per site and remote: the site's clock minus the store's, as bounds that hold over all
    its probes (the widest low to high of them: a clock may drift between the probe before
    and the one after). Only probes that measured it."""
    cols = ["clock_ahead_low_s", "clock_ahead_high_s"]
    if probes.empty or not set(cols) <= set(probes.columns):
        return pd.DataFrame(columns=[*LINK, *cols])
    known = probes.dropna(subset=cols)
    return (
        known.groupby(LINK, sort=True)
        .agg(clock_ahead_low_s=(cols[0], "min"), clock_ahead_high_s=(cols[1], "max"))
        .reset_index()
    )


def copy_visibility(transfers: pd.DataFrame, probes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per download site (other than the upload site) and remote: how long after the upload
    site published each copy this site first read it (``copy_age_s``, both ends from the
    manifest exchange; a copy read again later, as ``repeats: auto`` does, counts once, at
    its first read).

    ``copy_age_s`` subtracts two sites' clocks: it is no bound on the store's delay when the
    reader's clock is behind. Where both sites' probes measured their clock against the
    store's (``clock_ahead_low_s``/``high_s``), the smallest age is also given on the
    store's one clock, as the interval it must lie in: age - (reader ahead - uploader
    ahead), with both offsets' bounds. The others mostly say when the site ran."""
    if transfers.empty or "copy_age_s" not in transfers:
        return pd.DataFrame(columns=VISIBILITY_COLUMNS)
    uploaders = set(transfers.loc[transfers["direction"] == "upload", "site"])
    read = transfers[
        (transfers["direction"] == "download")
        & transfers["copy_age_s"].notna()
        & ~transfers["site"].isin(uploaders)
    ]
    if read.empty:
        return pd.DataFrame(columns=VISIBILITY_COLUMNS)
    first = read.groupby([*LINK, "copy_published_utc"])["copy_age_s"].min()
    out = (
        first.groupby(LINK)
        .agg(copies_read="size", min_copy_age_s="min", median_copy_age_s="median")
        .reset_index()
    )
    ahead = clock_ahead(probes if probes is not None else pd.DataFrame())
    up = ahead[ahead["site"].isin(uploaders)].drop(columns="site")
    up = up.rename(columns={"clock_ahead_low_s": "up_low", "clock_ahead_high_s": "up_high"})
    out = out.merge(ahead, on=LINK, how="left").merge(up, on="remote", how="left")
    out["clock_correction_low_s"] = out["clock_ahead_low_s"] - out["up_high"]
    out["clock_correction_high_s"] = out["clock_ahead_high_s"] - out["up_low"]
    out["min_age_store_clock_low_s"] = out["min_copy_age_s"] - out["clock_correction_high_s"]
    out["min_age_store_clock_high_s"] = out["min_copy_age_s"] - out["clock_correction_low_s"]
    return out[VISIBILITY_COLUMNS]


def rate_vs_rtt(
    transfers: pd.DataFrame, probes: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, LinearFit | None]]:
    """The ``ok`` transfers joined with their pair's RTT, and a fitted line per direction
    (None where fewer than :data:`TREND_MIN_PLACES` distinct RTTs make a line meaningless:
    :func:`distinct_rtts` says how many there are)."""
    ok = transfers[(transfers["status"] == "ok") & transfers["mb_per_s"].notna()]
    joined = ok.merge(pair_rtt(probes), on=LINK, how="inner")
    fits: dict[str, LinearFit | None] = {}
    for direction, g in joined.groupby("direction", sort=True):
        if distinct_rtts(g) < TREND_MIN_PLACES:
            fits[str(direction)] = None
            continue
        fits[str(direction)] = linear_fit(g["rtt_ms"], g["mb_per_s"])
    return joined, fits


def distinct_rtts(joined: pd.DataFrame) -> int:
    """How many distinct round-trip times the joined rows of one direction stand at."""
    return int(joined["rtt_ms"].nunique()) if "rtt_ms" in joined else 0


def window_ceiling_mb_s(window_bytes: float, rtt_s: float, streams: int = 1) -> float:
    """The most ``streams`` TCP streams with a ``window_bytes`` window can move over a path
    of round-trip time ``rtt_s``: streams x window / RTT, in MB/s (NaN if RTT is not > 0)."""
    if not rtt_s or rtt_s <= 0 or window_bytes < 0 or streams < 1:
        return math.nan
    return streams * window_bytes / rtt_s / 1e6


def window_ceilings(transfers: pd.DataFrame, probes: pd.DataFrame) -> pd.DataFrame:
    """Per site, remote and direction where the window is known: the pair's RTT, the site's
    largest window for that direction (``WINDOW_OF``, as its probes recorded it), the
    median connections of the ok transfers, the ceiling connections x window / RTT, the
    median observed rate and its fraction of the ceiling. Pairs without a known window or
    RTT get no row: the ceiling is stated, never guessed."""
    rtt = pair_rtt(probes)
    ok = transfers[(transfers["status"] == "ok") & transfers["mb_per_s"].notna()]
    if rtt.empty or ok.empty:
        return pd.DataFrame(columns=CEILING_COLUMNS)
    rows = []
    for key, g in ok.groupby(ROUTE, sort=True):
        route = dict(zip(ROUTE, key, strict=True))
        pair = rtt[same_keys(rtt, route, LINK)]
        mine = probes[same_keys(probes, route, LINK)]
        window = pd.to_numeric(mine[WINDOW_OF.get(str(route["direction"]), "")], errors="coerce")
        if pair.empty or window.dropna().empty:
            continue
        rtt_ms, win = float(pair["rtt_ms"].iloc[0]), float(window.median())
        conns = int(max(1, np.median(g["connections"].fillna(1))))
        ceiling = window_ceiling_mb_s(win, rtt_ms / MS, conns)
        median = float(g["mb_per_s"].median())
        rows.append(route | {
            "rtt_ms": rtt_ms, "window_bytes": int(win), "connections": conns,
            "ceiling_mb_s": ceiling,
            "median_mb_s": median, "of_ceiling": median / ceiling if ceiling else math.nan,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=CEILING_COLUMNS)


def per_object_by_tool(transfers: pd.DataFrame) -> pd.DataFrame:
    """Per measurement identity (tool, layout and setting apart, never pooled): median
    files/s and seconds per object of the ok rows (what many small files cost each tool),
    with the number of rows."""
    cols = [
        c for c in PER_OBJECT_COLUMNS if c in (*identity_of(transfers), *PER_OBJECT_COLUMNS[-3:])
    ]
    need = {"files_per_s", "s_per_object"}
    if transfers.empty or not need <= set(transfers.columns):
        return pd.DataFrame(columns=cols)
    ok = transfers[(transfers["status"] == "ok") & transfers["s_per_object"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    g = ok.groupby(identity_of(ok), sort=True)
    return g.agg(
        n=("s_per_object", "size"),
        files_per_s=("files_per_s", "median"),
        s_per_object=("s_per_object", "median"),
    ).reset_index()[cols]


def failure_rate_by_tool(transfers: pd.DataFrame) -> pd.DataFrame:
    """Per tool and direction: rows, rows not ``ok``, of which failed and corrupt, the
    failure rate (not ok / rows); and every attempt (a row's ``attempts``; 1 in a table
    without the column), those that failed (all but the ok row's last), and their rate."""
    if transfers.empty:
        return pd.DataFrame(columns=FAILURE_COLUMNS)
    rows = []
    for (tool, direction), g in transfers.groupby(["tool", "direction"], sort=True):
        not_ok = int((g["status"] != "ok").sum())
        tries = g["attempts"].fillna(1).clip(lower=1) if "attempts" in g else pd.Series(1, g.index)
        attempts = int(tries.sum())
        failed_attempts = attempts - (len(g) - not_ok)
        rows.append({
            "tool": tool, "direction": direction, "rows": len(g), "not_ok": not_ok,
            "failed": int((g["status"] == "failed").sum()),
            "corrupt": int((g["status"] == "corrupt").sum()),
            "failure_rate": not_ok / len(g),
            "attempts": attempts, "failed_attempts": failed_attempts,
            "attempt_failure_rate": failed_attempts / attempts,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=FAILURE_COLUMNS)


def tool_strategy_rates(transfers: pd.DataFrame) -> pd.DataFrame:
    """Per measurement identity: n ok, median rate (MB/s) with its order-statistic interval
    and that interval's coverage, and how many rows were not ok (they have no rate, so they
    are not in n)."""
    keys = identity_of(transfers)
    if transfers.empty:
        return pd.DataFrame(columns=TOOL_COLUMNS)
    rows = []
    for key, g in transfers.groupby(keys, sort=True):
        ok = g[(g["status"] == "ok") & g["mb_per_s"].notna()]["mb_per_s"].to_numpy(float)
        iv = median_interval(ok)
        rows.append({
            **dict(zip(keys, key, strict=True)), "n": int(ok.size),
            "median": float(np.median(ok)) if ok.size else math.nan,
            "ci_low": iv.low, "ci_high": iv.high, "ci_level": iv.level,
            "not_ok": int((g["status"] != "ok").sum()),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=[c for c in TOOL_COLUMNS if c in keys or c not in IDENTITY])
