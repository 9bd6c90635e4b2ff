"""A store that dies for good during a campaign (issue: weeks across real centres): the
site's breaker opens after a few failures, no further copy starts, the run ends within
minutes naming the store, and the reruns measure exactly what is missing, then nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.campaign.paths import transfer_logs_glob
from cloudbench.measure.rclonelog import stamp_epoch
from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN, snakemake, snakemake_command, snakemake_env, write_config
from tests.test_faults import _popen_snakemake, _wait_for

pytestmark = pytest.mark.slow

CAMPAIGN = "breaker-probe"


MEASUREMENTS = 15


def _campaign(demo_config: dict) -> dict:
    """15 measurements: 5 uploads at one site, 5 downloads at each of two sites: once the
    store dies, enough are left at each site for its breaker to open (store_down's 3
    failures) and then to refuse the rest. (It had 36, chunked too: the rerun measured
    twice as much, and the breaker counts failures, not layouts.)"""
    cfg = demo_config
    cfg.update(campaign=CAMPAIGN, remote="s3t:", strategies=["plain"], repeats=5)
    cfg["dataset"].update({"files": 1, "size": "4MiB", "chunk_sizes": ["1MiB"]})
    cfg["rclone"]["flags"] = ["--bwlimit", "2M"]  # 2 s a copy: the kill lands inside one
    return cfg


def _records(workdir: Path) -> dict[Path, dict]:
    root = workdir / "results" / CAMPAIGN / "sites"
    return {
        p: json.loads(p.read_text())
        for p in root.glob("*/transfers/*/*/*/*/r*.json")
        if p.parent.name != "clients"
    }


def _recorded(log: Path) -> bool:
    """Whether a transfer log's measurement has its record already."""
    sites = log.parents[6]
    site, _, *rest = log.relative_to(sites).parts  # <site>/client-logs/<dir>/.../rN.log
    record = sites / site / "transfers" / Path(*rest).with_suffix(".json")
    return record.exists()


def test_a_store_killed_for_good_ends_the_run_within_minutes_naming_it(tmp_path, demo_config):
    cfg = write_config(tmp_path, _campaign(demo_config))
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        # rclone's own patience, not shortened: the copy in flight when the store dies logs
        # its first network error about 2 minutes later (126 s, 2026-11-26); store_down.stall
        # (here its default, 60 s) ends it sooner, once a listing of the store, asked when
        # it has moved nothing for 60 s, fails (70 s from its start, 2026-11-26); the other
        # failures are quick
        proc = _popen_snakemake(tmp_path, cfg, env)
        sites = tmp_path / f"results/{CAMPAIGN}/sites"

        def copying() -> bool:  # the second copy's log has its first stats line
            if not _records(tmp_path):
                return False
            logs = [p for p in sites.glob(transfer_logs_glob()) if not _recorded(p)]
            return any('"stats"' in p.read_text() for p in logs)

        try:
            _wait_for(copying, 300, "a copy in flight after the first measurement")
            s3.kill()
            killed = time.time()
            out, _ = proc.communicate(timeout=600)
            ended = time.time()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
        assert proc.returncode != 0
        assert ended - killed < 180, f"the run ended {ended - killed:.0f} s after the kill"
        stalled = [r for r in _records(tmp_path).values() if "store_down.stall" in str(r["error"])]
        stalled += [
            json.loads(p.read_text())
            for p in sites.glob("*/transfers/*/*/*/*/r*.attempts/*.json")
            if "store_down.stall" in p.read_text()
        ]
        assert stalled, "no copy was ended by the stall limit"
        assert all(r["seconds"] < 120 for r in stalled), [r["seconds"] for r in stalled]
        recs = _records(tmp_path)
        started_after = [
            p
            for p, r in recs.items()
            if r.get("seconds") is not None and stamp_epoch(r["started_utc"]) > killed
        ]
        assert len(started_after) <= 2, started_after
        assert len(recs) < MEASUREMENTS  # it stopped: the rest were never started
        lines = out.strip().splitlines()
        tail = "\n".join(lines[-8:])  # Snakemake's own "At least one job..." comes last
        assert "store 'main' (s3t:) has not answered since" in tail, tail
        assert "rerun the same command to measure" in tail, tail
        down = [r for r in recs.values() if r["status"] != "ok"]
        assert down and all(r.get("outage") == "during" for r in down)
        ok_before = {p: r["started_utc"] for p, r in recs.items() if r["status"] == "ok"}

        s3.start()  # the store is back: the rerun measures exactly what is missing
        rerun = snakemake(tmp_path, cfg, env=env)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        table = pd.read_csv(tmp_path / f"results/{CAMPAIGN}/transfers.tsv", sep="\t")
        assert len(table) == MEASUREMENTS and (table["status"] == "ok").all()
        after = _records(tmp_path)
        assert {p: after[p]["started_utc"] for p in ok_before} == ok_before
        # at each site that had counted failures, the first measurement that reached the
        # store again says so
        firsts = [r["site"] for r in after.values() if r.get("outage") == "after"]
        assert firsts and sorted(firsts) == sorted(set(firsts))
        assert not list((tmp_path / "scratch").rglob(".store-down.*"))
        mtimes = {p: p.stat().st_mtime_ns for p in after}

        again = snakemake(tmp_path, cfg, env=env)  # and one more run measures nothing
        assert again.returncode == 0, again.stderr[-3000:]
        assert {p: p.stat().st_mtime_ns for p in _records(tmp_path)} == mtimes


@pytest.mark.scheduler
def test_at_a_batch_site_no_transfer_job_is_submitted_once_the_breaker_trips(
    slurm_cluster,  # noqa: F811
    tmp_path,
    demo_config,
):
    """The same through Slurm (profile tursa): every transfer is a batch job, each with its
    own queue wait; once the breaker opens, Snakemake submits no further transfer job."""
    from tests.test_profiles import _env

    cfg_d = _campaign(demo_config)
    cfg_d.update(strategies=["plain"], repeats=4)
    cfg_d["sites"]["tesseract"]["download"] = False  # 4 uploads, 4 downloads at tursa
    cfg_d["store_down"] = {"stall": "15s"}
    cfg = write_config(tmp_path, cfg_d)
    env = _env(slurm_cluster)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env.update(s3.client_env("S3T"))
        proc = subprocess.Popen(
            snakemake_command(tmp_path, cfg, "--cores", "2", profile="tursa"),
            cwd=tmp_path,
            env=snakemake_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        sites = tmp_path / f"results/{CAMPAIGN}/sites"
        try:
            _wait_for(
                lambda: any('"stats"' in p.read_text() for p in sites.glob(transfer_logs_glob())),
                300,
                "the first upload to copy",
            )
            s3.kill()
            out, _ = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                slurm_cluster.run(["scancel", "-u", "root"], check=False)
    lines = out.splitlines()
    tripped = next(i for i, line in enumerate(lines) if "no more measurements of it" in line)
    submitted = [
        line
        for line in lines[tripped:]
        if "has been submitted with SLURM jobid" in line
        and ("rule_upload" in line or "rule_download" in line)
    ]
    assert submitted == [], "\n".join(lines[tripped:])
    assert proc.returncode != 0
    assert any("store 'main' (s3t:) has not answered since" in line for line in lines[tripped:])
    assert len(_records(tmp_path)) < 8  # it stopped before the end
