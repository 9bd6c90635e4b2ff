"""The report's statistics on constructed data whose answers are known."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cloudbench.report import stats
from cloudbench.report.labels import NA
from cloudbench.report.stats import (
    LinearFit,
    Prices,
    campaign_cost,
    haversine_km,
    hours_per_tb,
    interval_rates,
    linear_fit,
    outlier_flags,
    per_tb,
    resent_bytes,
    speedup,
    stalls,
    summarise,
    sustained_rate,
    time_budget,
)

pytestmark = pytest.mark.unit

REPORT = Path(__file__).resolve().parents[1] / "workflow" / "report"
MB = 10**6


def series(points: list[tuple[float, float]]) -> pd.DataFrame:
    """A per-second series from (elapsed_s, cumulative MB)."""
    return pd.DataFrame(
        {"elapsed_s": [t for t, _ in points], "bytes": [int(b * MB) for _, b in points]}
    )


def ramp_then(rate: float, ramp: list[float], seconds: int) -> pd.DataFrame:
    """``ramp`` MB in each of the first seconds, then exactly ``rate`` MB/s."""
    pts, total = [], 0.0
    for t in range(1, seconds + 1):
        total += ramp[t - 1] if t <= len(ramp) else rate
        pts.append((float(t), total))
    return series(pts)


# --- sustained rate ---------------------------------------------------------------------------


def test_sustained_rate_ignores_a_two_second_ramp():
    s = ramp_then(100, [10, 40], 30)  # 2 s ramp, then 28 s at exactly 100 MB/s
    r = sustained_rate(s, whole_mb_per_s=90.0)
    assert r.method == "series"
    assert r.mb_per_s == pytest.approx(100.0)
    assert r.start_s == 3.0 and r.end_s == 30.0  # first sample at or after 10% of 30 s
    # the ramp is what the window leaves out: a window from the first sample has it, and
    # reads lower (97.9 MB/s)
    assert sustained_rate(s, ramp_fraction=0.0).mb_per_s < r.mb_per_s


def test_sustained_window_starts_at_ten_percent_of_the_last_sample():
    s = ramp_then(50, [5, 5, 5, 5, 5], 60)  # 5 s ramp: 10% of 60 s = 6 s, past the ramp
    r = sustained_rate(s)
    assert r.start_s == 6.0
    assert r.mb_per_s == pytest.approx(50.0)
    # a custom fraction moves the window
    assert sustained_rate(s, ramp_fraction=0.5).start_s == 30.0


def test_sustained_rate_excludes_the_first_interval_even_for_short_transfers():
    s = series([(1.0, 5), (2.0, 25), (3.0, 45)])  # slow first second, then 20 MB/s
    assert sustained_rate(s).mb_per_s == pytest.approx(20.0)


def test_sustained_rate_falls_back_with_fewer_than_three_samples():
    r = sustained_rate(series([(1.0, 10), (2.0, 30)]), whole_mb_per_s=12.5)
    assert r == stats.Sustained(12.5, "whole-transfer", r.start_s, r.end_s)
    assert math.isnan(r.start_s)
    assert sustained_rate(series([]), whole_mb_per_s=7.0).mb_per_s == 7.0
    # no whole-transfer rate given: NaN, never a made-up number
    assert math.isnan(sustained_rate(series([(1.0, 1)])).mb_per_s)


def test_a_window_shorter_than_one_and_a_half_seconds_falls_back_to_the_whole_transfer_rate():
    """A new user's 2.3 s copies, capped at 8.39 MB/s, showed a sustained 9.16 MB/s: the
    window from the 1 s line to the closing line 1.3 s later read the lines' timing."""
    short = series([(1.0, 6.0), (2.0, 14.0), (2.3, 18.87)])
    r = sustained_rate(short, whole_mb_per_s=8.13)
    assert (r.method, r.mb_per_s) == ("whole-transfer", 8.13)
    # the same copy a second longer has a window of 2 s (1.5 s is enough): a rate from the series
    longer = series([(1.0, 6.0), (2.0, 14.0), (3.0, 22.4)])
    assert sustained_rate(longer, whole_mb_per_s=7.0).method == "series"


def test_sustained_rate_counts_samples_at_the_same_instant_once():
    # rclone's closing stats line repeats the last time: still only 2 distinct samples
    s = series([(1.0, 10), (2.0, 30), (2.0, 30)])
    assert sustained_rate(s, 9.0).method == "whole-transfer"
    # and with 3 distinct samples the duplicate changes nothing
    s = series([(1.0, 10), (2.0, 30), (3.0, 50), (3.0, 50)])
    assert sustained_rate(s).mb_per_s == pytest.approx(20.0)


def test_sustained_rate_is_order_independent():
    s = ramp_then(100, [10, 40], 30)
    assert sustained_rate(s.sample(frac=1, random_state=1)).mb_per_s == pytest.approx(100.0)


def test_interval_rates_merge_the_closing_stats_line():
    s = series([(1.0, 10), (2.0, 30), (3.0, 50), (3.004, 50)])
    r = interval_rates(s)
    assert list(r["elapsed_s"]) == [1.0, 2.0, 3.004]
    # no drop to zero at the end: the closing line's interval is its neighbour's, widened
    assert list(r["mb_per_s"].round(3)) == [10.0, 20.0, 19.92]


def test_interval_rates_are_timeseries_tsvs_numbers_unclamped(tmp_path):
    """One convention: the figure's and the burst's rates are the series file's (and so
    timeseries.tsv's), a byte count that went down included (user-visible, never hidden)."""
    from cloudbench.measure import series as series_file

    pts = [(1.0, 10_000_000), (2.0, 30_000_000), (3.0, 25_000_000), (4.0, 45_000_000)]
    series_file.write(tmp_path / "r1.series.tsv", pts)
    written = pd.read_csv(tmp_path / "r1.series.tsv", sep="\t")
    r = interval_rates(written)
    assert list(r["mb_per_s"].round(6)) == list(written["mb_per_s"].round(6))
    assert r["mb_per_s"].min() == pytest.approx(-5.0)  # not clamped to 0


# --- speed-up ------------------------------------------------------------------------------------


def test_speedup_is_the_ratio_of_medians():
    r = speedup([20, 20, 20], [10, 10, 10])
    assert r[:3] == (2.0, 2.0, 2.0) and r.level == pytest.approx(0.9)
    r = speedup([2, 4, 6, 100], [1, 2, 3])  # medians 5 and 2: robust to the 100
    assert r.ratio == pytest.approx(2.5)
    assert r.low <= 2.5 <= r.high


