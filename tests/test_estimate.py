"""How long your data takes (report.estimate): the model's pure parts on rows built to the
point, the command's answers on a campaign's tables, the config key and the report's block."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from cloudbench.campaign import jobs
from cloudbench.campaign.model import ConfigError, load_campaign
from cloudbench.report import estimate as est
from cloudbench.report import headline
from cloudbench.report.stats import Prices, egress_cost

pytestmark = pytest.mark.unit

MB = 1e6


def row(seconds=None, nbytes=100 * MB, rate=10.0, fixed=0.5, separated=True, **kw) -> est.Row:
    """A repeat of ``nbytes`` moved at ``rate`` MB/s after a fixed cost of ``fixed`` s."""
    seconds = fixed + nbytes / (rate * MB) if seconds is None else seconds
    base = dict(objects=8, connections=4, transfers=4, streams=1)
    return est.Row(
        seconds=seconds,
        bytes=nbytes,
        whole_mb_per_s=nbytes / seconds / MB,
        mb_per_s=rate,
        separated=separated,
        **{**base, **kw},
    )


def test_the_prediction_interval_is_for_one_new_value_not_the_mean():
    """On the logarithms of the times (they vary by a factor, as rates do): never below 0."""
    logs = [math.log(v) for v in (1.0, 2.0, 3.0)]
    my = sum(logs) / 3
    sd = math.sqrt(sum((y - my) ** 2 for y in logs) / 2)
    mean, lo, hi = est.prediction_interval([1.0, 2.0, 3.0], 0.95)
    # t(2) at 97.5% = 4.303; sqrt(1 + 1/3): wider than the mean's own t-interval by sqrt(n + 1)
    half = 4.3027 * sd * math.sqrt(4 / 3)
    assert mean == 2.0
    assert math.log(hi) - my == pytest.approx(half, rel=1e-3)
    assert my - math.log(lo) == pytest.approx(half, rel=1e-3)
    assert 0 < lo < 1.0 and hi > 3.0
    assert math.isnan(est.prediction_interval([5.0])[1])
    # sub-second copies far apart (usercheck53's [-8.6 s, 35.4 s]): still above zero
    assert est.prediction_interval([0.1, 0.5, 0.2])[1] > 0


def test_seconds_against_bytes_give_the_fixed_cost_and_the_rate():
    x = [10 * MB, 20 * MB, 40 * MB, 80 * MB]
    y = [0.7 + b / (20 * MB) + e for b, e in zip(x, (0.01, -0.01, 0.01, -0.01), strict=True)]
    a, b, y0, lo, hi = est.fit_prediction(x, y, 800 * MB)
    assert a == pytest.approx(0.7, abs=0.03)
    assert 1 / b / MB == pytest.approx(20, rel=0.01)
    assert lo < y0 < hi and lo < 0.7 + 40 < hi
    # farther from the sizes measured, the interval widens
    _, _, _, lo2, hi2 = est.fit_prediction(x, y, 8000 * MB)
    assert hi2 - lo2 > hi - lo


def test_one_size_a_fixed_cost_per_row_plus_the_users_bytes_at_the_rate():
    rows = [row(fixed=f, rate=r) for f, r in ((0.4, 10.0), (0.5, 10.2), (0.6, 9.8))]
    seconds, lo, hi, fixed, rate, method, notes = est.predict(rows, est.Dataset(2000 * MB, 160))
    truth = [f + 2000 / r for f, r in ((0.4, 10.0), (0.5, 10.2), (0.6, 9.8))]
    assert seconds == pytest.approx(sum(truth) / 3)
    assert fixed == pytest.approx(0.5) and method == "per row"
    assert lo < min(truth) and max(truth) < hi
    # not the median rate alone: 20x the bytes is not 20x the seconds
    assert seconds < 20 * sum(r.seconds for r in rows) / 3
    assert any("an extrapolation: 20x the largest copy measured" in n for n in notes)


def test_several_sizes_are_fitted_as_a_line():
    rows = [row(nbytes=b * MB, fixed=0.3, rate=25.0) for b in (10, 10, 40, 40, 160, 160)]
    rows[0] = row(nbytes=10 * MB, fixed=0.32, rate=25.0)
    seconds, lo, hi, fixed, rate, method, _ = est.predict(rows, est.Dataset(1600 * MB, 10))
    assert method == "fit"
    assert fixed == pytest.approx(0.3, abs=0.02) and rate == pytest.approx(25, rel=0.01)
    assert lo <= 0.3 + 64 <= hi


def test_copies_too_short_to_separate_span_the_whole_transfer_reading():
    rows = [row(fixed=0.2, rate=16.8, separated=False, nbytes=33.5 * MB) for _ in range(3)]
    rows = [row(seconds=r.seconds + d, nbytes=r.bytes, rate=16.8, separated=False) for r, d in
            zip(rows, (0.0, 0.01, -0.01), strict=True)]  # fmt: skip
    seconds, lo, hi, _, _, method, notes = est.predict(rows, est.Dataset(670 * MB, 20))
    whole = [670 * MB / (r.whole_mb_per_s * MB) for r in rows]
    assert method == "per row, not separated"
    assert lo <= seconds <= max(whole) <= hi
    assert any("too short for a sustained rate" in n for n in notes)
    # read over a 1 s window that held the copy's 0.2 s fixed cost, the rate is that much
    # low: the lower end spans the bytes at the window's rest (the demo's 640 MiB read
    # [40.1, 41.8] s beside a cap that moves them in 40.05 s)
    short = [est.Row(**{**r.__dict__, "window_s": 1.0}) for r in rows]
    _, lo_w, hi_w, *_ = est.predict(short, est.Dataset(670 * MB, 20))
    assert lo_w <= 670 / 16.8 * (1 - 0.2) < lo and hi_w == hi


def test_fewer_objects_than_connections_slow_a_route_limited_per_connection_only():
    rows = [row(rate=40.0, fixed=0.1) for _ in range(3)]  # 4 connections used
    data = est.Dataset(200 * MB, 2)  # plain: 2 objects, 2 of the 4 connections
    per_conn = est.predict(rows, data, 0, est.PER_CONNECTION)
    shared = est.predict(rows, data, 0, "shared link")
    assert per_conn[4] == pytest.approx(20.0)  # the rate x 2/4
    assert per_conn[0] == pytest.approx(0.1 + 200 / 20)
    assert any("limited per connection: the rate x 0.50" in n for n in per_conn[6])
    assert shared[4] == pytest.approx(40.0)
    assert any("does not say whether fewer connections" in n for n in shared[6])
    # chunked: 2 files of 100 MB in 4 MiB chunks are 48 objects, all 4 connections
    chunked = est.predict(rows, data, 4 * 2**20, est.PER_CONNECTION)
    assert chunked[4] == pytest.approx(40.0)
    assert not any("connections" in n for n in chunked[6])


def test_more_objects_than_the_campaign_had_are_said_and_not_counted_in():
    rows = [row(connections=1, objects=1) for _ in range(3)]  # one file at 4 transfers
    out = est.predict(rows, est.Dataset(1000 * MB, 10), 0, est.PER_CONNECTION)
    assert out[4] == pytest.approx(10.0)
    assert any("yours can use 4: faster" in n for n in out[6])


def test_small_files_cost_per_file_where_measured_and_are_said_where_not():
    rows = [row(nbytes=100 * MB, objects=1000, fixed=2.0) for _ in range(3)]  # 100 KB files
    measured = est.predict(rows, est.Dataset(100 * MB, 2000), small_files=True)
    assert measured[3] == pytest.approx(4.0)  # twice the files, twice the fixed cost
    big = [row(nbytes=64 * MB, objects=1) for _ in range(3)]
    unmeasured = est.predict(big, est.Dataset(64 * MB, 1000))
    assert any("a per-file cost was not measured" in n for n in unmeasured[6])
    same = est.predict(big, est.Dataset(64 * MB * 10, 10))
    assert not any("per-file" in n for n in same[6])


def test_egress_is_the_cost_blocks_rule():
    p = Prices(0.09, 0.023, "USD")
    assert egress_cost(2e12, "download", p) == pytest.approx(180.0)
    assert egress_cost(2e12, "upload", p) == 0.0 and math.isnan(egress_cost(1, "download", None))
    assert est.egress_text(2 * 10**12, "download", p) == "180.00 USD"
    assert est.egress_text(2 * 10**12, "upload", p) == "none (upload)"
    assert est.egress_text(1, "download", None) == "no prices configured"


def test_durations_read_in_their_unit_and_under_a_second_in_two_figures():
    assert est.duration(40.06) == "40.1 s" and est.duration(750) == "12.5 min"
    assert est.duration(5.2 * 3600) == "5.2 h" and est.duration(0.0421) == "0.042 s"
    # a small dataset's interval keeps its width (a user read "0.0 s [0.0 s, 0.0 s]")
    assert est.duration(0.0042, like=0.0055) == "0.0042 s"
    assert est.duration(30, like=4000) == "0.5 min" and est.duration(math.nan) == "?"


def test_the_window_rate_ends_where_the_count_reached_its_total():
    # 10 MB/s from the first sample; then the upload's buffers drain (a plateau)
    assert est.window_rate([1.0, 2.0, 3.0, 3.6], [5e6, 15e6, 25e6, 25e6]) == pytest.approx(10.0)
    assert est.window_rate([1.0], [5e6]) is None


def test_the_setting_to_use_is_the_tuned_commands_else_the_best():
    routes = [
        {"site": "a", "remote": "m", "direction": "upload", "layout": "chunked-4MiB",
         "setting": "rclone-1x8"},
        {"site": "b", "remote": "m", "direction": "upload", "layout": "plain",
         "setting": "rclone-1x4"},
    ]  # fmt: skip
    tuned = pd.DataFrame([
        {"site": "a", "remote": "m", "direction": "upload", "status": "done",
         "layout": "chunked-4MiB", "setting": "rclone-1x4"},
    ])  # fmt: skip
    chosen = est.setting_to_use(routes, tuned)
    assert [c["setting"] for c in chosen] == ["rclone-1x4", "rclone-1x4"]
    assert est.setting_to_use(routes, None)[0]["setting"] == "rclone-1x8"


def test_the_reports_dataset_is_the_estimate_key_else_the_campaigns_x100(demo_config):
    info = json.loads(jobs.report_info(load_campaign(demo_config), demo_config).to_json())
    assert "estimate" not in info  # unset: the report info's text as it was
    assert est.dataset_of(info) == est.Dataset(100 * 32 * 2**20, 100)
    cfg = demo_config | {"estimate": {"size": "2TiB", "files": 1000}}
    info = json.loads(jobs.report_info(load_campaign(cfg), cfg).to_json())
    assert est.dataset_of(info) == est.Dataset(2 * 2**40, 1000)
    with pytest.raises(ConfigError, match="estimate.size"):
        load_campaign(demo_config | {"estimate": {"size": "2T", "files": 3}})
    with pytest.raises(ConfigError, match="estimate"):
        load_campaign(demo_config | {"estimate": {"size": "2TiB"}})


def _campaign_tables(tmp_path, rate=20.0, fixed=0.5, nbytes=64 * 2**20, setting="rclone-1x4"):
    """A campaign's results: one route, three repeats of 6-7 s with a series each."""
    rows, series = [], []
    for rep, wobble in enumerate((0.0, 0.05, -0.05), start=1):
        seconds = fixed + wobble + nbytes / (rate * MB)
        key = dict(campaign="c", site="s1", remote="r", direction="download",
                   strategy="plain", layout="plain", setting=setting, repeat=rep)  # fmt: skip
        rows.append(key | dict(
            tool="rclone", clients=1, concurrency=4, status="ok", seconds=seconds,
            mb_per_s=nbytes / seconds / MB, files=1, objects=1, bytes_requested=nbytes,
            bytes_moved=nbytes, transfers=4, objects_in_flight=1, streams_per_object=1,
            connections=1,
        ))  # fmt: skip
        for k in range(1, int(seconds) + 1):
            moved = min(nbytes, (k - fixed - wobble) * rate * MB)
            series.append(key | {"elapsed_s": float(k), "bytes": moved, "mb_per_s": rate})
        series.append(key | {"elapsed_s": seconds, "bytes": nbytes, "mb_per_s": rate})
    pd.DataFrame(rows).to_csv(tmp_path / "transfers.tsv", sep="\t", index=False)
    pd.DataFrame(series).to_csv(tmp_path / "timeseries.tsv", sep="\t", index=False)
    route = {**rows[0], "state": "ok"}
    doc = {"campaign": "c", "routes": [{k: route[k] for k in
           ("site", "remote", "direction", "layout", "setting", "state")}]}  # fmt: skip
    (tmp_path / "routes.json").write_text(json.dumps(doc))
    pd.DataFrame([{"site": "s1", "remote": "r", "direction": "download",
                   "limit": "shared link", "figures": "", "action": ""}]).to_csv(
        tmp_path / "limits.tsv", sep="\t", index=False)  # fmt: skip


