"""A store that dies for good during a campaign (issue: weeks across real centres): the
site's breaker opens after a few failures, no further copy starts, the run ends naming the
store, and the reruns measure exactly what is missing, then nothing.

Every time bound here is the fault's own: the stall limit the campaign sets
(``store_down.stall``, a few seconds here, not the default minute) plus the listing of the
dead store that decided it, as long as the record says it took; and "nothing started after
the breaker opened", read from the run's records and the breaker's own file."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.campaign.paths import transfer_logs_glob
from cloudbench.measure.copy import STALL_CHECK_S
from cloudbench.measure.rclonelog import stamp_epoch
from cloudbench.processes import KILL_GRACE_S
from cloudbench.site import breaker
from tests.infra.batchsite import site_env, transfer_records
from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN, HANG_S, popen_snakemake, snakemake, wait_for, write_config

pytestmark = [pytest.mark.full, pytest.mark.slow]

CAMPAIGN = "breaker-probe"
STALL_S = 2  # store_down.stall: a copy that moves nothing this long, the store silent, ends
AFTER_FAILURES = 3  # store_down.after_failures, its default
# 3 repeats: the store dies in the second copy, so at tursa (3 uploads, 3 downloads) at
# least 4 measurements are left, 3 to fail and open its breaker and at least one for it
# to refuse; tesseract's 3 downloads fail and open its own
REPEATS = 3
MEASUREMENTS = 3 * REPEATS  # uploads at tursa, downloads at tursa and at tesseract


def _campaign(
    demo_config: dict, repeats: int = REPEATS, after_failures: int = AFTER_FAILURES
) -> dict:
    """Plain only, 4 MiB a copy: slowed to 2 s by SLOWED where a run's store dies, once it
    has, enough are left at each site for its breaker to open (``after_failures``) and
    then to refuse the rest."""
    cfg = demo_config
    cfg.update(campaign=CAMPAIGN, remote="s3t:", strategies=["plain"], repeats=repeats)
    cfg["dataset"].update({"files": 1, "size": "4MiB", "chunk_sizes": ["1MiB"]})
    cfg["rclone"]["flags"] = []
    cfg["store_down"] = {"stall": f"{STALL_S}s", "after_failures": after_failures}
    return cfg


#: The run whose store dies moves at 2 MiB/s (rclone reads RCLONE_BWLIMIT as --bwlimit), so
#: that the kill lands inside a copy; a rerun moves at the machine's speed.
SLOWED = {"RCLONE_BWLIMIT": "2M"}


def _recorded(log: Path) -> bool:
    """Whether a transfer log's measurement has its record already."""
    sites = log.parents[6]
    site, _, *rest = log.relative_to(sites).parts  # <site>/client-logs/<dir>/.../rN.log
    record = sites / site / "transfers" / Path(*rest).with_suffix(".json")
    return record.exists()


def _copied(rec: dict) -> bool:
    """A measurement that really copied (not one refused before any request)."""
    return rec.get("seconds") is not None


def _end(rec: dict) -> float:
    return rec["started_epoch"] + rec["seconds"]


def _listing_s(error: str) -> float:
    """How long the listing of the dead store that ended a stalled copy took, as its
    record's error says (0 where the copy's own log named the failure: no listing)."""
    took = re.search(r"without progress, failed in (\d+\.\d) s: ", error)
    return float(took.group(1)) if took else 0.0