def test_speedup_interval_is_exact_and_widens_with_noise():
    rng = np.random.default_rng(5)
    tight = speedup(rng.normal(200, 2, 8), rng.normal(100, 1, 8))
    loose = speedup(rng.normal(200, 40, 8), rng.normal(100, 20, 8))
    assert tight.low < 2.0 < tight.high or tight.ratio == pytest.approx(2.0, rel=0.02)
    assert (loose.high - loose.low) > (tight.high - tight.low)
    assert speedup([3, 4, 5], [1, 2, 3]) == speedup([3, 4, 5], [1, 2, 3])


def test_speedup_edge_cases():
    r = speedup([5.0], [2.0, 3.0])
    assert r.ratio == pytest.approx(2.0) and math.isnan(r.low)  # 1 repeat: no interval
    assert math.isnan(speedup([], [1.0, 2.0]).ratio)
    assert math.isnan(speedup([1.0], [0.0]).ratio)


# --- distance and the linear fit --------------------------------------------------------------


def _chord_km(a, b) -> float:
    """The same great-circle distance another way: the angle between the two unit vectors."""

    def unit(p):
        lat, lon = map(math.radians, p)
        return np.array(
            [math.cos(lat) * math.cos(lon), math.cos(lat) * math.sin(lon), math.sin(lat)]
        )

    return stats.EARTH_RADIUS_KM * math.acos(float(np.clip(unit(a) @ unit(b), -1, 1)))


def test_haversine_edinburgh_chicago():
    # Edinburgh (55.9533 N, 3.1883 W) to Chicago (41.8781 N, 87.6298 W): about 5,960 km
    # (published great-circle figures: 5,950-5,960 km)
    edinburgh, chicago = (55.9533, -3.1883), (41.8781, -87.6298)
    d = haversine_km(edinburgh, chicago)
    assert d == pytest.approx(5960, rel=0.01)
    assert d == pytest.approx(_chord_km(edinburgh, chicago), rel=1e-9)


def test_haversine_known_values():
    assert haversine_km((10, 20), (10, 20)) == 0
    assert haversine_km((0, 0), (1, 0)) == pytest.approx(111.19, rel=1e-3)  # 1 degree
    assert haversine_km((0, 0), (0, 180)) == pytest.approx(math.pi * stats.EARTH_RADIUS_KM)
    assert haversine_km((90, 0), (-90, 0)) == pytest.approx(math.pi * stats.EARTH_RADIUS_KM)
    a, b = (51.5, -0.12), (-33.87, 151.21)
    assert haversine_km(a, b) == pytest.approx(haversine_km(b, a))


def test_linear_fit_of_a_perfect_line():
    x = [0, 1, 2, 3, 4, 5]
    f = linear_fit(x, [3 * v + 2 for v in x])
    assert f.slope == pytest.approx(3.0) and f.intercept == pytest.approx(2.0)
    assert f.slope_se == pytest.approx(0.0, abs=1e-9) and f.n == 6
    assert f.r_squared == pytest.approx(1.0)


def test_linear_fit_standard_error_matches_the_textbook_formula():
    x = np.array([1.0, 2, 3, 4, 5])
    y = np.array([2.1, 3.9, 6.2, 7.8, 10.1])
    f = linear_fit(x, y)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    se = math.sqrt((resid**2).sum() / 3 / ((x - x.mean()) ** 2).sum())
    assert (f.slope, f.intercept, f.slope_se) == pytest.approx((b, a, se))


def test_linear_fit_with_too_few_points():
    f = linear_fit([1, 2], [5, 7])
    assert f.slope == pytest.approx(2.0) and math.isnan(f.slope_se)
    with pytest.raises(ValueError, match="distinct"):
        linear_fit([3, 3, 3], [1, 2, 3])


def test_distance_trend_needs_three_distinct_distances():
    sites = {
        "a": {"location": [0, 0]},
        "b": {"location": [0, 10]},
        "c": {"location": [0, 20]},
        "d": {"location": [0, 20]},
    }
    remotes = {"main": {"location": [0, 0]}}
    dist = stats.site_remote_distances(sites, remotes)
    assert dist.set_index("site")["distance_km"]["a"] == 0
    rates = {"a": 300.0, "b": 200.0, "c": 100.0, "d": 100.0}
    t = transfers_frame([(s, "download", "plain", r, v) for s, v in rates.items() for r in (1, 2)])
    trend = stats.distance_trend(t, dist, "download")
    assert trend.distinct_distances == 3 and trend.fit is not None
    per_km = -100 / haversine_km((0, 0), (0, 10))
    assert trend.fit.slope == pytest.approx(per_km) and trend.fit.n == 4
    # two places only: points, no fit
    two = stats.distance_trend(t[t["site"].isin(["a", "b"])], dist, "download")
    assert two.fit is None and two.distinct_distances == 2 and len(two.points) == 2
    # no locations: nothing
    assert stats.site_remote_distances({"a": {"location": None}}, remotes).empty


# --- groups: outliers and the summary ---------------------------------------------------------


def transfers_frame(rows: list[tuple]) -> pd.DataFrame:
    """transfers.tsv-like rows from (site, direction, layout, repeat, rate[, status])."""
    out = []
    for row in rows:
        site, direction, layout, repeat, rate = row[:5]
        status = row[5] if len(row) > 5 else "ok"
        out.append({
            "site": site, "remote": "main", "direction": direction,
            "strategy": layout.split("-")[0], "layout": layout, "repeat": repeat,
            "bytes_requested": 100 * MB, "bytes_moved": 100 * MB,
            "seconds": 100 / rate if rate else 10.0,
            "mb_per_s": rate if status == "ok" else math.nan, "status": status,
            "retries": 1 if status == "failed" else 0, "connections": 4,
            "started_utc": f"2026-01-01T00:0{repeat}:00Z",
        })  # fmt: skip
    return pd.DataFrame(out)


def test_outlier_is_a_collapse_not_noise():
    t = transfers_frame(
        [("a", "upload", "plain", r, v) for r, v in enumerate([100, 98, 103, 40, 70], start=1)]
    )
    flags = outlier_flags(t)
    assert list(flags) == [False, False, False, True, False]  # 40 < 0.5 x 98; 70 is noise


