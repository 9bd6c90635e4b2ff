"""The demo campaign end to end, against a local-directory remote and a real S3 endpoint."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cloudbench.campaign.model import load_campaign
from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN, snakemake, write_config

pytestmark = pytest.mark.slow


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


def _check_campaign(workdir, config):
    campaign = load_campaign(config, base=workdir)
    results = workdir / "results" / config["campaign"]
    df = pd.read_csv(results / "transfers.tsv", sep="\t")
    expected = list(campaign.measurements())
    assert len(df) == len(expected)
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["layout", "error"]]
    got = {(r.site, r.direction, r.layout, r.repeat) for r in df.itertuples()}
    assert got == {(m.site, m.direction, m.layout.label, m.repeat) for m in expected}
    total = campaign.dataset_bytes
    assert (df["bytes_requested"] == total).all()
    # the reported rate is the bytes over the wall-clock seconds, to rounding
    assert ((df["mb_per_s"] - df["bytes_requested"] / df["seconds"] / 1e6).abs() < 0.01).all()
    # connections are counted from what ran: never more than the job's threads
    assert (df["connections"] == df["objects_in_flight"] * df["streams_per_object"]).all()
    assert (df["connections"] <= df["node_cores"]).all()
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


def test_demo_campaign_end_to_end(demo_report):
    workdir, config, report = demo_report
    df = _check_campaign(workdir, config)
    assert set(df["site"]) == {"tursa", "tesseract"}
    # measured in rounds: every layout's repeat r (3 layouts x 3 repeats) before any r+1,
    # in the order cloudbench.campaign.order gives (not layout after layout)
    ran = df.sort_values("started_utc")
    assert list(ran["repeat"]) == sorted(ran["repeat"]), ran[["layout", "repeat"]]
    first_round = ran[ran["repeat"] == 1]
    assert first_round.groupby("direction")["layout"].nunique().to_dict() == {
        "upload": 3, "download": 3,
    }  # fmt: skip
    copy = workdir / "scratch/demo-remote/cloudbench/demo/data/chunked-4MiB/rclone-1xauto/r1"
    man = json.loads((copy / "manifest.json").read_text())
    assert len(man["files"][0]["chunks"]) == 6  # 24 MiB in 4 MiB chunks
    assert (copy / "objects/demo-001.bin/demo-001.bin.0005").stat().st_size == 4 * 2**20
    assert report.stat().st_size > 50_000
    assert (workdir / "results/demo/status.txt").read_text() == "all measurements ok\n"
    # a second run measures nothing again
    again = snakemake(workdir, workdir / "campaign.yaml", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # the demo's own cap is in force here (and only here: tests/test_real_campaign.py)
    log = workdir / "results/demo/sites/tursa/client-logs/upload/main/plain/rclone-1xauto/r1.log"
    assert "bandwidth limiter" in log.read_text().lower()


def test_campaign_against_real_s3(tmp_path, demo_config):
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        demo_config.update(remote="s3t:", bucket="cloudbench")
        demo_config["dataset"].update(files=1, size="10MiB", chunk_sizes=["3MiB"])
        cfg = write_config(tmp_path, demo_config)
        # an rclone flag from the environment applies to every copy: each row names it
        env = {**s3.client_env("S3T"), "RCLONE_USE_MMAP": "true"}
        run = snakemake(tmp_path, cfg, env=env)
        assert run.returncode == 0, run.stderr[-3000:]
        df = _check_campaign(tmp_path, demo_config)
        assert (df["rclone_env"] == "RCLONE_USE_MMAP=true").all(), df["rclone_env"]
        objects = (
            tmp_path
            / "s3root/cloudbench/demo/data/chunked-3MiB/rclone-1xauto/r2/objects/demo-001.bin"
        )
        assert sorted(p.name for p in objects.iterdir())[-1] == "demo-001.bin.0003"
        assert (tmp_path / "s3root/cloudbench/demo/manifest.json").exists()

        # cleanup removes the bulk data from the remote and scratch, and keeps every result
        clean = snakemake(tmp_path, cfg, "cleanup", env=s3.client_env("S3T"))
        assert clean.returncode == 0, clean.stderr[-2000:]
        assert not (tmp_path / "s3root/cloudbench/demo/data").exists()
        assert (tmp_path / "s3root/cloudbench/demo/manifest.json").exists()
        assert (tmp_path / "s3root/cloudbench/demo/results/tursa/run.json").exists()
        assert (tmp_path / "results/demo/transfers.tsv").exists()
