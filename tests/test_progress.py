"""Progress a person can watch: lines in job logs, and ``cloudbench watch`` beside a run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cloudbench.campaign.identity import MeasurementId
from cloudbench.campaign.paths import transfer_log
from cloudbench.measure.progress import LogTail, human_bytes, progress_of, result_line
from tests.infra.workflow import BIN, ROOT, write_config

STATS = '{{"level":"info","msg":"x","stats":{{"bytes":{b},"totalBytes":{t},"elapsedTime":{e}}}}}'


@pytest.mark.unit
def test_log_tail_reads_only_complete_new_lines(tmp_path):
    log = tmp_path / "r1.jsonl"
    log.write_text(STATS.format(b=10, t=100, e=1.0) + "\n" + STATS.format(b=30, t=100, e=2.0)[:20])
    tail = LogTail(log)
    assert [s.bytes for s in tail.poll()] == [10]  # the half-written line waits
    with open(log, "a") as fh:
        fh.write(STATS.format(b=30, t=100, e=2.0)[20:] + "\n")
    assert [s.bytes for s in tail.poll()] == [30]
    assert tail.poll() == []


@pytest.mark.unit
def test_progress_rate_and_eta_from_the_recent_lines(tmp_path):
    log = tmp_path / "r1.jsonl"
    # 2 MB/s for the first 30 s, then 4 MB/s: the rate shown is the recent one
    lines = [STATS.format(b=int(2e6 * min(e, 30) + 4e6 * max(0, e - 30)), t=0, e=e)
             for e in range(1, 61)]  # fmt: skip
    log.write_text("\n".join(lines) + "\n")
    tail = LogTail(log)
    tail.poll()
    p = progress_of("upload plain r1", tail.samples, 300_000_000)
    assert p.mb_per_s == pytest.approx(4.0)
    assert p.fraction == pytest.approx(0.6)
    assert p.eta_s == pytest.approx(30.0)
    assert p.line() == (
        "upload plain r1: 180.00 MB of 300.00 MB (60%) at 4.0 MB/s, 1m00s elapsed, ETA 30s"
    )


@pytest.mark.unit
def test_result_line_is_one_readable_sentence():
    rec = {"bytes_requested": 4_080_218_931, "seconds": 41.2, "mb_per_s": 99.03, "status": "ok"}
    assert (
        result_line("upload chunked-64MiB r2", rec)
        == "upload chunked-64MiB r2: 4.08 GB in 41.2 s = 99.0 MB/s, ok"
    )
    assert human_bytes(512) == "512 B"
    fast = {"bytes_requested": 16_777_216, "seconds": 0.110273, "mb_per_s": 152.1, "status": "ok"}
    assert (
        result_line("upload plain r1", fast)
        == "upload plain r1: 16.78 MB in 0.11 s = 152.1 MB/s, ok"
    )
    failed = {
        "bytes_requested": 67_108_864, "bytes_moved": 0, "seconds": None, "status": "failed",
        "error": "cannot read s3:b/c/manifest.json: " + "x " * 200 + "exceeded maximum retries",
    }  # fmt: skip
    line = result_line("download chunked-8MiB r1", failed)
    # its head (what could not be read) and its tail (the tool's last word) both kept
    assert line.startswith(
        "download chunked-8MiB r1: failed, 0 B of 67.11 MB moved (cannot read s3:b/c/manifest"
    )
    assert line.endswith(" exceeded maximum retries)") and "in 0.0 s" not in line
    failed.update(seconds=3.14, bytes_moved=1_000_000)
    assert "failed after 3.1 s, 1.00 MB of 67.11 MB moved" in result_line("d", failed)


@pytest.mark.full
@pytest.mark.slow
def test_progress_in_the_job_log_and_cloudbench_watch_during_a_capped_transfer(tmp_path):
    """One upload capped at 2 MiB/s moves 16 MiB in ~8 s (at least: the cap only lets a busy
    machine take longer): with a 1 s interval its job log shows at least 5 progress lines (as
    a 1-minute transfer does at the default 10 s), and
    ``cloudbench watch`` run beside it sees the percentage advance."""
    cfg = write_config(
        tmp_path,
        {
            "campaign": "watched",
            "remote": "remote-dir",
            "dataset": {"files": 1, "size": "16MiB"},
            "strategies": ["plain"],
            "repeats": 1,
            "rclone": {"flags": ["--bwlimit", "2M"]},
            "sites": {"here": {"upload": True, "scratch": "scratch"}},
        },
    )
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "CLOUDBENCH_PROGRESS_SECONDS": "1",
    }
    run = subprocess.Popen(
        [str(BIN / "snakemake"), "--snakefile", str(ROOT / "workflow/Snakefile"),
         "--profile", str(ROOT / "profiles/local"), "--configfile", str(cfg)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        labels = {"site": "here", "remote": "main", "direction": "upload", "layout": "plain"}
        m = MeasurementId.of(labels | {"setting": "rclone-1xauto", "repeat": 1})
        rlog = tmp_path / transfer_log("results/watched", m)
        deadline = time.monotonic() + 120  # only a hang reaches it
        while not rlog.exists():  # the timed copy has begun
            assert time.monotonic() < deadline and run.poll() is None, "no copy began"
            time.sleep(0.1)
        watched = subprocess.run(
            [sys.executable, "-m", "cloudbench", "watch", "--configfile", str(cfg), "--plain",
             "--interval", "1", "--exit-when-idle", "4"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.wait(timeout=300) == 0
    finally:
        if run.poll() is None:
            run.kill()
    seen = [
        int(m.group(1)) for m in re.finditer(r"here upload plain r1: .* \((\d+)%\)", watched.stdout)
    ]
    assert len(set(seen)) >= 3, watched.stdout
    assert seen == sorted(seen)  # it advances, never back
    assert "no transfer running" in watched.stdout.splitlines()[-1]

    job_log = (
        tmp_path / "results/watched/sites/here/logs/upload/main/plain/rclone-1xauto/r1.log"
    ).read_text()
    progress = [ln for ln in job_log.splitlines() if re.search(r"\(\d+%\) at .* ETA", ln)]
    assert len(progress) >= 5, job_log
    record = json.loads(
        (
            tmp_path
            / "results/watched/sites/here/transfers/upload/main/plain/rclone-1xauto/r1.json"
        ).read_text()
    )
    last = job_log.strip().splitlines()[-1]
    assert last == f"upload plain r1: 16.78 MB in {record['seconds']:.1f} s = " + (
        f"{record['mb_per_s']:.1f} MB/s, ok"
    )
    assert Path(tmp_path / "remote-dir").exists()


@pytest.mark.unit
def test_a_transfer_without_a_stats_line_is_starting_not_zero_of_zero():
    from cloudbench.measure.progress import Progress

    p = Progress("upload plain r1", 0, 0, 0.0, 2.0)
    assert p.line() == "upload plain r1: starting, 2s elapsed, no stats yet"
    assert "0 B of 0 B" not in p.line()
    assert "0 B of 25.17 MB (0%)" in Progress("x", 0, 25_170_000, 0.0, 1.0).line()


@pytest.mark.unit
def test_a_long_error_keeps_its_head_and_its_tail_on_the_result_line():
    """A user read '(...s without progress: dial tcp ...': the cause, cloudbench's words at
    the head of the error, was clipped away; the head and the tool's last word both stay."""
    from cloudbench.records import clip_middle

    error = (
        "the store stopped answering: nothing moved for 60 s and the store did not answer "
        "(store_down.stall); " + "detail " * 80 + "last: dial tcp 127.0.0.1:18950: connect: "
        "connection refused"
    )
    said = clip_middle(error)
    assert len(said) <= 300 and " ... " in said
    assert said.startswith("the store stopped answering: nothing moved for 60 s")
    assert said.endswith("connect: connection refused")
    assert clip_middle("short  message\n") == "short message"
    failed = {"status": "failed", "bytes_requested": 10, "bytes_moved": 0, "seconds": 70.1}
    line = result_line("upload plain r2", failed | {"error": error})
    assert "(the store stopped answering" in line and line.endswith("connection refused)")