def test_outliers_need_three_ok_repeats_in_the_group():
    t = transfers_frame([("a", "upload", "plain", 1, 100), ("a", "upload", "plain", 2, 10)])
    assert not outlier_flags(t).any()
    t = transfers_frame(
        [
            ("a", "upload", "plain", 1, 100),
            ("a", "upload", "plain", 2, 10),
            ("a", "upload", "plain", 3, 0, "failed"),
        ]
    )
    assert not outlier_flags(t).any()  # the failed repeat does not count towards 3
    # groups are separate: a slow layout is not an outlier of a fast one
    groups = (("plain", 10), ("multithread", 100))
    t = transfers_frame([("a", "upload", lay, r, v) for lay, v in groups for r in (1, 2, 3)])
    assert not outlier_flags(t).any()


def test_summarise_on_a_constructed_campaign():
    rows = [("a", "upload", "plain", r, v) for r, v in enumerate([10, 20, 30, 40], start=1)]
    rows += [("a", "upload", "multithread", r, v) for r, v in enumerate([50, 50, 50, 5], 1)]
    rows += [
        ("a", "upload", "chunked-4MiB", 1, 0, "failed"),
        ("a", "upload", "chunked-4MiB", 2, 0, "corrupt"),
        ("a", "upload", "chunked-4MiB", 3, 60),
    ]
    t = transfers_frame(rows)
    s = summarise(
        t,
        pd.DataFrame(
            columns=["site", "remote", "direction", "layout", "repeat", "elapsed_s", "bytes"]
        ),
    )
    assert list(s.columns) == stats.SUMMARY_COLUMNS
    assert set(s["tool"]) == {"rclone"}  # from the setting (a user's s5cmd rows: no tool column)
    s = s.set_index("layout")
    p = s.loc["plain"]
    assert (p["n"], p["mean"], p["p50"]) == (4, 25.0, 25.0)
    assert p["p10"] == pytest.approx(13.0) and p["p90"] == pytest.approx(37.0)  # linear
    assert p["speedup_vs_plain"] == 1.0 and math.isnan(p["speedup_ci_low"])
    # no series: the sustained rate falls back to the whole-transfer rate, and says so
    assert p["sustained_median"] == 25.0 and p["sustained_from_whole"] == 4
    m = s.loc["multithread"]
    assert m["speedup_vs_plain"] == pytest.approx(50 / 25)
    assert m["outliers"] == 1  # 5 < 0.5 x 50
    c = s.loc["chunked-4MiB"]
    assert (c["n"], c["failed"], c["corrupt"], c["retries"], c["connections"]) == (
        1,
        1,
        1,
        1,
        "4",
    )
    assert c["speedup_vs_plain"] == pytest.approx(60 / 25) and math.isnan(c["speedup_ci_low"])


def test_summarise_uses_the_series_for_the_sustained_rate():
    t = transfers_frame([("a", "download", "plain", r, 90.0) for r in (1, 2, 3)])
    frames = []
    for r in (1, 2, 3):
        s = ramp_then(100, [10, 40], 30)
        s[["site", "remote", "direction", "layout", "repeat"]] = [
            "a",
            "main",
            "download",
            "plain",
            r,
        ]
        frames.append(s)
    out = summarise(t, pd.concat(frames, ignore_index=True)).iloc[0]
    assert out["sustained_median"] == pytest.approx(100.0)
    assert out["sustained_ci_low"] == pytest.approx(100.0)
    assert out["sustained_from_whole"] == 0
    assert out["p50"] == 90.0  # the whole-transfer statistics are untouched


# --- where the time goes, and cost ------------------------------------------------------------


def test_union_seconds_counts_parallel_time_once():
    assert stats.union_seconds([(0, 10), (5, 15), (20, 25)]) == 20.0
    assert stats.union_seconds([(0, 10), (2, 3)]) == 10.0
    assert stats.union_seconds([]) == 0.0


def test_time_budget_is_wall_clock_per_phase():
    """Two uploads of 10 s one after the other (the second failed), generate and checksum of
    two files in parallel for 5 s before them: the phases are 5 s and 20 s of wall clock,
    not the 20 s and 20 s that adding up job seconds would say."""
    t = transfers_frame(
        [("a", "upload", "plain", 1, 10.0), ("a", "upload", "plain", 2, 0, "failed")]
    )
    t["started_utc"] = ["2026-01-01T00:00:05Z", "2026-01-01T00:00:15Z"]
    steps = pd.DataFrame(
        {
            "site": ["a"] * 4,
            "step": ["generate", "generate", "checksum", "checksum"],
            "started_utc": ["2026-01-01T00:00:00Z"] * 2 + ["2026-01-01T00:00:02Z"] * 2,
            "seconds": [2.0, 2.0, 3.0, 3.0],
        }
    )
    b = time_budget(steps, t).set_index("site").loc["a"]
    assert (b["prepare"], b["upload"], b["download"], b["end_to_end_s"]) == (5.0, 20.0, 0, 25.0)
    assert b["raw_mb_per_s"] == pytest.approx(10.0)  # 100 MB in the ok transfer's 10 s
    assert b["effective_mb_per_s"] == pytest.approx(100 / 25)  # and in the 25 s end to end
    assert list(b.index[:4]) == list(stats.PHASES)


def test_campaign_cost_and_one_tb():
    t = transfers_frame(
        [
            ("a", "upload", "plain", 1, 100.0),
            ("a", "download", "plain", 1, 50.0),
            ("a", "download", "plain", 2, 0, "failed"),
        ]
    )
    prices = {"main": Prices(egress_per_gb=0.09, storage_per_gb_month=0.02, currency="USD")}
    t.loc[2, "bytes_moved"] = 30 * MB  # the failed download moved 30 MB before it failed
    c = campaign_cost(t, prices).iloc[0]
    assert c["downloaded_gb"] == pytest.approx(0.13)  # what moved: 100 MB + 30 MB
    assert c["egress_cost"] == pytest.approx(0.13 * 0.09)
    assert c["storage_cost_month"] == pytest.approx(0.1 * 0.02)
    assert c["total_cost"] == pytest.approx(0.0117 + 0.002)
    t["attempts"] = [1, 1, 2]  # the failed one had been cut short once before: 45 MB more
    t["bytes_moved_all_attempts"] = [100 * MB, 100 * MB, 75 * MB]
    again = campaign_cost(t, prices).iloc[0]
    assert again["downloaded_gb"] == pytest.approx(0.175) and again["download_attempts"] == 3
    assert again["stored_gb"] == pytest.approx(0.1)  # a rerun overwrites its copy
    assert hours_per_tb(100.0) == pytest.approx(10**12 / 10**8 / 3600)  # 2.78 h
    assert math.isnan(hours_per_tb(0.0)) and math.isnan(hours_per_tb(float("nan")))
    s = summarise(t, pd.DataFrame())
    tb = per_tb(s, prices).set_index("direction")
    assert tb.loc["download", "egress_cost_per_tb"] == pytest.approx(90.0)
    assert tb.loc["upload", "egress_cost_per_tb"] == 0.0
    assert tb.loc["upload", "storage_cost_per_tb_month"] == pytest.approx(20.0)
    assert tb.loc["download", "hours_per_tb"] == pytest.approx(hours_per_tb(50.0))


