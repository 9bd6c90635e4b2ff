"""Routes at a glance (cloudbench.report.routes): each route's best setting, rate and state,
the first screen's grid and the files a centre's monitoring reads."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cloudbench.report.routes import (
    BELOW,
    FAILED,
    NO_DATA,
    OK,
    exit_code,
    grid_html,
    prometheus,
    routes,
    status_json,
)

pytestmark = pytest.mark.unit


def _rows(site, remote, direction, rates, layout="plain", setting="rclone-1x4", **extra):
    return [
        {
            "site": site, "remote": remote, "direction": direction, "tool": "rclone",
            "strategy": layout.split("-")[0], "layout": layout, "setting": setting,
            "repeat": i + 1, "status": "ok" if r is not None else "failed", "mb_per_s": r,
            "outage": "",
        } | extra
        for i, r in enumerate(rates)
    ]  # fmt: skip


def _table():
    rows = (
        _rows("a", "s3", "upload", [100, 110, 105])
        + _rows("a", "s3", "upload", [200, 210, 190], layout="chunked-64MiB")
        + _rows("a", "gcs", "upload", [40, 42, 41])
        + _rows("b", "s3", "upload", [None, None, None])
        + _rows("b", "gcs", "upload", [None, None, None], outage="during")
    )
    return pd.DataFrame(rows)


def test_a_route_is_its_best_setting_with_the_interval_of_its_median():
    t = routes(_table(), (150.0, 50.0)).set_index(["site", "remote"])
    best = t.loc[("a", "s3")]
    assert best["layout"] == "chunked-64MiB" and best["median_mb_per_s"] == 200
    assert (best["low_mb_per_s"], best["high_mb_per_s"], best["level"]) == (190, 210, 0.75)
    assert best["state"] == OK
    assert t.loc[("a", "gcs"), "state"] == BELOW  # 41 < poor 50
    assert t.loc[("b", "s3"), "state"] == FAILED  # failed while the store answered
    assert t.loc[("b", "gcs"), "state"] == NO_DATA  # failed in an outage: nothing learnt


def test_the_grid_names_a_whole_failed_row_a_site_failure():
    page = grid_html(routes(_table(), (150.0, 50.0)), (150.0, 50.0))
    assert "b (site)" in page and "a (site)" not in page
    assert 'class="good"' in page and 'class="bad"' in page and 'class="none"' in page
    assert "200.0 [190.0, 210.0] 75%" in page  # the first screen's one form: a rate, one decimal


def test_the_grid_names_an_auto_setting_by_what_it_ran_and_says_auto_once():
    """A reader saw rclone-1xauto where auto was 2 transfers: the grid names the setting by
    its values as run (transfers.tsv's concurrency) and says what auto is, once."""
    rows = _rows("a", "s3", "upload", [100, 110, 105], setting="rclone-1xauto", concurrency=2)
    rows += _rows("a", "gcs", "upload", [40, 42, 41], setting="rclone-1xauto", concurrency=2)
    page = grid_html(routes(pd.DataFrame(rows)), (None, None))
    # shown as run; its records' own name stays on hover, to find them by
    assert "<small>plain rclone-1x2</small>" in page and "<small>plain rclone-1xauto" not in page
    assert page.count("'auto' ran the transfer job's threads") == 1
    assert "'auto'" not in grid_html(routes(_table()), (None, None))  # none ran auto


def test_monitoring_files_name_every_route_and_its_state():
    t = routes(_table(), (150.0, 50.0))
    doc = json.loads(status_json(t, {"campaign": "c"}))
    assert {(r["site"], r["remote"], r["state"]) for r in doc["routes"]} == {
        ("a", "s3", OK), ("a", "gcs", BELOW), ("b", "s3", FAILED), ("b", "gcs", NO_DATA),
    }  # fmt: skip
    prom = prometheus(t, {"campaign": "c"})
    assert (
        'cloudbench_route_rate_mb_per_s{campaign="c",site="a",remote="s3",direction="upload"} 200.0'
        in prom
    )
    assert (
        'cloudbench_route_state{campaign="c",site="b",remote="gcs",direction="upload",'
        'state="no data"} 1' in prom
    )
    assert exit_code(t["state"]) == 1
    assert exit_code([OK, OK]) == 0
