"""Faults, bad input and secrets against a real S3 endpoint: nothing lost, nothing wrong."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.campaign.identity import MeasurementId
from cloudbench.campaign.paths import transfer_log
from cloudbench.measure.rclonelog import network_cause
from tests.infra.e2e import check_campaign
from tests.infra.s3 import REMOTE_OF, both_stores, env_of, remotes_of, serve_s3
from tests.infra.workflow import BIN, popen_snakemake, snakemake, wait_for, write_config

pytestmark = [pytest.mark.full, pytest.mark.slow]
# rclone reads flags from RCLONE_* variables: given only to the run whose server dies, so
# the rerun against the restarted server keeps rclone's retries. `rclone serve s3` answers
# concurrent PUTs into new nested directories with the odd 500 (a race in its VFS), which a
# retry absorbs; real stores have no directories to race on.
FAST_FAIL = {
    "RCLONE_RETRIES": "1",
    "RCLONE_LOW_LEVEL_RETRIES": "1",
    "RCLONE_CONTIMEOUT": "2s",
    "RCLONE_TIMEOUT": "5s",
}

#: The run a test breaks moves at 1 MiB/s (rclone reads RCLONE_BWLIMIT as --bwlimit), so
#: that a 6 MiB copy lasts seconds and the kill lands inside it (the rerun moves a quarter
#: of the 24 MiB at 4 MiB/s that did the same, s55): given to the sender, the
#: clients of an upload (the run's environment) or the server of a download (its own); the
#: rerun that measures again moves at the machine's speed (a cap in the campaign file would
#: be every run's).
SLOWED = {"RCLONE_BWLIMIT": "1M"}

PLAIN_R1 = {"remote": "main", "layout": "plain", "setting": "rclone-1xauto", "repeat": 1}


def _plain_r1(site: str, direction: str, remote: str = "main") -> MeasurementId:
    return MeasurementId.of(PLAIN_R1 | {"site": site, "direction": direction, "remote": remote})


def _small(cfg: dict, **dataset) -> dict:
    cfg["dataset"].update({"files": 1, "size": "8MiB", "chunk_sizes": ["2MiB"], **dataset})
    return cfg


def _table(workdir: Path, campaign: str = "demo") -> pd.DataFrame:
    return pd.read_csv(workdir / "results" / campaign / "transfers.tsv", sep="\t")


def test_server_killed_mid_upload_is_recorded_then_remeasured(tmp_path, demo_config):
    """Each server dies during its first upload: that measurement is failed with rclone's
    error, naming the refused connection; the next upload is not started against a store
    that still does not answer (a new user's dead store cost 8 minutes an upload) and says
    so; the campaign goes on once the server is back, the run ends non-zero listing the
    failures, and a rerun measures exactly the failed transfers again. Both S3 servers,
    side by side as two remotes of one campaign, each killed in its own upload."""
    cfg_d = _small(demo_config, size="6MiB")  # 6 s a copy at 1 MiB/s: killed after 1 s
    cfg_d.pop("remote")
    cfg_d.update(strategies=["plain"], repeats=2)
    # the store comes back while the run goes on: the breaker (test_store_down) stays shut
    cfg_d["store_down"] = {"after_failures": 5}
    del cfg_d["sites"]["tesseract"]  # one site's downloads say all there is to say
    cfg_d["rclone"]["flags"] = []
    with both_stores(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        cfg = write_config(tmp_path, cfg_d | {"remotes": remotes_of(s3)})
        env = env_of(s3)
        proc = popen_snakemake(tmp_path, cfg, env={**env, **FAST_FAIL, **SLOWED})
        records = tmp_path / "results/demo/sites/tursa/transfers/upload"
        killed: list[str] = []

        def each_killed_mid_upload_and_its_second_recorded() -> bool:
            for store, server in s3.items():
                log = tmp_path / transfer_log("results/demo", _plain_r1("tursa", "upload", store))
                if store not in killed and log.exists() and '"stats"' in log.read_text():
                    server.kill()  # its first upload is moving bytes
                    killed.append(store)
            return all((records / s / "plain/rclone-1xauto/r2.json").exists() for s in s3)

        wait_for(each_killed_mid_upload_and_its_second_recorded, "the uploads' records", proc=proc)
        assert sorted(killed) == sorted(s3)
        for server in s3.values():
            server.start()
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode != 0
        # the status job's line says how many are not ok; its log names each of them
        assert "failed: rule status: cloudbench status: " in out and "not ok" in out
        status = (tmp_path / "results/demo/logs/status.log").read_text()
        df = _table(tmp_path)
        for store in s3:
            assert f"failed: tursa upload {store} plain rclone-1xauto r1" in status
            ups = df[(df["direction"] == "upload") & (df["remote"] == store)]
            up, up2 = ups.sort_values("repeat").iloc[0], ups.sort_values("repeat").iloc[1]
            assert up["status"] == "failed" and network_cause(up["error"]), (store, up["error"])
            assert pd.isna(up["mb_per_s"])
            assert up2["status"] == "failed" and pd.isna(up2["seconds"])  # never started
            assert up2["error"].startswith(
                f"not measured: store '{store}' ({REMOTE_OF[store]}:) has not answered since"
            ), up2["error"]
            assert "failure(s) in a row; the last, dial tcp" in up2["error"]
            assert up2["outage"] == "during"
        downs = df[df["direction"] == "download"]
        assert set(downs["remote"]) == set(s3)
        assert (downs["status"] == "failed").all()  # nothing to download: said, not skipped
        # the copy was never whole; while the store was down, that is what they could say
        said = downs["error"].str.contains("upload of this copy failed")
        assert (said | downs["error"].map(lambda e: network_cause(e) is not None)).all()

        rerun = snakemake(tmp_path, cfg, env=env)
        assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
        df2 = _table(tmp_path)
        assert (df2["status"] == "ok").all()
        for store in s3:
            for r in (1, 2):
                rec = records / store / f"plain/rclone-1xauto/r{r}.json"
                attempts = sorted((rec.with_suffix(".attempts")).glob("*.json"))
                statuses = [json.loads(p.read_text())["status"] for p in attempts]
                assert statuses == ["failed", "ok"], (store, r)
        assert not list((tmp_path / "scratch").rglob(".store-down.*"))  # the store is back


def test_server_killed_mid_download(tmp_path, demo_config):
    """The store dies during a download: the download is failed, the upload before it kept,
    and a rerun against the store restarted measures the download again, counting the
    failed attempt's bytes too.

    The server sends at the slowed rate (RCLONE_BWLIMIT in its own environment): slowed at
    the client instead, the server wrote the whole 24 MiB object into loopback's socket
    buffers (this kernel lets a receive buffer grow to 32 MiB) in the first second, and a
    kill after it let the copy finish ok (s55a)."""
    cfg_d = _small(demo_config, size="6MiB")  # seconds a copy at the server's rate
    cfg_d.update(remote="s3t:", strategies=["plain"], repeats=1)
    del cfg_d["sites"]["tesseract"]  # the site that uploads downloads too: 5 jobs fewer
    cfg_d["rclone"]["flags"] = []
    cfg = write_config(tmp_path, cfg_d)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", env=SLOWED) as s3:
        env = s3.client_env("S3T")
        proc = popen_snakemake(tmp_path, cfg, env={**env, **FAST_FAIL})
        log = tmp_path / transfer_log("results/demo", _plain_r1("tursa", "download"))
        wait_for(lambda: log.exists() and '"stats"' in log.read_text(), "download start")
        s3.kill()
        record = tmp_path / (
            "results/demo/sites/tursa/transfers/download/main/plain/rclone-1xauto/r1.json"
        )
        wait_for(record.exists, "the failed download's record")
        # back while the run goes on: the steps after the download (publish) need not wait
        # out their patience with a dead store (45 s; test_store_down has a store that stays
        # dead, test_terminal the lines its run ends with); at the machine's speed now
        s3.env = {}
        s3.start()
        out, _ = proc.communicate(timeout=600)
        df = _table(tmp_path)
        up = df[df["direction"] == "upload"].iloc[0]
        down = df[df["direction"] == "download"].iloc[0]
        assert up["status"] == "ok"  # the finished measurement is kept
        # killed mid-copy (the kill a poll after its first stats line, the rest still unsent)
        assert down["status"] == "failed" and down["error"], down.to_dict()
        assert proc.returncode != 0  # the status job names the failed download
        rerun = snakemake(tmp_path, cfg, env=env)
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        df2 = _table(tmp_path)
        assert (df2["status"] == "ok").all()
        assert df2[df2["direction"] == "upload"].iloc[0]["started_utc"] == up["started_utc"]
        # the store billed the failed attempt's bytes too: the row counts both attempts
        again = df2[df2["direction"] == "download"].iloc[0]
        assert down["bytes_moved"] > 0 and again["attempts"] == 2
        assert again["bytes_moved_all_attempts"] == down["bytes_moved"] + again["bytes_moved"]


def test_corrupt_downloads_are_caught_named_and_kept_as_found(tmp_path, demo_config):
    """Two objects changed in the store after their upload, one for each check that catches
    it: a plain object whose store still states the upload's md5 is caught by rclone's own
    md5 check, a chunk whose store hashes its new bytes by the verify against the manifest.
    A user saw the first recorded `failed` (measured again by every rerun) where the same
    fault found by verify was `corrupt`: both are `corrupt` here, each names its object (the
    changed chunk, not its neighbour), and both are kept as found; the run's last line counts
    them and names the --forcerun that measures them again, and a rerun measures nothing.
    (One campaign of both layouts: it was two, one per check, s55.)"""
    cfg_d = _small(demo_config)
    cfg_d.update(remote="s3t:", strategies=["plain", "chunked"], repeats=1)
    del cfg_d["sites"]["tesseract"]  # the site that uploads downloads too: 5 jobs fewer
    cfg_d["rclone"]["flags"] = []
    cfg = write_config(tmp_path, cfg_d)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        up = snakemake(tmp_path, cfg, "results/demo/manifest.json", env=env)  # upload only
        assert up.returncode == 0, up.stderr[-2000:]
        data = tmp_path / "s3root/cloudbench/demo/data"
        (obj,) = (p for p in (data / "plain").rglob("demo-001.bin") if "objects" in p.parts)
        st = obj.stat()
        _flip_a_byte(obj)
        os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns))  # the store's md5 stays the upload's
        # its mtime moves: the store hashes the new bytes, and rclone's check passes
        _flip_a_byte(data / "chunked-2MiB/rclone-1xauto/r1/objects/demo-001.bin/demo-001.bin.0002")
        run = snakemake(tmp_path, cfg, env={**env, **FAST_FAIL})
        assert run.returncode != 0
        downs = _table(tmp_path).query("direction == 'download'")
        assert len(downs) == 2 and (downs["status"] == "corrupt").all(), downs
        down = downs[downs["layout"] == "plain"].iloc[0]
        assert pd.isna(down["mb_per_s"])
        assert pd.isna(down["chunk_bytes"])  # a plain layout has no chunk size, not "0"
        assert "corrupted on transfer: md5 hashes differ" in down["error"]
        assert down["error"].endswith("(on demo-001.bin)")
        chunked = downs[downs["layout"] != "plain"]
        assert chunked["error"].str.contains("demo-001.bin.0002").all(), chunked["error"]
        assert not chunked["error"].str.contains("demo-001.bin.0001").any()
        said = run.stdout + run.stderr
        # the run's last line counts them corrupt (not ok), and says what measures them again
        assert f"0 failed, {len(downs)} corrupt), 0 not measured yet" in said
        assert "kept as found, and every run ends non-zero until" in said
        downloads = tmp_path / "results/demo/sites/tursa/transfers/download/main"
        records = [downloads / f"{layout}/rclone-1xauto" for layout in ("plain", "chunked-2MiB")]
        forcerun = [ln for ln in said.splitlines() if "add --forcerun results/demo/sites/" in ln]
        assert forcerun, said[-3000:]
        for record in records:
            assert any(f"{record.relative_to(tmp_path)}/r1.json" in ln for ln in forcerun)
        kept = {r: sorted((r / "r1.attempts").glob("*.json")) for r in records}
        assert len(kept[records[0]]) == 1
        again = snakemake(tmp_path, cfg, env=env)
        assert again.returncode != 0  # still not ok, and said so
        # measured nothing
        assert {r: sorted((r / "r1.attempts").glob("*.json")) for r in records} == kept


def _flip_a_byte(path: Path) -> None:
    """Change one byte of an object in the store's own directory."""
    data = bytearray(path.read_bytes())
    data[12345] ^= 0xFF
    path.write_bytes(bytes(data))


def _small_filesystem(path: Path, size: str) -> bool:
    """A real small filesystem (tmpfs) where this machine lets us mount one."""
    path.mkdir(parents=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    return res.returncode == 0


def test_scratch_too_small_is_one_clear_line(tmp_path, demo_config):
    cfg_d = _small(demo_config)
    small = tmp_path / "small"
    mounted = _small_filesystem(small, "5m")
    env = {} if mounted else {"CLOUDBENCH_FREE_BYTES": str(5 * 2**20)}  # injected figure
    try:
        cfg_d["sites"]["tursa"]["scratch"] = str(small)
        cfg = write_config(tmp_path, cfg_d)
        run = snakemake(tmp_path, cfg, env=env)
    finally:
        if mounted:
            subprocess.run(["umount", str(small)], check=True)
    assert run.returncode != 0
    log = (tmp_path / "results/demo/sites/tursa/logs/preflight.log").read_text()
    problems = [line for line in log.splitlines() if line.startswith("  ")]
    assert len(problems) == 1, log
    assert f"scratch {small}" in problems[0] and "needs 40MiB" in problems[0]
    assert "5MiB free" in problems[0] or not mounted
    assert not list(tmp_path.rglob("*.bin"))  # nothing was generated


def test_sigint_mid_run_then_rerun_keeps_finished_measurements(tmp_path, demo_config):
    cfg_d = _small(demo_config, size="16MiB")
    cfg_d.update(strategies=["plain"], repeats=1)
    del cfg_d["sites"]["tesseract"]  # one site's upload finished, its download cut
    cfg_d["rclone"]["flags"] = []
    cfg = write_config(tmp_path, cfg_d)
    proc = popen_snakemake(tmp_path, cfg, env={"RCLONE_BWLIMIT": "8M"})  # 2 s a copy

    def finished() -> dict[Path, dict]:
        """Records written and known to Snakemake as complete (not in .snakemake/incomplete)."""
        incomplete = {
            base64.b64decode(p.name.encode()).decode()
            for p in (tmp_path / ".snakemake/incomplete").glob("*")
        }
        return {
            p: json.loads(p.read_text())
            for p in (tmp_path / "results/demo/sites").rglob("transfers/**/r1.json")
            if str(p.relative_to(tmp_path)) not in incomplete
        }

    def running() -> list[Path]:
        """rclone logs of transfers under way (the second name goes when the record comes)."""
        logs = (tmp_path / "results/demo/sites").rglob("*.log.live")
        return [p for p in logs if '"stats"' in p.read_text()]

    wait_for(lambda: len(finished()) >= 1 and running(), "a finished and a running one")
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    done = finished()
    assert done
    assert len(done) < 2, "interrupted too late: every transfer had finished"
    # Ctrl-C ends with one line: what is recorded, and that the same command goes on
    stopped = [ln for ln in out.splitlines() if ln.startswith("cloudbench: stopped with")]
    assert len(stopped) == 1, out[-3000:]
    assert "measurements recorded" in stopped[0] and "rerun the same command" in stopped[0]
    rerun = snakemake(tmp_path, cfg)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    for p, rec in done.items():  # measured once, not again
        assert json.loads(p.read_text())["started_utc"] == rec["started_utc"]
    rows = _table(tmp_path)
    assert (rows["status"] == "ok").all()
    # the interrupted transfer's rclone log is kept (Snakemake had deleted the declared log
    # before the rerun), and its bytes count as an attempt the store billed
    cut = list((tmp_path / "results/demo/sites").rglob("*.attempts/*.unrecorded.*"))
    assert cut and not list((tmp_path / "results/demo/sites").rglob("*.live")), cut
    again = rows[rows["attempts"] == 2]
    assert len(again) == len(cut) == 1, rows[["direction", "layout", "attempts"]]
    assert again.iloc[0]["bytes_moved_all_attempts"] > again.iloc[0]["bytes_moved"]


def test_secret_never_written_anywhere(tmp_path, demo_config):
    """The demo's campaign (two sites, every strategy) against a real S3 endpoint: every
    check of a whole campaign holds (tests/infra/e2e.py); an rclone flag from the
    environment applies to every copy and each row names it; the store holds the copies'
    objects and the manifest, and cleanup removes the bulk data from it and from scratch and
    keeps every result. No secret is written anywhere: not the store's, nor other backends'
    from the environment, nor a wrong one.

    First, with a wrong secret, the campaign stops in its preflight before any data is made,
    naming the remote and what to check, once per site (this was a campaign of its own,
    test_wrong_key_stops_in_preflight_before_any_data; s55); the same campaign then runs
    with the right one."""
    secret = "Zq9-distinctive-SECRET-4711"
    # Other backends' credentials in the environment, sensitive by rclone's metadata but not
    # by their names (rclone applies none of them to an S3 remote): they reach the records'
    # rclone_env column and the front page only as <set>.
    others = {
        "RCLONE_B2_KEY": "Zq9-b2-key-4712",
        "RCLONE_AZUREBLOB_KEY": "Zq9-azureblob-key-4713",
        "RCLONE_SWIFT_KEY": "Zq9-swift-key-4714",
        "RCLONE_SFTP_KEY_PEM": "Zq9-sftp-key-pem-4715",
        "RCLONE_CONFIG_X_KEY": "Zq9-config-x-key-4716",
    }
    cfg_d = _small(demo_config, size="7MiB")  # 2 MiB chunks: the last one 1 MiB
    cfg_d.update(remote="s3t:", repeats=1)
    cfg = write_config(tmp_path, cfg_d)
    store = tmp_path / "s3root/cloudbench/demo"
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", key="cbkey4711", secret=secret) as s3:
        env = {**s3.client_env("S3T"), **others, "RCLONE_USE_MMAP": "true"}
        _wrong_key_stops_in_preflight_before_any_data(tmp_path, cfg, env)
        # Without the figures and the report (``--report``): both are drawn from the tables
        # and pages scanned below (the report package reads no environment), the figures are
        # PNG pixels, and the report embeds every result base64-encoded, where a byte scan
        # would not find a secret anyway (6-9 CPU-seconds for nothing the test could see).
        run = snakemake(tmp_path, cfg, env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        df = check_campaign(tmp_path, cfg_d)
        assert df["rclone_env"].str.contains("RCLONE_USE_MMAP=true").all(), df["rclone_env"]
        objects = store / "data/chunked-2MiB/rclone-1xauto/r1/objects/demo-001.bin"
        assert sorted(p.name for p in objects.iterdir()) == [
            f"demo-001.bin.000{i}" for i in range(4)
        ]
        assert (objects / "demo-001.bin.0003").stat().st_size == 2**20
        assert (store / "manifest.json").exists()

        # cleanup removes the bulk data from the remote and scratch, and keeps every result
        clean = snakemake(tmp_path, cfg, "cleanup", env=env)
        assert clean.returncode == 0, clean.stderr[-2000:]
        assert not (store / "data").exists()
        assert (store / "manifest.json").exists()
        assert (store / "results/tursa/run.json").exists()
        assert (tmp_path / "results/demo/transfers.tsv").exists()
    for value in (secret, WRONG_SECRET, *others.values()):
        for said in (run, clean):
            assert value not in said.stdout + said.stderr
        leaks = [p for p in tmp_path.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]
        assert leaks == [], value


WRONG_SECRET = "wrong-secret-x"


def _wrong_key_stops_in_preflight_before_any_data(workdir: Path, cfg: Path, env: dict) -> None:
    """A run of the campaign with a wrong secret for its remote: it stops in the preflight,
    before any data is made, saying which remote and what to check, and never the secret."""
    run = snakemake(workdir, cfg, env=env | {"RCLONE_CONFIG_S3T_SECRET_ACCESS_KEY": WRONG_SECRET})
    assert run.returncode != 0
    log = (workdir / "results/demo/sites/tursa/logs/preflight.log").read_text()
    assert "remote main (s3t:cloudbench/demo): cannot write a test object" in log
    assert (
        "access denied (HTTP 403): check the credentials of remote 's3t' (rclone's config "
        "for 's3t:' or the RCLONE_CONFIG_S3T_* variables)"
    ) in log
    assert WRONG_SECRET not in log
    assert not list((workdir / "scratch").rglob("*.bin"))  # nothing was generated
    # on the terminal: the problem once, in one line, at the end beside what to do; the
    # site's preflight checked the gate's remote, so the gate itself never ran
    said = [ln for ln in run.stderr.splitlines() if ln.startswith("cloudbench: preflight at")]
    assert sorted(said) == [
        f"cloudbench: preflight at site {site}: remote main (s3t:cloudbench/demo): cannot "
        "write a test object: access denied (HTTP 403): check the credentials of remote 's3t' "
        "(rclone's config for 's3t:' or the RCLONE_CONFIG_S3T_* variables)"
        for site in ("tesseract", "tursa")
    ]
    assert "Error in rule preflight_gate" not in run.stderr
    assert WRONG_SECRET not in run.stderr