def test_stored_is_what_arrived_not_what_was_sent():
    """An upload whose retries sent its dataset twice stores it once; a failed upload
    stores no copy (the issue: "stored" added every upload's bytes, failed and re-sent)."""
    t = transfers_frame(
        [
            ("a", "upload", "plain", 1, 100.0),
            ("a", "upload", "plain", 2, 0, "failed"),
            ("a", "upload", "plain", 3, 90.0),
        ]
    )
    t.loc[1, "bytes_moved"] = 40 * MB  # sent before it failed
    t.loc[2, "bytes_moved"] = 200 * MB  # a retried multipart upload sent it twice
    stored = campaign_cost(t, {"main": None}).iloc[0]["stored_gb"]
    assert stored == pytest.approx(2 * t.loc[0, "bytes_requested"] / 1e9)


def test_no_prices_means_no_numbers():
    t = transfers_frame([("a", "download", "plain", 1, 50.0)])
    c = campaign_cost(t, {"main": None}).iloc[0]
    assert math.isnan(c["total_cost"]) and "no prices" in c["note"]
    tb = per_tb(summarise(t, pd.DataFrame()), {"main": None}).iloc[0]
    assert math.isnan(tb["egress_cost_per_tb"]) and "no prices" in tb["note"]
    assert tb["hours_per_tb"] == pytest.approx(hours_per_tb(50.0))  # time needs no prices
    assert Prices.from_config(None) is None
    assert Prices.from_config(
        {"egress_per_gb": 1, "storage_per_gb_month": 2, "currency": "EUR"}
    ) == Prices(1.0, 2.0, "EUR")


# --- the captions state the definitions the code uses ----------------------------------------


def test_captions_match_the_constants():
    sustained = (REPORT / "rate_by_strategy.rst").read_text()
    assert f"{stats.RAMP_FRACTION:.0%}" in sustained
    assert f"fewer than {stats.MIN_SERIES_POINTS}" in sustained
    assert f"shorter than {stats.MIN_WINDOW_S:g} s" in sustained
    for name, method in (("rate_by_strategy.rst", "order-statistic"), ("speedup.rst", "Mann")):
        text = (REPORT / name).read_text()
        assert "coverage" in text and method in text, name
        assert "bootstrap" not in text, name
    summary = (REPORT / "summary_table.rst").read_text()
    assert f"below {stats.OUTLIER_FRACTION} ×" in summary
    assert f"at least {stats.OUTLIER_MIN_REPEATS}" in summary
    distance = (REPORT / "rate_vs_distance.rst").read_text()
    assert str(stats.EARTH_RADIUS_KM) in distance and "too few sites for a trend" in distance
    assert re.search(r"10\\ :sup:`12`", (REPORT / "cost.rst").read_text())


def test_linear_fit_is_a_frozen_record():
    f = linear_fit([0, 1, 2], [0, 1, 2])
    assert isinstance(f, LinearFit)
    with pytest.raises(AttributeError):
        f.slope = 2  # type: ignore[misc]


def test_headline_says_when_a_speed_up_rests_on_retried_repeats():
    """A repeat that rclone retried (the store went away mid-copy) drags its median down;
    the front page must not present the gap as a pure layout effect."""
    from cloudbench.report import headline

    rows = [("a", "upload", "plain", 1, 8.25), ("a", "upload", "plain", 2, 1.89)]
    rows += [("a", "upload", "chunked-3MiB", r, 8.24) for r in (1, 2)]
    t = transfers_frame(rows)
    t.loc[1, "retries"] = 1  # plain r2: rclone's whole-copy retry after the outage
    t["setting"] = "rclone-1xauto"
    summary = summarise(t, pd.DataFrame())
    said = headline.sentences(headline.rows(t, summary))
    assert said == [
        "a upload: fastest chunked-3MiB at 8.2 MB/s, ×1.63 over plain; too few ok repeats "
        "(under 3) to tell it apart from plain (rclone retried during these repeats: plain 1; "
        "the rates include the time lost)."
    ]
    t.loc[1, "retries"] = 0
    said = headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))
    assert said == [
        "a upload: fastest chunked-3MiB at 8.2 MB/s, ×1.63 over plain; too few ok repeats "
        "(under 3) to tell it apart from plain."
    ]
    # a low-level retry: rclone logs nothing at -v, but it moved 4 MiB more than it had to
    t.loc[3, "bytes_moved"] = t.loc[3, "bytes_requested"] + 4 * 2**20
    said = headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))
    assert said == [
        "a upload: fastest chunked-3MiB at 8.2 MB/s, ×1.63 over plain; too few ok repeats "
        "(under 3) to tell it apart from plain (rclone counted bytes beyond the data (sent "
        "again after a failed request): chunked-3MiB 4.2 MB; the rates include the time "
        "lost)."
    ]
    assert resent_bytes(t) == 4 * 2**20
    t.loc[3, "retries"] = 1  # a whole-copy retry re-sends too: said as a retry, not twice
    assert resent_bytes(t) == 0


