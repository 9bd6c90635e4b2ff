"""The knee, collapses and recommendations of sweeps, on synthetic curves with known answers,
and the sum of several clients' series on one clock."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from cloudbench.measure.group import aggregate, shares
from cloudbench.report.scaling import collapses, knee, point_table, recommendations, scaling_table

pytestmark = pytest.mark.unit


def _curve(medians: dict[int, float], repeats: int = 5, noise: float = 0.03, seed: int = 1):
    rng = np.random.default_rng(seed)
    return {v: m * (1 + noise * rng.standard_normal(repeats)) for v, m in medians.items()}


def test_knee_of_a_saturating_curve_is_where_it_flattens():
    # linear to 8 clients, flat after: 8 reaches 100%, 4 only 50% -> the knee is 8
    curve = _curve({1: 100, 2: 200, 4: 400, 8: 800, 16: 820, 32: 830})
    k = knee(curve)
    assert k.value == 8
    assert k.low <= 8 <= k.high
    assert k.best in (16, 32)


def test_knee_interval_widens_when_values_are_close_to_the_threshold():
    # 4 sits right at 90% of the best: noise decides, so the interval must include 4 and 8
    curve = _curve({1: 300, 2: 600, 4: 900, 8: 1000, 16: 1000}, noise=0.05)
    k = knee(curve)
    assert k.low <= 4 and k.high >= 8


def test_knee_needs_three_repeats_for_an_interval_and_two_values_at_all():
    k = knee({1: [1.0, 1.1], 4: [3.0, 3.2]})
    assert k.value == 4 and math.isnan(k.low) and math.isnan(k.high)
    assert knee({1: [1.0, 2.0, 3.0]}) is None


def test_a_collapse_is_flagged_and_a_plateau_is_not():
    curve = _curve({1: 100, 2: 200, 4: 390, 8: 400, 16: 150})
    found = collapses(curve)
    assert [(c.value, c.than) for c in found] == [(16, 8)]
    assert found[0].high < 1 and found[0].ratio == pytest.approx(150 / 400, rel=0.1)
    assert collapses(_curve({1: 100, 2: 200, 4: 400, 8: 395, 16: 398})) == []


def test_scaling_table_and_recommendation_from_a_transfers_table():
    rows = []
    rates = {(1, 8): 100, (2, 8): 200, (4, 8): 380, (8, 8): 400, (4, 16): 395, (4, 4): 200}
    rng = np.random.default_rng(3)
    for (clients, conc), m in rates.items():
        for rep in range(1, 4):
            rows.append({
                "site": "tursa", "remote": "mys3", "direction": "upload", "layout": "chunked-64MiB",
                "strategy": "chunked", "setting": f"rclone-{clients}x{conc}", "clients": clients,
                "concurrency": conc, "repeat": rep, "status": "ok",
                "mb_per_s": m * (1 + 0.01 * rng.standard_normal()),
            })  # fmt: skip
    df = pd.DataFrame(rows)
    table = scaling_table(df)
    by_clients = table[(table["axis"] == "clients") & (table["held"] == 8)].iloc[0]
    assert by_clients["knee"] == 4 and by_clients["values"] == "1,2,4,8"
    by_conc = table[(table["axis"] == "concurrency") & (table["held"] == 4)].iloc[0]
    assert by_conc["knee"] == 8 and by_conc["collapse"] == ""
    (line,) = recommendations(df)
    assert line.startswith("from tursa to mys3 (upload) with rclone: 4 client(s) x 8 transfers")
    assert "90% of the best" in line and "with 8 x 8" in line


def test_shares_give_every_file_to_exactly_one_client():
    files = [f"f{i}" for i in range(10)]
    got = shares(files, 4)
    assert sorted(sum(got, [])) == files and [len(s) for s in got] == [3, 3, 2, 2]


def test_aggregate_rate_is_all_bytes_over_the_whole_window():
    clients = [
        {"client": 0, "status": "ok", "started_epoch": 100.0, "seconds": 10.0,
         "bytes_requested": 10**7, "bytes_moved": 10**7, "mb_per_s": 1.0, "host": "n1"},
        {"client": 1, "status": "ok", "started_epoch": 100.5, "seconds": 9.5,
         "bytes_requested": 10**7, "bytes_moved": 10**7, "mb_per_s": 1.05, "host": "n2"},
    ]  # fmt: skip
    got = aggregate(clients, 2, tolerance_s=1.0)
    assert got["status"] == "ok" and got["seconds"] == 10.0 and got["mb_per_s"] == 2.0
    assert got["start_skew_s"] == 0.5 and got["hosts"] == ["n1", "n2"]
    late = aggregate(clients, 2, tolerance_s=0.2)
    assert late["status"] == "failed" and "0.500 s apart" in late["error"]
    assert late["mb_per_s"] is None
    missing = aggregate([clients[0], None], 2, tolerance_s=1.0)
    assert missing["status"] == "failed" and "client 1 did not report" in missing["error"]
    assert got["stalled_since_epoch"] is None
    # a client stalled on a dead store: the group's outage dates from when it last moved
    # (the user check's 2-client group dated it from the stall's verdict, 72 s later)
    stalled = [dict(c, status="failed", error="the store stopped answering") for c in clients]
    assert aggregate(stalled, 2, tolerance_s=1.0)["error"] == (
        "clients 0, 1: the store stopped answering"  # one sentence for both, not twice
    )
    # the same stall, each client's listing of the dead store timed (usercheck56 read
    # "last: a listing ... last: a listing" in a line clipped between the two): said once,
    # in the words of the client that ended last (the group's end)
    listed = [
        dict(
            c, status="failed", seconds=s, error=f"nothing moved for 60 s; last: failed in {t} s: x"
        )
        for c, t, s in zip(clients, ("3.5", "7.2"), (9.0, 12.0), strict=True)
    ]
    assert aggregate(listed, 2, tolerance_s=1.0)["error"] == (
        "clients 0, 1: nothing moved for 60 s; last: failed in 7.2 s: x"
    )
    apart = [stalled[0], dict(stalled[1], error="exit status 9")]
    assert aggregate(apart, 2, tolerance_s=1.0)["error"] == (
        "client 0: the store stopped answering; client 1: exit status 9"
    )
    stalled[1]["stalled_since_epoch"] = 103.0
    assert aggregate(stalled, 2, tolerance_s=1.0)["stalled_since_epoch"] == 103.0


def test_summed_series_adds_clients_on_one_clock(tmp_path):
    """The group series a several-client measurement writes (timed.write_group_series, from
    the clients' own series files), read back from the file the report reads."""
    from cloudbench.measure import series
    from cloudbench.measure.group import client_series_path
    from cloudbench.measure.timed import write_group_series

    # two clients at 1 MB/s each, the second starting 1 s later, each moving 3 MB
    per = [
        {"client": k, "started_epoch": 100.0 + k, "seconds": 3.0, "bytes_moved": 3 * 10**6}
        for k in (0, 1)
    ]
    for c in per:
        points = [(1.0, 10**6), (2.0, 2 * 10**6), (3.0, 3 * 10**6)]
        series.write(client_series_path(tmp_path, c["client"]), points)
    out = tmp_path / "r1.series.tsv"
    write_group_series(out, tmp_path, per)
    lines = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert [float(t) for t, _, _ in lines] == [1.0, 2.0, 3.0, 4.0]
    assert [int(b) for _, b, _ in lines] == [10**6, 3 * 10**6, 5 * 10**6, 6 * 10**6]
    assert [float(r) for _, _, r in lines] == [1.0, 2.0, 2.0, 1.0]


def test_a_sweep_that_still_grows_at_its_end_is_said_to_have_no_knee():
    rows = [
        {"site": "lumi", "remote": "labstore", "direction": "download", "layout": "plain",
         "strategy": "plain", "setting": f"rclone-{n}x4", "clients": n, "concurrency": 4,
         "repeat": rep, "status": "ok", "mb_per_s": 4.1 * n * (1 + 0.01 * rep)}
        for n in (1, 2, 4) for rep in (1, 2, 3)
    ]  # fmt: skip
    df = pd.DataFrame(rows)
    (row,) = scaling_table(df).itertuples()
    assert row.knee == 4 and not row.saturated
    (line,) = recommendations(df)
    assert "from labstore to lumi (download) with rclone: 4 client(s)" in line
    assert "still grows at the largest clients swept: no knee yet" in line
    # under a cap per rclone process, clients add caps: the curve is the cap's, not the store's
    (capped,) = recommendations(df, capped=True)
    assert "no knee yet" not in capped and "sweep further" not in capped
    assert "each rclone process has its own bandwidth cap" in capped
    assert "lift the cap" in capped
    # two repeats per setting: no interval, so "still grows" is not claimed (user check)
    (few,) = recommendations(df[df["repeat"] < 3])
    assert "no knee yet" not in few and "sweep further" not in few
    assert "by medians of as few as 2 repeat(s), too few for an interval" in few


def _sweep(tool: str, medians: dict[int, float], statuses: dict[int, list[str]] | None = None):
    statuses = statuses or {}
    return [
        {"site": "a", "remote": "s3", "direction": "upload", "layout": "plain",
         "strategy": "plain", "tool": tool, "setting": f"{tool}-1x{c}", "clients": 1,
         "concurrency": c, "repeat": rep + 1,
         "status": (statuses.get(c) or ["ok"] * 3)[rep],
         "mb_per_s": m * (1 + 0.01 * rep) if (statuses.get(c) or ["ok"] * 3)[rep] == "ok"
         else None}
        for c, m in medians.items() for rep in range(3)
    ]  # fmt: skip


def test_two_tools_in_one_sweep_are_two_curves_with_their_own_knees_and_recommendations():
    """rclone at 200/400/410 and s5cmd at 300/600/900 MB/s over concurrency 4/16/64 once
    became one pooled curve recommending a rate neither tool reached, naming no tool."""
    df = pd.DataFrame(
        _sweep("rclone", {4: 200, 16: 400, 64: 410}) + _sweep("s5cmd", {4: 300, 16: 600, 64: 900})
    )
    table = scaling_table(df).set_index("tool")
    assert sorted(table.index) == ["rclone", "s5cmd"]
    assert table.loc["rclone", "knee"] == 16 and table.loc["rclone", "saturated"]
    assert table.loc["s5cmd", "knee"] == 64 and not table.loc["s5cmd", "saturated"]
    lines = recommendations(df)
    assert len(lines) == 2
    (rc,) = [x for x in lines if "with rclone" in x]
    (s5,) = [x for x in lines if "with s5cmd" in x]
    # rates in the report's one form, one decimal (usercheck53 read '128 MB/s [45, 194]'
    # beside '128.1 [45.0, 193.8]' on one page)
    assert "1 client(s) x 16 transfers" in rc and re.search(r"against 41\d\.\d MB/s", rc), rc
    assert "1 client(s) x 64 transfers" in s5 and "no knee yet" in s5
    # the best setting is not compared "against" itself
    assert re.search(r"reach the best observed, 909\.\d MB/s", s5) and "against" not in s5
    assert "nothing cheaper reaches 90% of it" in s5
    (named,) = recommendations(df[df["tool"] == "rclone"], {"s3": "uc7:"})
    assert named.startswith("from a to s3 (rclone remote uc7) (upload)"), named
    (same,) = recommendations(df[df["tool"] == "rclone"], {"s3": "s3:"})
    assert same.startswith("from a to s3 (upload)"), same
    points = point_table(df)
    assert set(points.groupby(["tool", "concurrency"])["n"].max()) == {3}  # nothing pooled


def test_failed_repeats_count_in_a_sweep_and_make_a_collapse():
    """A value whose repeats failed is shown, counted as 0 MB/s, and flagged as a collapse;
    before, curves used ok rows only and the value dropped out silently."""
    df = pd.DataFrame(_sweep("rclone", {4: 200, 16: 400, 64: 410}, {64: ["failed"] * 3}))
    (row,) = scaling_table(df).itertuples()
    assert row.failed == 3 and row.collapse.startswith("64 is x0.00")
    assert "(3 failed)" in row.collapse and "90% of 16" in row.collapse
    # one of three at full speed: shown with its failures, but no collapse at 90%
    df = pd.DataFrame(
        _sweep("rclone", {4: 200, 16: 400, 64: 410}, {64: ["failed", "failed", "ok"]})
    )
    (row,) = scaling_table(df).itertuples()
    assert row.failed == 2 and row.collapse == ""
    pts = point_table(df).set_index("concurrency")
    assert pts.loc[64, "n"] == 3 and pts.loc[64, "failed"] == 2 and pts.loc[64, "median"] == 0


def test_a_group_series_ends_at_exactly_every_byte_and_never_goes_down():
    """Four clients whose start offsets are not round numbers (as measured): the summed
    series ends at the copy's bytes exactly (CI once saw 12582902 of 12582912: times were
    rounded before interpolating) and never decreases."""
    from cloudbench.measure.series import added_up

    share = 3 * 2**20
    clients = [
        (off, [(0.0312345678, 0), (0.1371234567, share // 3), (0.2412345671, share)], share)
        for off in (0.0, 0.0123456789, 0.0234567891, 0.0345678912)
    ]
    pts = added_up(clients)
    assert pts[-1][1] == 4 * share
    assert all(b1 >= b0 for (_, b0), (_, b1) in zip(pts, pts[1:], strict=False))


def test_a_group_of_clients_that_count_nothing_has_no_series(tmp_path):
    """s5cmd upload clients see their bytes only inside the tool: their group once wrote a
    series of one point, 0 bytes at the copy's end, read as a stall as long as the copy. A
    group with a client that counted nothing has no series, as one such client has none;
    clients that counted are added up as before."""
    from cloudbench.measure import series
    from cloudbench.measure.group import client_series_path
    from cloudbench.measure.timed import write_group_series

    out = tmp_path / "r1.series.tsv"
    uncounted = [
        {"client": k, "started_epoch": 100.0 + k / 100, "seconds": 8.0, "bytes_moved": None}
        for k in (0, 1)
    ]
    write_group_series(out, tmp_path, uncounted)
    assert out.read_text() == series.HEADER and series.read(out) == []
    counted = [c | {"bytes_moved": 4 * 2**20} for c in uncounted]
    for c in counted:
        series.write(client_series_path(tmp_path, c["client"]), [(1.0, 2**20), (8.0, 4 * 2**20)])
    write_group_series(out, tmp_path, counted)
    points = series.read(out)
    assert points[-1][1] == 8 * 2**20 and points[0][1] > 0


def test_a_top_of_the_sweep_within_the_noise_is_not_called_still_growing():
    """Two settings whose repeats overlap almost wholly: the larger reads highest, but the
    advice is more repeats, not "no knee yet, sweep further" (usercheck53: 1 and 2 clients
    at 93.1 [61.6, 143.5] and 128.1 [45.0, 193.8])."""
    rows = _sweep("s5cmd", {2: 93, 4: 128})
    for r, jitter in zip(rows, (0.6, 1.0, 1.5, 0.35, 1.0, 1.5), strict=True):
        r["mb_per_s"] = r["mb_per_s"] * jitter
    (line,) = recommendations(pd.DataFrame(rows))
    assert "no knee yet" not in line and "sweep further" not in line, line
    assert "reads highest, but not clearly" in line, line