def test_an_auto_setting_is_named_as_run_and_an_undetermined_limit_said_so(tmp_path, capsys):
    """The setting as the first screen names it (a user read 's5cmd-1x2' there and
    's5cmd-1xauto' in the estimate), and no 'limited by undetermined'."""
    _campaign_tables(tmp_path, setting="rclone-1xauto")  # ran 4 objects at once
    (tmp_path / "limits.tsv").write_text(
        "site\tremote\tdirection\tlimit\tfigures\taction\ns1\tr\tdownload\tundetermined\t\t\n"
    )
    assert est.main([str(tmp_path), "--size", "2GB", "--files", "4"]) == 0
    text = capsys.readouterr().out
    assert "at plain rclone-1x4 " in text and "xauto" not in text, text
    assert "its limit undetermined" in text and "limited by undetermined" not in text


def test_the_command_answers_per_route_from_a_campaigns_tables(tmp_path, capsys):
    _campaign_tables(tmp_path)
    assert est.main([str(tmp_path), "--size", "2GB", "--files", "4", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["setting"] == "rclone-1x4" and got["limit"] == "shared link"
    assert got["fixed_s"] == pytest.approx(0.5, abs=0.06)
    assert got["mb_per_s"] == pytest.approx(20.0, rel=0.01)
    assert got["low_s"] <= 0.5 + 2000 / 20 <= got["high_s"]
    assert got["egress"] == "no prices configured"
    assert est.main([str(tmp_path), "--size", "2GB", "--files", "4"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("1.86 GiB in 4 files:\ns1 download r: 100.5 s [")
    assert "95% prediction interval for one copy" in text
    assert est.main([str(tmp_path), "--size", "2G", "--files", "4"]) == 2
    assert "2GiB or 2GB" in capsys.readouterr().err
    assert est.main([str(tmp_path), "--size", "2GB", "--files", "4", "--route", "x/y/z"]) == 2
    assert est.main([str(tmp_path / "none"), "--size", "2GB", "--files", "4"]) == 2


def test_the_block_follows_the_command_it_times_on_the_first_screen(tmp_path):
    from tests.test_first_screen import demo_like, summarise, tuned_rows

    _campaign_tables(tmp_path)
    t = demo_like()
    found = [
        est.Estimate(
            "s1", "r", "download", "plain", "rclone-1x4", 3, 100.5, 99.0, 102.0, 0.95, 0.5,
            20.0, "per row", "shared link", "1.00 USD", ("a note",),
        )
    ]  # fmt: skip
    block = est.block_html(found, est.Dataset(2 * 10**9, 4), named=True)
    assert "How long your data takes: 1.86 GiB in 4 files" in block
    assert "100.5 s [99.0 s, 102.0 s] 95% prediction interval for one copy" in block
    assert "limited by shared link" in block and "a note" in block
    page = headline.headline_html(
        t, summarise(t, pd.DataFrame()), {"campaign": "demo"}, None, tuned=tuned_rows(),
        limits="<div class='cb-limits'><h3>What limits each route</h3></div>", estimate=block,
    )  # fmt: skip
    assert (
        page.index("<div class='cb-limits'>")
        < page.index('class="cb-tuned"')
        < page.index("cb-estimate")
    )