def test_a_store_killed_for_good_ends_the_run_naming_it(tmp_path, demo_config):
    cfg_d = _campaign(demo_config)
    cfg = write_config(tmp_path, cfg_d)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        # rclone's own patience is not shortened: the copy in flight when the store dies
        # would log its first network error about 2 minutes later; store_down.stall ends
        # it once it has moved nothing for STALL_S and a listing of the store fails
        proc = popen_snakemake(tmp_path, cfg, env={**env, **SLOWED})
        sites = tmp_path / f"results/{CAMPAIGN}/sites"

        def copying() -> bool:  # the second copy's log has its first stats line
            if not transfer_records(tmp_path, CAMPAIGN):
                return False
            logs = [p for p in sites.glob(transfer_logs_glob()) if not _recorded(p)]
            return any('"stats"' in p.read_text() for p in logs)

        try:
            wait_for(copying, "a copy in flight after the first measurement")
            s3.kill()
            killed = time.time()
            out, _ = proc.communicate(timeout=HANG_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
        assert proc.returncode != 0
        recs = transfer_records(tmp_path, CAMPAIGN)

        # the copy in flight was ended by the stall limit: no sooner than STALL_S after it
        # last moved bytes, and no later than that plus the listing of the dead store that
        # decided it (as long as its record says it took), the checks' cadence (the stall is
        # judged, then the listing's answer read, every STALL_CHECK_S) and the client's
        # grace to exit, by its own record's clock (a listing timed beside the run took
        # 1.6 s less than the run's own on a busy machine, s55b)
        stalled = [r for r in recs.values() if "store_down.stall" in str(r["error"])]
        stalled += [
            json.loads(p.read_text())
            for p in sites.glob("*/transfers/*/*/*/*/r*.attempts/*.json")
            if "store_down.stall" in p.read_text()
        ]
        assert stalled, "no copy was ended by the stall limit"
        for r in stalled:
            limit = STALL_S + _listing_s(r["error"]) + 3 * STALL_CHECK_S + KILL_GRACE_S
            waited = _end(r) - r["stalled_since_epoch"]
            assert STALL_S <= waited <= limit, (waited, limit, r["error"])
            assert r["stalled_since_epoch"] >= r["started_epoch"], r

        # at each site, no copy started once its breaker had opened: the breaker opened at
        # the latest at its newest counted failure (its own file), and at the end of the
        # copy that made the count reach AFTER_FAILURES
        scratch = {s: tmp_path / v["scratch"] for s, v in cfg_d["sites"].items()}
        states = {site: breaker.read(folder, site, "main") for site, folder in scratch.items()}
        opened_at = {s: st for s, st in states.items() if st and st.failures >= AFTER_FAILURES}
        assert opened_at, states  # a breaker opened (the run may end before the other's)
        for site, state in opened_at.items():
            mine = sorted(
                (r for r in recs.values() if r["site"] == site and _copied(r)),
                key=lambda r: r["started_epoch"],
            )
            failed = [r for r in mine if r["status"] != "ok"]
            opened = stamp_epoch(state.last)
            if len(failed) >= AFTER_FAILURES:
                opened = min(opened, _end(failed[AFTER_FAILURES - 1]))
            late = [r["started_utc"] for r in mine if r["started_epoch"] > opened]
            assert late == [], (site, state.last, late)
        after_kill = [r for r in recs.values() if _copied(r) and r["started_epoch"] > killed]
        assert all(r["status"] != "ok" for r in after_kill), after_kill
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
        after = transfer_records(tmp_path, CAMPAIGN)
        assert {p: after[p]["started_utc"] for p in ok_before} == ok_before
        # at each site that had counted failures, the first measurement that reached the
        # store again says so
        firsts = [r["site"] for r in after.values() if r.get("outage") == "after"]
        assert firsts and sorted(firsts) == sorted(set(firsts))
        assert not [p for f in scratch.values() for p in f.glob(".store-down.*")]
        assert not list((tmp_path / "scratch").rglob(".store-down.*"))
        mtimes = {p: p.stat().st_mtime_ns for p in after}

        again = snakemake(tmp_path, cfg, env=env)  # and one more run measures nothing
        assert again.returncode == 0, again.stderr[-3000:]
        assert {p: p.stat().st_mtime_ns for p in transfer_records(tmp_path, CAMPAIGN)} == mtimes


@pytest.mark.scheduler
def test_at_a_batch_site_no_transfer_job_is_submitted_once_the_breaker_trips(
    slurm_cluster,  # noqa: F811
    tmp_path,
    demo_config,
):
    """The same through Slurm (profile tursa): every transfer is a batch job, each with its
    own queue wait; once the breaker opens, Snakemake submits no further transfer job: the
    store_open job before each (on the submitting host) fails naming the breaker, and
    Snakemake never submits the transfer that needs it.

    The breaker opens at 2 failures here, not 3: two transfer jobs (each a Slurm job, about
    3 CPU-seconds of its own Snakemake) still count into the site's one breaker, and with 2
    repeats two measurements are left for it to refuse."""
    repeats, after = 2, 2
    cfg_d = _campaign(demo_config, repeats=repeats, after_failures=after)
    cfg_d["sites"]["tesseract"]["download"] = False  # 2 uploads, 2 downloads at tursa
    cfg = write_config(tmp_path, cfg_d)
    env = site_env(slurm_cluster)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env.update(s3.client_env("S3T"))
        # the data steps here, without a scheduler: what is looked at is the transfer jobs
        # (from the store_open job before each on, which a run makes just before its transfer)
        data = snakemake(
            tmp_path, cfg, "--omit-from", "store_open", "--config", "site=tursa", env=env
        )
        assert data.returncode == 0, data.stderr[-3000:]
        proc = popen_snakemake(  # Snakemake's own terminal: each job it submits to Slurm
            tmp_path, cfg, "--cores", "2", "--logger-cloudbench-full", env={**env, **SLOWED},
            profile="tursa",
        )  # fmt: skip
        sites = tmp_path / f"results/{CAMPAIGN}/sites"
        try:
            wait_for(
                lambda: any('"stats"' in p.read_text() for p in sites.glob(transfer_logs_glob())),
                "the first upload to copy",
            )
            s3.kill()
            out, _ = proc.communicate(timeout=HANG_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
                slurm_cluster.run(["scancel", "-u", "root"], check=False)
    lines = out.splitlines()
    submitted = [
        line
        for line in lines
        if "has been submitted with SLURM jobid" in line
        and ("rule_upload" in line or "rule_download" in line)
    ]
    # every transfer job submitted left its record: none was submitted only to find the
    # breaker open (it fails without one), and the measurements after it were refused by
    # their store_open jobs, which ran here, naming the store
    records = transfer_records(tmp_path, CAMPAIGN)
    assert len(submitted) == len(records), "\n".join(lines[-60:])
    refused = [
        p.read_text()
        for p in (tmp_path / f"results/{CAMPAIGN}/sites/tursa/logs/store_open").rglob("*.log")
        if "not started: store 'main' (s3t:) has not answered since" in p.read_text()
    ]
    assert refused, "\n".join(lines[-60:])
    assert proc.returncode != 0
    assert any("store 'main' (s3t:) has not answered since" in line for line in lines)
    assert len(records) < 2 * repeats  # it stopped before the end
    # nor did any copy start once the site's breaker had opened (its newest failure)
    state = breaker.read(tmp_path / cfg_d["sites"]["tursa"]["scratch"], "tursa", "main")
    assert state is not None and state.failures >= after, state
    late = [
        r["started_utc"]
        for r in transfer_records(tmp_path, CAMPAIGN).values()
        if _copied(r) and r["started_epoch"] > stamp_epoch(state.last)
    ]
    assert late == [], (state.last, late)