def test_a_stall_inside_an_ok_transfer_is_said_on_the_front_page():
    from cloudbench.report import headline

    rows = [("v", "download", "plain", r, 4.2) for r in (1, 2, 3)]
    rows += [("v", "download", "chunked-8MiB", r, v) for r, v in ((1, 4.1), (2, 1.0), (3, 4.2))]
    t = transfers_frame(rows).assign(setting="rclone-1xauto", longest_stall_s=1.0)
    t.loc[4, "longest_stall_s"] = 77.2  # chunked r2: the server was down, rclone waited
    said = headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))
    assert "the copy moved nothing for a while: chunked-8MiB r2 77 s; the rates include" in said[0]
    assert stalls(t) == [(2, 77.2)]
    t.loc[4, "longest_stall_s"] = 9.0  # below STALL_NOTED_S: jitter, not an outage
    assert "nothing" not in headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))[0]
    # a user's store was down 5 s of an 8 s upload: a large share of a short copy is named
    t.loc[4, ["seconds", "longest_stall_s"]] = [8.0, 4.93]
    assert stalls(t) == [(2, 4.93)]
    said = headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))[0]
    assert "the copy moved nothing for a while: chunked-8MiB r2 5 s" in said
    t.loc[4, "longest_stall_s"] = 2.5  # a third of it, but under 3 s: rclone's stats jitter
    assert stalls(t) == []
    # ... and the 6 requests the SDK sent again during that outage are said beside it
    t["request_retries"] = 0
    t.loc[4, "request_retries"] = 6
    said = headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))[0]
    assert (
        "(requests sent again inside rclone (columns request_retries, low_level_retries): "
        "chunked-8MiB 6; the rates include the time lost)." in said
    ), said
    # s5cmd's SDK counts them too (its debug lines): said as its own, not rclone's
    s5 = t.assign(tool="s5cmd", setting="s5cmd-1xauto")
    said = headline.sentences(headline.rows(s5, summarise(s5, pd.DataFrame())))[0]
    assert "requests sent again inside s5cmd (columns" in said and "inside rclone" not in said
    t.loc[4, "request_retries"] = 0
    assert "sent again" not in headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))[0]
    # another user's store, down 8 s: rclone sent 12 whole PutObjects again itself, which
    # the SDK does not count; they are said alike, added to the SDK's
    t["low_level_retries"] = 0
    t.loc[4, ["request_retries", "low_level_retries"]] = [2, 12]
    said = headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))[0]
    assert "low_level_retries): chunked-8MiB 14; the rates" in said, said


def test_rclone_flags_from_the_environment_are_on_the_front_page():
    """A user slowed downloads with RCLONE_BWLIMIT=4M; the report said "rclone flags
    (none)" and the slow rates looked like a slow store."""
    from cloudbench.report import headline

    t = transfers_frame([("a", "upload", "plain", 1, 150.0), ("b", "download", "plain", 1, 4.18)])
    t["setting"] = "rclone-1xauto"
    t["rclone_env"] = [None, "RCLONE_BWLIMIT=4M"]
    s = summarise(t, pd.DataFrame())
    page = headline.headline_html(t, s, {"campaign": "c"}, None)
    assert "environment, not in the campaign file: RCLONE_BWLIMIT=4M in 1 of 2 transfers" in page
    t["rclone_env"] = None
    assert "environment" not in headline.headline_html(t, s, {"campaign": "c"}, None)


def test_a_cap_some_rates_ran_under_is_counted_not_said_of_all():
    """A run stopped while RCLONE_BWLIMIT=1M was set, then rerun without it, kept the capped
    repeats that had finished: the first screen said "Rates capped" of the whole campaign,
    and that s5cmd's rates were not comparable with rclone's, when 1 of 4 rclone rates ran
    capped. A failed copy under the cap shaped no rate: it is not counted."""
    from cloudbench.report import headline

    rows = [("a", "upload", "plain", k, r) for k, r in enumerate((81.7, 90.3, 2.07, 99.4))]
    t = transfers_frame([*rows, ("a", "upload", "plain", 5, 0.0, "failed")])
    t["tool"], t["setting"] = "rclone", "rclone-1xauto"
    t["rclone_env"] = [None, None, "RCLONE_BWLIMIT=1M", None, "RCLONE_BWLIMIT=1M"]
    s5 = t.head(4).assign(tool="s5cmd", setting="s5cmd-1x8", rclone_env=None)
    t = pd.concat([t, s5], ignore_index=True)
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"}, None)
    assert (
        "Rates capped</b>: RCLONE_BWLIMIT=1M = 1 MiB/s = 1.0 MB/s per rclone process, from "
        "the environment, in 1 of 4 rclone transfers with a rate (column rclone_env)"
    ) in page
    assert "not capped" not in page
    t["rclone_env"] = [None] * 4 + ["RCLONE_BWLIMIT=1M"] + [None] * 4  # only the failed copy
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"}, None)
    assert "Rates capped" not in page


def test_the_legend_explains_only_what_the_table_shows_and_reruns_are_counted():
    """A new user's one-setting, all-ok campaign read a legend about connections and green
    and red rows it did not have; its "retried 0" hid that 20 of 24 repeats had been
    measured again after a failed attempt."""
    from cloudbench.report import headline

    t = transfers_frame([("a", "upload", "plain", r, 8.1 + r / 100) for r in (1, 2, 3)])
    t["setting"] = "rclone-1x2"
    t["attempts"] = [1, 3, 2]
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"}, None)
    assert "tool-clients x objects" not in page and "Green" not in page and "Red" not in page
    assert ">rerun</th>" in page and "<td>0</td><td>3</td></tr>" in page  # retried, rerun
    t = pd.concat([t, t.assign(setting="rclone-4x32")], ignore_index=True)
    t.loc[5, ["status", "mb_per_s"]] = ["failed", math.nan]
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"}, None)
    assert "tool-clients x objects at once" in page and "Red: a failed" in page
    assert headline.reruns(t.drop(columns="attempts")) == 0  # records from before attempts


