"""Checks of a whole campaign's results, shared by the end-to-end tests (the demo, and the
demo's campaign against a real S3 server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign import paths
from cloudbench.campaign.model import load_campaign
from cloudbench.campaign.tune import measured_labels


def _intervals(df: pd.DataFrame) -> list[tuple[float, float, str]]:
    epoch = pd.Timestamp(0, tz="UTC")
    start = (pd.to_datetime(df["started_utc"], utc=True) - epoch).dt.total_seconds()
    label = df.get("step", df.get("direction"))
    return list(zip(start, start + df["seconds"], label, strict=True))


def assert_transfers_ran_alone(transfers: pd.DataFrame, steps: pd.DataFrame) -> None:
    """On one machine a measured transfer holds every core: no data step, reassembly or
    check of any site ran while it was timed (a local run must not lift the core limit)."""
    for t0, t1, direction in _intervals(transfers):
        for s0, s1, step in _intervals(steps):
            assert s1 <= t0 or s0 >= t1, (
                f"{step} [{s0:.3f}, {s1:.3f}] inside {direction} [{t0:.3f}, {t1:.3f}]"
            )


def planned(campaign: Any, results: Path) -> list[tuple[str, str, str, str, int]]:
    """Every measurement a finished campaign made, as (site, direction, layout, setting,
    repeat): its grid, or in the tuning mode what each site's searches measured (its final
    state, tune.json)."""
    if campaign.tune is None:
        return [
            (m.site, m.direction, m.layout.label, m.setting.label, m.repeat)
            for m in campaign.measurements()
        ]
    out = []
    for site in campaign.sites:
        state = json.loads(Path(paths.tune_final(results, site.name)).read_text())
        out += [
            (x["site"], x["direction"], x["layout"], x["setting"], x["repeat"])
            for x in measured_labels(state, campaign.repeats)
        ]
    return out


def check_campaign(workdir: Path, config: dict) -> pd.DataFrame:
    """What every finished campaign holds, read from its results: every measurement planned
    has one ok row; each row's bytes, rate and connections are what its columns say and
    trace to its raw rclone log; the series, the steps; no data step ran while a transfer
    was timed; no bulk data left in any scratch. Returns the transfers table."""
    campaign = load_campaign(config, base=workdir)
    results = workdir / "results" / config["campaign"]
    df = pd.read_csv(results / "transfers.tsv", sep="\t")
    expected = planned(campaign, results)
    assert len(df) == len(expected)
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["layout", "error"]]
    got = {(r.site, r.direction, r.layout, r.setting, r.repeat) for r in df.itertuples()}
    assert got == set(expected)
    total = campaign.dataset_bytes
    assert (df["bytes_requested"] == total).all()
    # the reported rate is the bytes over the wall-clock seconds, to rounding
    assert ((df["mb_per_s"] - df["bytes_requested"] / df["seconds"] / 1e6).abs() < 0.01).all()
    # connections are counted from what ran: never more than the setting's concurrency (the
    # job's threads at auto), and plain moves no more objects at once than there are files
    assert (df["connections"] == df["objects_in_flight"] * df["streams_per_object"]).all()
    assert (df["connections"] <= df["concurrency"]).all()
    plain = df[df["layout"] == "plain"]
    assert (plain["objects_in_flight"] <= campaign.files).all()
    for r in df.itertuples():  # every row traces to a raw rclone JSON log with the same bytes
        log = (
            results
            / "sites"
            / r.site
            / "client-logs"
            / r.direction
            / r.remote
            / r.layout
            / r.setting
            / f"r{r.repeat}.log"
        )
        stats = [
            json.loads(line)
            for line in log.read_text().splitlines()
            if line.startswith("{") and '"stats"' in line
        ]
        # bytes_moved is rclone's own final count: the dataset, or more when a retried
        # attempt re-sent data (serve s3 answers the odd 500 under load)
        assert stats and stats[-1]["stats"]["bytes"] == r.bytes_moved >= total
    series = pd.read_csv(results / "timeseries.tsv", sep="\t")
    assert set(series["layout"]) == set(df["layout"])
    steps = pd.read_csv(results / "steps.tsv", sep="\t")
    assert {"generate", "checksum", "chunk", "reassemble", "verify"} <= set(steps["step"])
    assert_transfers_ran_alone(df, steps)
    # bulk data is gone from every scratch (only the local remote, if any, keeps its copies)
    for site in campaign.sites:
        left = [p for p in (site.scratch / campaign.name).rglob("*") if p.is_file()]
        assert left == [], left[:5]
    return df
