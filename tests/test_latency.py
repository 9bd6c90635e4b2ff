"""The Latency and Tools sections' statistics, on synthetic tables whose answers are known."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from cloudbench.report import latency

pytestmark = pytest.mark.unit  # pure functions on files and tables, no process started


def _probe(site, remote, when, connect_s, get_s=0.01, status="ok"):
    s = lambda v: {"n": 4, "min": v, "p50": v, "p90": v, "p99": v, "max": v}  # noqa: E731
    return {
        "site": site, "remote": remote, "when": when, "status": status,
        "started_utc": "2026-11-23T04:00:00.000000Z", "time_of_day_utc": "04:00:00",
        "endpoint_host": "s3.example", "scheme": "http", "count": 4, "object_bytes": 4096,
        "tcp_connect_s": s(connect_s), "tls_handshake_s": None,
        "get_ttfb_s": s(get_s), "put_ttfb_s": s(2 * get_s),
    }  # fmt: skip


def test_probe_table_and_pair_rtt():
    records = [
        _probe("tursa", "s3", "before", 0.010),
        _probe("tursa", "s3", "after", 0.030),
        _probe("dirac", "s3", "before", 0.100),
        {"site": "tursa", "remote": "dir", "when": "before", "status": "skipped"},
    ]
    table = latency.probe_table(records)
    assert list(table.columns) == latency.PROBE_COLUMNS and len(table) == 4
    assert table.loc[0, "connect_p50_ms"] == pytest.approx(10.0)
    assert table.loc[0, "put_ttfb_p99_ms"] == pytest.approx(20.0)
    assert math.isnan(table.loc[0, "tls_p50_ms"])  # http: no handshake, not zero
    assert math.isnan(table.loc[3, "connect_p50_ms"])
    rtt = latency.pair_rtt(table).set_index(["site", "remote"])
    assert rtt.loc[("tursa", "s3"), "rtt_ms"] == pytest.approx(20.0)  # median of 10 and 30
    assert rtt.loc[("tursa", "s3"), "probes"] == 2
    assert ("tursa", "dir") not in rtt.index


def test_rate_vs_rtt_recovers_a_known_line():
    rtts = {"a": 0.010, "b": 0.040, "c": 0.080}  # seconds
    probes = latency.probe_table([_probe(s, "s3", "before", v) for s, v in rtts.items()])
    rows = []
    for site, rtt in rtts.items():
        for _rep in range(3):
            rows.append({"site": site, "remote": "s3", "direction": "download",
                         "status": "ok", "mb_per_s": 500 - 4 * rtt * 1000})  # fmt: skip
    rows.append({"site": "a", "remote": "s3", "direction": "upload", "status": "ok",
                 "mb_per_s": 100.0})  # fmt: skip
    rows.append({"site": "b", "remote": "s3", "direction": "download", "status": "failed",
                 "mb_per_s": None})  # fmt: skip
    joined, fits = latency.rate_vs_rtt(pd.DataFrame(rows), probes)
    assert len(joined) == 10  # the failed row has no rate
    fit = fits["download"]
    assert fit.slope == pytest.approx(-4.0) and fit.intercept == pytest.approx(500.0)
    assert fit.n == 9
    assert fits["upload"] is None  # one RTT: no line
    # two RTTs are two clusters: a line through them says nothing (user check: 24 us apart
    # on one host drew +2,090 MB/s per ms at R² 0.02)
    two = pd.DataFrame(rows)
    two = two[two["site"] != "c"]
    _, fits = latency.rate_vs_rtt(two, probes)
    assert fits["download"] is None


def test_window_ceiling():
    assert latency.window_ceiling_mb_s(65536, 0.010) == pytest.approx(6.5536)
    assert latency.window_ceiling_mb_s(65536, 0.010, streams=4) == pytest.approx(26.2144)
    assert math.isnan(latency.window_ceiling_mb_s(65536, 0.0))


def _transfers():
    rows = []
    for rep, status in enumerate(["ok", "ok", "failed", "corrupt"]):
        rows.append(
            {
                "tool": "s5cmd",
                "strategy": "plain",
                "direction": "upload",
                "status": status,
                "mb_per_s": 200.0 + rep if status == "ok" else None,
            }
        )
    for rep in range(5):
        rows.append(
            {
                "tool": "rclone",
                "strategy": "plain",
                "direction": "upload",
                "status": "ok",
                "mb_per_s": 100.0 + 10 * rep,
            }
        )
    return pd.DataFrame(rows)  # fmt: skip


def test_failure_rate_per_tool():
    f = latency.failure_rate_by_tool(_transfers()).set_index("tool")
    assert f.loc["s5cmd", "failure_rate"] == pytest.approx(0.5)
    assert (f.loc["s5cmd", "failed"], f.loc["s5cmd", "corrupt"]) == (1, 1)
    assert f.loc["rclone", "failure_rate"] == 0.0 and f.loc["rclone", "rows"] == 5
    assert latency.failure_rate_by_tool(pd.DataFrame()).empty
    assert f.loc["rclone", "attempt_failure_rate"] == 0.0  # no attempts column: one each


def test_attempt_failure_rate_counts_failures_a_rerun_measured_again():
    """A tool that failed twice before each of two ok rows ends with a failure rate of 0
    (its rows): its attempt failure rate says 4 of 6 tries failed."""
    df = _transfers().assign(attempts=1)
    df.loc[df["tool"] == "rclone", "attempts"] = [3, 3, 1, 1, 1]
    df.loc[(df["tool"] == "s5cmd") & (df["status"] == "failed"), "attempts"] = 2
    f = latency.failure_rate_by_tool(df).set_index("tool")
    assert f.loc["rclone", "failure_rate"] == 0.0
    assert (f.loc["rclone", "attempts"], f.loc["rclone", "failed_attempts"]) == (9, 4)
    assert f.loc["rclone", "attempt_failure_rate"] == pytest.approx(4 / 9)
    # s5cmd: 2 ok rows, a failed row tried twice, a corrupt row: 3 of 5 attempts failed
    assert (f.loc["s5cmd", "attempts"], f.loc["s5cmd", "failed_attempts"]) == (5, 3)


def test_tool_strategy_medians_with_intervals():
    t = latency.tool_strategy_rates(_transfers()).set_index("tool")
    assert t.loc["rclone", "median"] == pytest.approx(120.0) and t.loc["rclone", "n"] == 5
    assert t.loc["rclone", "ci_low"] <= 120.0 <= t.loc["rclone", "ci_high"]
    assert t.loc["s5cmd", "n"] == 2 and t.loc["s5cmd", "not_ok"] == 2
    assert math.isnan(t.loc["s5cmd", "ci_low"])  # 2 repeats: no interval


def test_latency_page_of_skipped_probes_says_why_instead_of_dashes(tmp_path):
    """The demo (a local remote) showed a probes table of dashes and an RTT heading without
    numbers; now the page says why there is none and which probes were skipped."""
    from cloudbench.report.tools_section import NO_PROBES, latency_html

    probes = pd.DataFrame(
        [
            {"site": "a", "remote": "main", "when": w, "status": "skipped"}
            for w in ("before", "after")
        ]
    ).assign(connect_p50_ms=float("nan"))
    out = tmp_path / "latency.html"
    latency_html(pd.DataFrame(), probes, out)
    page = out.read_text()
    assert NO_PROBES in page and "skipped" in page
    assert "Round-trip time" not in page and "get_ttfb_p50_ms" not in page


def test_a_copys_age_when_read_is_from_its_publication_to_now_and_none_without_one():
    from datetime import UTC, datetime, timedelta

    from cloudbench.measure.record import copy_seen

    published = (datetime.now(UTC) - timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    seen = copy_seen({"uploaded_by": {"finished_utc": published}})
    assert seen["copy_published_utc"] == published and 2 <= seen["copy_age_s"] < 3
    assert copy_seen({})["copy_age_s"] is None


def test_cross_site_visibility_is_per_download_site_and_remote():
    from cloudbench.report.latency import copy_visibility

    transfers = pd.DataFrame(
        {
            "site": ["a", "a", "b", "b", "b", "b"],
            "remote": ["s3"] * 6,
            "direction": ["upload", "download", "download", "download", "download", "download"],
            "copy_published_utc": [None, "t1", "t1", "t2", "t3", "t1"],
            "copy_age_s": [None, 0.2, 4.0, 1.5, 9.0, 40.0],  # b reads t1 again 36 s later
        }
    )
    table = copy_visibility(transfers)
    # the upload site's own reads are not cross-site; a copy read twice counts at its first
    cols = ["site", "remote", "copies_read", "min_copy_age_s", "median_copy_age_s"]
    assert table[cols].to_dict("records") == [
        {"site": "b", "remote": "s3", "copies_read": 3, "min_copy_age_s": 1.5,
         "median_copy_age_s": 4.0}
    ]  # fmt: skip
    assert table["min_age_store_clock_low_s"].isna().all()  # no probe: no one clock
    assert copy_visibility(transfers.iloc[:2]).empty
    # b's clock 2 s behind a's (each measured against the store's, a over two probes): the
    # 1.5 s read on two clocks is 3.5 s on the store's, within the offsets' bounds
    probes = pd.DataFrame(
        {
            "site": ["a", "a", "b"],
            "remote": ["s3"] * 3,
            "clock_ahead_low_s": [0.9, 0.8, -1.2],
            "clock_ahead_high_s": [1.1, 1.0, -0.9],
        }
    )
    row = copy_visibility(transfers, probes).iloc[0]
    assert (row["clock_correction_low_s"], row["clock_correction_high_s"]) == pytest.approx(
        (-1.2 - 1.1, -0.9 - 0.8)
    )
    low, high = row["min_age_store_clock_low_s"], row["min_age_store_clock_high_s"]
    assert (low, high) == pytest.approx((1.5 + 1.7, 1.5 + 2.3))
    assert low <= 3.5 <= high


def test_a_sites_clock_against_the_stores_from_date_headers():
    """Responses at different fractions of a second narrow a 1-s Date to a fraction; bounds
    that do not meet (a clock stepped mid-probe) give no number."""
    from email.utils import formatdate

    from cloudbench.site.probe import clock_ahead, clock_bound

    ahead = 2.3  # this node's clock minus the store's
    bounds = []
    for i in range(20):
        store = 1_000_000.0 + i * 0.37  # when the store stamped each response
        date = formatdate(int(store), usegmt=True)  # whole seconds, cut down
        bounds.append(clock_bound(store + ahead - 0.004, store + ahead + 0.003, date))
    got = clock_ahead(bounds)
    assert got["low"] <= ahead <= got["high"] and got["high"] - got["low"] < 0.1
    assert got["responses"] == 20
    assert clock_bound(1.0, 2.0, None) is None and clock_bound(1.0, 2.0, "garbage") is None
    assert clock_ahead([(0.0, 1.0), (2.0, 3.0)]) is None and clock_ahead([]) is None


def test_throttling_and_other_server_errors_get_a_red_sentence_each_on_the_front_page():
    from cloudbench.report.headline import _throttled

    metrics = pd.DataFrame({"throttled": [0, 3, None, 1], "server_errors": [0, 0, None, 5]})
    text = _throttled(metrics)
    assert "Throttled</b>: the store answered 4 requests with 503 SlowDown or 429 in 2 of 3" in text
    assert "Server errors</b>: the store answered 5 requests with another 5xx in 1 of 3" in text
    assert _throttled(metrics.assign(throttled=0, server_errors=0)) == ""
    assert _throttled(metrics.assign(throttled=None, server_errors=None)) == ""


def test_every_per_object_bar_is_named_by_what_sets_it_apart():
    """The demo's per-object panel had nine bars, six of them named "rclone download": the
    bars differ by site and layout, so that is what their names must say."""
    from cloudbench.report.tools_section import per_object_labels

    rows = [
        {"site": s, "remote": "main", "direction": d, "tool": "rclone", "strategy": lay,
         "layout": lay, "setting": "rclone-1xauto", "s_per_object": 0.25}
        for s, d in (("tursa", "upload"), ("tursa", "download"), ("tesseract", "download"))
        for lay in ("plain", "multithread")
    ]  # fmt: skip
    per = latency.per_object_by_tool(
        pd.DataFrame(rows).assign(status="ok", repeat=1, files_per_s=4.0)
    )
    labels = per_object_labels(per)
    assert len(set(labels)) == len(per) == 6
    assert "tursa · upload · multithread" in labels
    assert per_object_labels(per.head(1)) == ["download"]  # one bar: its direction


def test_every_pair_is_named_inside_the_rate_vs_rtt_panel():
    """The pair at the largest RTT was named to its right, half outside the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cloudbench.report.tools_section import _rate_vs_rtt_panel

    p = pd.DataFrame(
        {
            "site": ["cosma", "archer2", "jasmin"],
            "remote": ["objstore"] * 3,
            "rtt_ms": [0.05, 12.0, 30.0],
            "mb_per_s": [900.0, 400.0, 120.0],
        }
    )
    fig, ax = plt.subplots(figsize=(5, 3.5))
    _rate_vs_rtt_panel(ax, p, None)
    fig.canvas.draw()
    box = ax.get_window_extent()
    names = [t for t in ax.texts if "→" in t.get_text()]
    assert len(names) == 3
    for text in names:
        extent = text.get_window_extent()
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1, text.get_text()
    plt.close(fig)