def test_headline_calls_a_layout_best_only_when_its_interval_says_so():
    """Two repeats a layout 1% ahead is not a winner (a user saw "best ... ×1.01" in green);
    five repeats each, clearly apart, is. Speed-ups always show two decimals."""
    from cloudbench.report import headline

    def said(plain: list[float], chunked: list[float]) -> tuple[list[str], pd.DataFrame]:
        rows = [("a", "download", "plain", i + 1, r) for i, r in enumerate(plain)]
        rows += [("a", "download", "chunked-4MiB", i + 1, r) for i, r in enumerate(chunked)]
        t = transfers_frame(rows).assign(setting="rclone-1xauto")
        table = headline.rows(t, summarise(t, pd.DataFrame()))
        return headline.sentences(table), table

    text, table = said([247.0, 247.4], [249.0, 249.6])
    assert text == [
        "a download: fastest chunked-4MiB at 249.3 MB/s, ×1.01 over plain; too few ok repeats "
        "(under 3) to tell it apart from plain."
    ]
    assert not table["clear"].any()
    text, table = said([100, 101, 99, 100, 102], [150, 149, 151, 152, 150])
    assert text[0].startswith("a download: best chunked-4MiB at 150.0 MB/s, ×1.50 [")
    assert text[0].endswith("(96% intervals).")  # 5 against 5: 2nd smallest to 2nd largest
    assert table.loc[table["layout"] == "chunked-4MiB", "clear"].item()
    text, _ = said([100, 130, 90, 120, 100], [105, 95, 125, 100, 110])
    assert "; not clearly ×1.05 ahead of the others" in text[0]
    # consistently 0.1% ahead (the demo's capped layouts): real, but no gain to act on
    text, table = said([16.38, 16.39, 16.38], [16.40, 16.41, 16.40])
    assert not table["clear"].any() and "fastest chunked-4MiB" in text[0]
    # clearly ahead of plain, but not of the runner-up: no "best" (it meant "faster than
    # plain" once, and a layout 1% ahead of another was painted green)
    rows = [("a", "download", "plain", i + 1, r) for i, r in enumerate([100, 101, 99])]
    rows += [("a", "download", "chunked-4MiB", i + 1, r) for i, r in enumerate([150, 149, 152])]
    rows += [("a", "download", "chunked-8MiB", i + 1, r) for i, r in enumerate([151, 148, 150])]
    t = transfers_frame(rows).assign(setting="rclone-1xauto")
    table = headline.rows(t, summarise(t, pd.DataFrame()))
    assert not table["clear"].any()
    assert "fastest chunked-4MiB" in headline.sentences(table)[0]
    html = headline.headline_html(
        *(lambda t: (t, summarise(t, pd.DataFrame())))(
            transfers_frame(
                [("a", "upload", "plain", 1, 10.0), ("a", "upload", "chunked-4MiB", 1, 10.04)]
            ).assign(setting="rclone-1xauto")
        ),
        {"campaign": "c"},
        None,
    )
    assert "×1.00" in html and 'class="best"' not in html


def test_speedup_figure_shows_every_repeat_within_its_axis(tmp_path, monkeypatch):
    """A repeat far above the rest (a user's 1.47 next to an axis ending at 1.41) is drawn,
    not cut off by the y-limits."""
    from cloudbench.report import figures

    rows = [("g", "download", "plain", r, rate) for r, rate in ((1, 170.6), (2, 160.0))]
    rows += [
        ("g", "download", "chunked-4MiB", 1, 200.0),
        ("g", "download", "chunked-4MiB", 2, 250.2),
    ]
    t = transfers_frame(rows).assign(setting="rclone-1xauto")
    summary = summarise(t, pd.DataFrame())
    metrics = stats.transfer_metrics(t, pd.DataFrame())
    seen = {}
    monkeypatch.setattr(figures, "save", lambda fig, path: seen.update(fig=fig))
    figures.speedups(metrics, summary, {"campaign": "c"}, tmp_path / "s.png")
    ax = seen["fig"].axes[0]
    top = 250.2 / ((170.6 + 160.0) / 2)
    assert ax.get_ylim()[1] > top, (ax.get_ylim(), top)


def test_rate_over_time_leaves_out_transfers_too_short_for_a_curve(tmp_path, monkeypatch):
    from cloudbench.report import figures

    t = transfers_frame([("a", "upload", "plain", 1, 250.0)]).assign(setting="rclone-1xauto")
    one = pd.DataFrame(
        {"site": ["a"], "direction": ["upload"], "remote": ["main"], "layout": ["plain"],
         "setting": ["rclone-1xauto"], "repeat": [1], "elapsed_s": [0.5], "bytes": [10**8]}
    )  # fmt: skip
    said = []
    monkeypatch.setattr(figures, "placeholder", lambda path, message: said.append(message))
    figures.rate_vs_time(one, t, {"campaign": "c"}, tmp_path / "r.png")
    assert said and "too short for a rate over time" in said[0]


def test_front_page_gives_the_real_reason_and_names_every_cap(tmp_path):
    """A new user saw "too few repeats for an interval" at n=3 when plain was never measured
    at that setting, and 15.6 MB/s for a local directory with no word of its 16 MiB/s cap."""
    from cloudbench.report import headline

    def sentence(rows):
        t = transfers_frame(rows).assign(setting="rclone-1x8")
        return headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))[0]

    only = sentence([("a", "upload", "chunked-4MiB", r, 10.0 + r) for r in (1, 2, 3)])
    assert only == "a upload: chunked-4MiB at 12.0 MB/s (the only layout measured here)."
    two = sentence(
        [("a", "upload", "chunked-4MiB", r, 10.0 + r) for r in (1, 2, 3)]
        + [("a", "upload", "multithread", r, 20.0 + r) for r in (1, 2, 3)]
    )
    assert two.startswith("a upload: best multithread at 22.0 MB/s (90% intervals)")
    assert "plain was not measured at this setting, so no speed-up" in two
    assert "too few" not in two and "over plain" not in two
    t = transfers_frame([("a", "upload", "plain", 1, 15.6)]).assign(
        setting="rclone-1x8", rclone_env=[None]
    )
    page = headline.headline_html(
        t,
        summarise(t, pd.DataFrame()),
        {"campaign": "c", "rclone": {"flags": ["--bwlimit", "16M"]}},
        None,
    )
    assert "Rates capped</b>: --bwlimit 16M = 16 MiB/s = 16.8 MB/s per rclone process" in page
    # the demo's link: each file capped, the process above that, said as one link
    flags = ["--bwlimit-file=4M", "--bwlimit", "16M"]
    page = headline.headline_html(
        t, summarise(t, pd.DataFrame()), {"campaign": "c", "rclone": {"flags": flags}}, None
    )
    assert (
        "Rates capped</b>: each file (each transfer) at --bwlimit-file 4M = 4 MiB/s = 4.2 MB/s, "
        "and --bwlimit 16M = 16 MiB/s = 16.8 MB/s in all per rclone process" in page
    )
    page = headline.headline_html(
        t, summarise(t, pd.DataFrame()), {"campaign": "c", "rclone": {"flags": flags[:1]}}, None
    )
    assert "--bwlimit-file 4M = 4 MiB/s = 4.2 MB/s per file (each transfer)" in page
    assert "per rclone process" not in page
    t["rclone_env"] = "RCLONE_BWLIMIT=4M"
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"}, None)
    assert "RCLONE_BWLIMIT=4M = 4 MiB/s = 4.2 MB/s per rclone process, from the environment" in page
    assert "not capped" not in page  # rclone alone: nothing else to say
    # another tool beside a capped rclone: a user read "fastest: s5cmd" as the faster tool
    t2 = pd.concat([t, t.assign(tool="s5cmd", setting="s5cmd-1x8", rclone_env="")])
    page = headline.headline_html(t2, summarise(t2, pd.DataFrame()), {"campaign": "c"}, None)
    assert (
        "s5cmd not capped (these caps bind rclone only), so rates of different tools are not "
        "comparable here"
    ) in page
    # the Tools page, where the two stand side by side, names the cap too
    from cloudbench.report.tools_section import tools_html

    tools_html(t2, tmp_path / "tools.html", {"campaign": "c"})
    tools_page = (tmp_path / "tools.html").read_text()
    assert "Capped rates</b>: RCLONE_BWLIMIT=4M = 4 MiB/s" in tools_page
    assert "s5cmd not capped (these caps bind rclone only)" in tools_page
    tools_html(t2.assign(rclone_env=""), tmp_path / "free.html", {"campaign": "c"})
    assert "Capped rates" not in (tmp_path / "free.html").read_text()
    # ... and then named s5cmd "fastest" over the capped rclone: each tool has its own best
    t3 = t2.assign(mb_per_s=[15.6, 203.0])
    page = headline.headline_html(t3, summarise(t3, pd.DataFrame()), {"campaign": "c"}, None)
    assert "a upload with rclone: plain rclone-1x8 at 15.6 MB/s" in page
    assert "a upload with s5cmd: plain s5cmd-1x8 at 203.0 MB/s" in page
    assert "fastest" not in page
    uncapped = t3.assign(rclone_env="")  # no cap: one comparison over both tools
    page = headline.headline_html(uncapped, summarise(uncapped, pd.DataFrame()), {}, None)
    assert "a upload: fastest plain s5cmd-1x8 at 203.0 MB/s" in page


def test_small_files_front_page_leads_with_files_per_second_per_setting():
    """A small-files campaign spoke in MB/s on its front page, and pooled concurrency 4 and
    16 into one median; now each setting has its own files/s line, with its interval."""
    from cloudbench.report import headline

    rows = [("a", "upload", "plain", r, 1.0) for r in (1, 2, 3)]
    rows += [("a", "upload", "plain", r, 2.0) for r in (1, 2, 3)]
    t = transfers_frame(rows)
    t["setting"] = ["rclone-1x4"] * 3 + ["rclone-1x16"] * 3
    t["files_per_s"] = [100.0, 110.0, 120.0, 400.0, 410.0, 420.0]
    t["s_per_object"] = 1 / t["files_per_s"]
    lines = headline.per_object_lines(t)
    assert lines == [
        "a upload plain rclone-1x4: 110 [100, 120] 75% files/s, 0.00909 s per object (n=3)",
        "a upload plain rclone-1x16: 410 [400, 420] 75% files/s, 0.00244 s per object (n=3)",
    ]
    info = {"campaign": "c", "dataset": {"small_files": True}}
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), info, None)
    assert page.index("Many small files") < page.index("a upload")
    info["dataset"]["small_files"] = False
    assert "Many small files" not in headline.headline_html(
        t, summarise(t, pd.DataFrame()), info, None
    )


def test_plain_at_auto_is_the_baseline_of_a_layout_run_at_the_same_concurrency():
    """A new user swept chunked over concurrency 2 and 8 with plain at auto (= 2 on that
    job): every speed-up was blank. Now chunked at 2 has one, and chunked at 8 says why not."""
    from cloudbench import report  # noqa: F401
    from cloudbench.report import headline

    rows = [("a", "upload", "plain", r, 10.0 + r) for r in (1, 2, 3)]
    rows += [("a", "upload", "chunked-4MiB", r, 20.0 + r) for r in (1, 2, 3)]
    rows += [("a", "upload", "chunked-4MiB", r, 30.0 + r) for r in (1, 2, 3)]
    t = transfers_frame(rows).assign(tool="rclone", clients=1)
    t["concurrency"] = [2] * 6 + [8] * 3
    t["setting"] = ["rclone-1xauto"] * 3 + ["rclone-1x2"] * 3 + ["rclone-1x8"] * 3
    s = summarise(t, pd.DataFrame()).set_index("setting")
    assert s.loc["rclone-1x2", "speedup_vs_plain"] == pytest.approx(22 / 12)
    assert math.isnan(s.loc["rclone-1x8", "speedup_vs_plain"])
    said = headline.sentences(headline.rows(t, summarise(t, pd.DataFrame())))[0]
    # the fastest (chunked at 8) has none; the speed-up said is chunked's where plain ran
    assert "chunked-4MiB is ×1.83 [1.62, 2.09] 90% over plain at rclone-1x2, where both" in said
    assert "– over plain" not in said


def test_retries_a_tool_does_not_report_are_not_counted_as_none():
    """s5cmd reports no retries, so its rows leave ``retries`` empty; a user read "retried
    0" for them in summary.tsv and on the front page. Empty stays empty; counted stays."""
    from cloudbench.report import headline

    t = transfers_frame([("a", "upload", "plain", r, 100.0) for r in (1, 2)] * 2)
    t["setting"] = ["rclone-1xauto"] * 2 + ["s5cmd-1xauto"] * 2
    t.loc[2:, "retries"] = math.nan
    t.loc[1, "retries"] = 2
    s = summarise(t, pd.DataFrame()).set_index("setting")
    assert s.loc["rclone-1xauto", "retries"] == 2
    assert math.isnan(s.loc["s5cmd-1xauto", "retries"])
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"}, None)
    cells = re.findall(r"<tr class=\"[a-z]*\">(.*?)</tr>", page)
    assert len(cells) == 2
    rclone, s5 = sorted(cells, key=lambda c: "s5cmd" in c)
    assert re.findall(r"<td>([^<]*)</td>", rclone)[-2:] == ["2", "0"]  # retried, rerun
    assert re.findall(r"<td>([^<]*)</td>", s5)[-2:] == [NA, "0"]


def test_a_panel_of_rates_a_hundred_fold_apart_is_drawn_on_a_log_scale():
    """A capped rclone (8-16 MB/s) beside s5cmd (160-400 MB/s) lay flat on a linear axis."""
    import matplotlib.pyplot as plt

    from cloudbench.report.figures import _rate_axis

    fig, (wide, narrow) = plt.subplots(1, 2)
    assert _rate_axis(wide, pd.Series([8.1, 15.9, 160.0, 397.0])) == ", log scale"
    assert wide.get_yscale() == "log" and wide.get_ylim()[0] == pytest.approx(8.1 / 1.5)
    assert _rate_axis(narrow, pd.Series([8.1, 15.9, 70.0])) == ""
    assert narrow.get_yscale() == "linear" and narrow.get_ylim() == (0, pytest.approx(84.0))
    plt.close(fig)


def test_tick_labels_name_the_tool_when_tools_are_mixed():
    """A user read "plain 1xauto" (rclone) beside "plain s5cmd-1xauto" under one axis."""
    from cloudbench.report.figures import _ticks

    assert _ticks(["plain rclone-4x32", "chunked-64MiB rclone-1x8"]) == [
        "plain\n4x32",
        "chunked\n64MiB\n1x8",
    ]
    assert _ticks(["plain rclone-1xauto", "plain s5cmd-1xauto"]) == [
        "plain\nrclone-1xauto",
        "plain\ns5cmd-1xauto",
    ]
    assert _ticks(["multithread"]) == ["multithread"]


def test_tick_labels_slant_when_side_by_side_they_would_overlap():
    """Five layouts of two tools (multithread is rclone's alone) ran into each other level:
    a user read "rclone-1xaus5cmd-1xauto"; the demo's three stay level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cloudbench.report.figures import _set_ticks

    def slant(order):
        fig, ax = plt.subplots()
        _set_ticks(ax, order)
        angle = ax.get_xticklabels()[0].get_rotation()
        plt.close(fig)
        return angle

    tools = [f"{lay} {t}-1xauto" for lay in ("plain", "chunked-4MiB") for t in ("rclone", "s5cmd")]
    assert slant([*tools, "multithread rclone-1xauto"]) == 60
    assert slant(["plain", "chunked-4MiB", "multithread"]) == 0


def test_best_among_several_is_claimed_at_its_joint_level():
    """ "Best" says "faster than every other layout": with three rivals at 90% each that holds
    at 70% only, and the sentence says so; with 5 repeats each interval aims at 1 - 5%/3."""
    from cloudbench.report import headline

    def sentence(repeats: int) -> tuple[str, pd.DataFrame]:
        rows = []
        for layout, rate in (("plain", 100), ("chunked-4MiB", 120), ("chunked-8MiB", 125)):
            rows += [("a", "upload", layout, r, rate + r) for r in range(1, repeats + 1)]
        rows += [("a", "upload", "multithread", r, 200 + r) for r in range(1, repeats + 1)]
        t = transfers_frame(rows).assign(setting="rclone-1x8")
        table = headline.rows(t, summarise(t, pd.DataFrame()))
        return headline.sentences(table)[0], table

    three, table = sentence(3)
    assert "best multithread" in three
    assert "(ahead of all 3 others at once, jointly at 70%)" in three
    assert table["clear_level"].max() == pytest.approx(0.7)
    five, table = sentence(5)
    assert "(ahead of all 3 others at once, jointly at 95%)" in five  # 1 - 3 x 1.6%


def test_the_first_screens_figure_shows_the_rate_of_its_table(tmp_path, monkeypatch):
    """The issue: the first screen's figure drew sustained rates (rclone ahead) beside a
    table of whole-transfer medians (s5cmd ahead). Here the two rates rank the layouts
    oppositely; the figure's medians are the table's, and the page embeds that figure."""
    from cloudbench.report import figures, headline

    rows = [("a", "upload", "plain", r, 10.0 + r) for r in (1, 2, 3)]
    rows += [("a", "upload", "chunked-4MiB", r, 20.0 + r) for r in (1, 2, 3)]
    t = transfers_frame(rows).assign(tool="rclone", setting="rclone-1x8")
    # sustained rates in the opposite order: plain ahead after ramp-up
    metrics = t.assign(sustained_mb_per_s=np.where(t["layout"] == "plain", 50.0, 30.0))
    drawn = []
    monkeypatch.setattr(figures, "save", lambda fig, path: drawn.append(fig))
    figures.whole_rates(metrics, {"campaign": "c"}, tmp_path / "w.png")
    shown = {float(a.get_text()) for ax in drawn[0].axes for a in ax.texts}
    table = headline.rows(t, summarise(t, pd.DataFrame()))
    assert shown == set(table["median"]) == {12.0, 22.0}
    figure = tmp_path / "fig.png"
    figure.write_bytes(b"\x89PNG")
    page = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"}, figure)
    assert 'alt="whole-transfer rate per strategy"' in page and "rate of the table" in page
    # as the rules write it: aggregate leaves the figure's place, the figures rule fills it,
    # and the front page is the page above, the figure where it was
    text = headline.headline_html(t, summarise(t, pd.DataFrame()), {"campaign": "c"})
    assert headline.FIGURE_SLOT in text and "<img" not in text
    assert headline.front_page(text, figure) == page
    with pytest.raises(ValueError, match="no place for its figure"):
        headline.front_page(page, figure)  # a headline with its figure already in


@pytest.mark.unit
def test_an_uploads_count_that_ran_ahead_of_the_store_is_no_stall_and_no_rate_of_zero():
    """A user's rclone uploads (5 MiB through a 3 MB/s store): rclone counted the whole file
    at 1.0 s (into socket buffers) and the store had it at 2.6-3.4 s. The flat stretch after
    the count reached its total read as a sustained 0.0 MB/s and a 2-3 s stall; it is the
    buffers draining. A count that went down and grew again keeps its stall."""
    from cloudbench.measure.rclonelog import longest_stall
    from cloudbench.measure.series import counted_all

    small = pd.DataFrame({"elapsed_s": [1.0, 2.0, 3.0, 3.4], "bytes": [10_485_760] * 4})
    r = sustained_rate(small, whole_mb_per_s=3.04)
    assert (r.mb_per_s, r.method) == (3.04, "whole-transfer"), r
    assert longest_stall(small["elapsed_s"].tolist(), small["bytes"].tolist()) == 0.0
    # a longer upload: counted at 5 MB/s for 4 s, then 3 s of buffers draining
    t = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    b = [5e6, 10e6, 15e6, 20e6, 20e6, 20e6, 20e6]
    r = sustained_rate(pd.DataFrame({"elapsed_s": t, "bytes": b}))
    assert r.method == "series" and r.mb_per_s == pytest.approx(5.0) and r.end_s == 4.0
    assert longest_stall(t, b) == 0.0
    assert counted_all([1, 2, 2, 1, 2]) == 4  # went down, grew again: not a plateau
    assert longest_stall([1.0, 2.0, 3.0, 4.0, 5.0], [1, 2, 2, 2, 3]) == 2.0  # a stall mid-copy
