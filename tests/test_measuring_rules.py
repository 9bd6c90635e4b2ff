"""The rules behind the numbers, tested directly: reruns, concurrency, regenerated data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cloudbench import steps
from cloudbench.campaign.identity import MeasurementId
from cloudbench.campaign.paths import live_log
from cloudbench.data.checksums import hash_stream
from cloudbench.measure import rclone as rc
from cloudbench.measure.attempts import keep_attempt
from cloudbench.records import write_json
from cloudbench.report.aggregate import expected_steps
from cloudbench.site.jobenv import retry_token
from tests.conftest import ROOT


def _attempt(record, status, when):
    keep_attempt(record, {"status": status, "started_utc": when})


@pytest.mark.unit
def test_retry_token_changes_once_per_failure_and_never_after_a_success(tmp_path):
    record = tmp_path / "r1.json"
    assert retry_token(str(record)) == ""  # never measured
    _attempt(record, "failed", "2026-01-01T00:00:00Z")
    after_failure = retry_token(str(record))
    assert after_failure == "failed:1"  # differs from what the failed run stored: remeasure
    _attempt(record, "ok", "2026-01-01T01:00:00Z")
    assert retry_token(str(record)) == after_failure  # success: stable, nothing remeasured
    assert retry_token(str(record)) == after_failure  # ... on every later run
    _attempt(record, "failed", "2026-01-01T02:00:00Z")
    assert retry_token(str(record)) == "failed:2"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("strategy", "objects", "object_bytes", "backend", "direction", "expect"),
    [
        # plain: min(files, T) objects in flight, one stream each, S3 parts pinned to 1
        ("plain", 2, 2**30, "s3", "upload", (32, 2, 1, 2, 1)),
        ("chunked", 600, 64 * 2**20, "s3", "upload", (32, 32, 1, 32, 1)),
        # multithread: one object, T streams, parts limit the streams
        ("multithread", 10, 2**30, "s3", "upload", (1, 1, 16, 16, 32)),
        ("multithread", 10, 2**30, "s3", "download", (1, 1, 16, 16, None)),
        ("multithread", 10, 2**30, "local", "upload", (1, 1, 16, 16, None)),
    ],
)
def test_connections_are_counted_from_what_rclone_does(
    strategy, objects, object_bytes, backend, direction, expect
):
    conc = rc.concurrency(
        strategy, 32, objects=objects, object_bytes=object_bytes, cutoff=256 * 2**20,
        part_bytes=64 * 2**20, backend=backend, direction=direction,
    )  # fmt: skip
    got = (
        conc.transfers,
        conc.objects_in_flight,
        conc.streams_per_object,
        conc.connections,
        conc.backend_concurrency,
    )
    assert got == expect


@pytest.mark.unit
def test_s3_uploads_pin_part_concurrency_and_respect_the_5mib_minimum():
    conc = rc.concurrency(
        "plain", 4, objects=4, object_bytes=2**30, cutoff=2**30, part_bytes=2**20,
        backend="s3", direction="upload",
    )  # fmt: skip
    assert conc.flags() == ["--s3-upload-concurrency", "1", "--s3-chunk-size", str(5 * 2**20)]


@pytest.mark.unit
@pytest.mark.parametrize(("backend", "verbosity"), [("s3", ["-vv"]), ("local", ["-v"])])
def test_a_timed_copy_asks_for_one_log_level(tmp_path, backend, verbosity):
    """An S3 copy logs at DEBUG (every response and retried request), any other at INFO;
    the command line once carried both ``-v`` and ``-vv``."""
    conc = rc.concurrency(
        "plain", 4, objects=4, object_bytes=2**20, cutoff=2**30, part_bytes=2**20,
        backend=backend,
    )  # fmt: skip
    cmd = rc.copy_command(
        "rclone", "a", "b", conc=conc, log_file=tmp_path / "r1.log", multi_thread_cutoff=2**30
    )
    assert [a for a in cmd if a.startswith("-v")] == verbosity
    assert cmd[cmd.index("--stats-log-level") + 1] == "INFO" and "--use-json-log" in cmd


@pytest.mark.unit
@pytest.mark.parametrize(
    ("remote", "expected"),
    [("/data/remote", "local"), ("scratch/x", "local"), (":s3,provider=Ceph:b", "s3")],
)
def test_backend_type_without_asking_rclone(remote, expected):
    assert rc.backend_type("/nonexistent/rclone", remote) == expected


@pytest.mark.unit
def test_a_remote_defined_in_the_environment_is_typed_there_not_by_an_rclone_process():
    """RCLONE_CONFIG_<NAME>_TYPE names the backend (as rclone reads it, before its config
    file): no `rclone listremotes` for it (this binary does not exist, and a unit test that
    started a process would fail)."""
    env = {"RCLONE_CONFIG_UCS3_TYPE": "s3", "RCLONE_CONFIG_MY_S3_TYPE": "b2"}
    assert rc.backend_type("/nonexistent/rclone", "ucs3:b/p", env=env) == "s3"
    assert rc.backend_type("/nonexistent/rclone", "UcS3:b", env=env) == "s3"
    assert rc.backend_type("/nonexistent/rclone", "my-s3:b", env=env) == "b2"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("flag", "secret"),
    [("--s3-secret-access-key", True), ("--b2-key=x", True), ("--drive-token", True),
     ("--sftp-pass", True), ("--bwlimit", False), ("--s3-no-check-bucket", False),
     ("--checksum", False), ("--header=Authorization: Bearer x", True)],
)  # fmt: skip
def test_credential_flags(flag, secret):
    from cloudbench.campaign.secrets import credential_flag

    assert (credential_flag(flag) is not None) == secret


@pytest.mark.unit
def test_regenerated_data_is_identical_and_checked_against_its_checksum(tmp_path):
    ds = steps.DatasetSpec("c", "s", 3 * 2**20 + 7, "seed")
    assert steps.ensure_file(ds, tmp_path, "f.bin") is True
    digest, _, _ = hash_stream([tmp_path / "f.bin"])
    assert steps.ensure_file(ds, tmp_path, "f.bin", digest) is False  # present: kept
    (tmp_path / "f.bin").unlink()
    assert steps.ensure_file(ds, tmp_path, "f.bin", digest) is True  # same bytes again
    (tmp_path / "f.bin").unlink()
    with pytest.raises(steps.StepError, match="regenerated file has XXH128"):
        steps.ensure_file(ds, tmp_path, "f.bin", "0" * 32)
    assert not (tmp_path / "f.bin").exists()  # a wrong file is never left to be uploaded
    assert steps.ensure_chunks(ds, tmp_path, tmp_path / "chunks", "f.bin", 2**20, digest)
    parts = sorted((tmp_path / "chunks/1MiB/f.bin").iterdir())
    assert [p.name for p in parts] == [f"f.bin.{i:04d}" for i in range(4)]
    assert not steps.ensure_chunks(ds, tmp_path, tmp_path / "chunks", "f.bin", 2**20, digest)


@pytest.mark.unit
def test_steps_table_holds_only_this_campaigns_steps(tmp_path):
    from cloudbench.report.aggregate import steps_table

    plan = {
        "upload_site": "a",
        "files": ["f1"],
        "chunks": ["4MiB"],
        "measurements": [
            {"site": "b", "direction": "download", "remote": "m", "layout": "chunked-4MiB",
             "setting": "rclone-1xauto", "repeat": 1},
        ],
    }  # fmt: skip
    for p in expected_steps(tmp_path, plan):
        write_json(p, {"step": p.parent.name, "seconds": 1.0, "bytes": 5})
    stale = tmp_path / "sites/a/steps/chunk/2MiB/f1.json"  # a chunk size since removed
    write_json(stale, {"step": "chunk", "seconds": 9.0})
    old_repeat = tmp_path / "sites/b/verify/m/chunked-4MiB/rclone-1xauto/r2.json"
    write_json(old_repeat, {"step": "verify", "seconds": 9.0})
    table = steps_table(tmp_path, plan)
    assert len(table) == len(expected_steps(tmp_path, plan)) == 5
    assert 9.0 not in set(table["seconds"])
    assert json.loads(stale.read_text())  # kept on disk, only left out of the table


@pytest.mark.unit
def test_stopped_summary_says_what_is_recorded_and_what_to_do(tmp_path):
    from cloudbench.site.status import stopped_summary

    paths = [tmp_path / f"r{i}.json" for i in range(4)]
    write_json(paths[0], {"status": "ok"})
    write_json(paths[1], {"status": "failed"})
    assert stopped_summary(paths) == (
        "cloudbench: stopped with 2 of 4 measurements recorded (1 ok, 1 failed), 2 not "
        "measured yet; rerun the same command to measure the 1 failed and the 2 not measured "
        "(the ok ones are kept)"
    )
    # a user read "0 not measured yet; ... measure the 4 left": it says which 4
    write_json(paths[2], {"status": "failed"})
    write_json(paths[3], {"status": "ok"})
    assert stopped_summary(paths).endswith("measure the 2 failed (the ok ones are kept)")
    # with none ok there is nothing to keep (a user's failed preflight said it all the same)
    assert stopped_summary(paths[1:3]).endswith("; rerun the same command to measure the 2 failed")


@pytest.mark.unit
def test_a_corrupt_download_is_counted_corrupt_and_the_line_says_how_to_measure_it(tmp_path):
    """A user saw "(8 ok, 0 failed) ... every measurement is recorded" after verify had
    found a download corrupt: the transfer's record is ok, its verify record is not."""
    from cloudbench.site.status import stopped_summary

    paths = [tmp_path / f"r{i}.json" for i in range(3)]
    for p in paths:
        write_json(p, {"status": "ok"})
    checks = {paths[1]: tmp_path / "v1.json", paths[2]: tmp_path / "v2.json"}
    write_json(checks[paths[1]], {"status": "corrupt"})
    write_json(checks[paths[2]], {"status": "ok"})
    line = stopped_summary(paths, (), checks)
    assert "(2 ok, 0 failed, 1 corrupt)" in line
    assert line.endswith(
        "the 1 corrupt is kept as found, and every run ends non-zero until it is measured again: "
        "to measure "
        f"again, add --forcerun {paths[1]} to the same command"
    )
    assert "corrupt" not in stopped_summary(paths)  # without the checks: as before
    assert "rerun the same command to finish the report" in stopped_summary(paths)
    # a user reran "the same command to finish the report" and it stopped again, as it
    # must while a corrupt download is kept: the line no longer says so
    assert "finish the report" not in line and "every measurement is recorded; the 1" in line


@pytest.mark.unit
def test_status_names_the_forcerun_that_measures_a_corrupt_download_again(tmp_path):
    from cloudbench.campaign import paths as cbpaths
    from cloudbench.site.status import describe

    row = {
        "site": "vega",
        "direction": "download",
        "remote": "main",
        "layout": "chunked-2MiB",
        "setting": "rclone-1xauto",
        "repeat": "1",
        "status": "corrupt",
        "error": "XXH128 a != b",
    }
    text = describe([row, {**row, "status": "failed", "repeat": "2"}], tmp_path)
    record = cbpaths.transfer_record(tmp_path, MeasurementId.of(row))
    assert f"add --forcerun {record} to the same command" in text
    assert text.count("--forcerun") == 1  # a failed one is measured again by a rerun
    assert text.startswith("2 measurement(s) not ok (a rerun measures the 1 failed again):")
    # a user read "a rerun measures failed ones again" above a corrupt one that it does not
    assert describe([row], tmp_path).startswith("1 measurement(s) not ok:\n")


@pytest.mark.unit
def test_a_failed_preflight_asks_for_a_fix_not_a_rerun(tmp_path):
    from cloudbench.site.status import stopped_summary

    log = tmp_path / "logs/preflight.log"
    line = stopped_summary([tmp_path / "r1.json"], [log])
    assert f"the preflight failed (see {log}): fix what it says, then rerun" in line


@pytest.mark.unit
def test_rclone_flags_from_the_environment_are_named_in_the_record_secrets_are_not():
    from cloudbench.campaign.secrets import rclone_env_flags

    env = {
        "RCLONE_BWLIMIT": "8M",
        "RCLONE_S3_CHUNK_SIZE": "16M",
        "RCLONE_CONFIG_STORE_SECRET_ACCESS_KEY": "Walrus5Penguin8",  # a remote's definition
        "RCLONE_CONFIG": "/home/u/rclone.conf",
        "RCLONE_PASSWORD_COMMAND": "pass show rclone-Walrus5",  # a credential: named only
        "PATH": "/usr/bin",
    }
    flags = rclone_env_flags(env)
    assert flags == "RCLONE_BWLIMIT=8M RCLONE_PASSWORD_COMMAND=<set> RCLONE_S3_CHUNK_SIZE=16M"
    assert "Walrus5" not in flags and rclone_env_flags({"HOME": "/root"}) == ""


@pytest.mark.quick
def test_a_job_whose_shell_is_killed_ends_with_it(tmp_path):
    """kill -9 of a job's shell (the pid ps shows for a rule) must end the job's Python too:
    an orphan would go on measuring beside the next transfer and write its record after
    Snakemake removed the failed job's outputs (seen in a real run before this guard)."""
    import signal
    import subprocess
    import sys

    pidfile = tmp_path / "child.pid"
    # the job's Python says it is ready, then waits for its input to close (the test's end),
    # so that an orphan cannot outlive the test
    code = (
        "import os, sys; from cloudbench.site.jobenv import end_with_job_shell; "
        f"end_with_job_shell(); open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
        "sys.stdin.read()"
    )
    shell = subprocess.Popen(
        ["bash", "-c", f'{sys.executable} -c "{code}"; true'], stdin=subprocess.PIPE
    )
    try:
        _poll(lambda: pidfile.exists() and pidfile.read_text(), "the job's Python to start")
        child = int(pidfile.read_text())
        shell.send_signal(signal.SIGKILL)
        shell.wait(timeout=60)

        def ended() -> bool:
            try:
                stat = Path(f"/proc/{child}/stat").read_text()
            except FileNotFoundError:
                return True
            return stat.rsplit(")", 1)[1].split()[0] == "Z"  # ended, not yet reaped by init

        _poll(ended, "the job's Python to end with its shell (it outlived it)")
    finally:
        shell.stdin.close()


def _poll(event, what: str, deadline_s: float = 120) -> None:
    """Wait for ``event()`` to be true; the deadline is one only a hang reaches."""
    import time

    deadline = time.monotonic() + deadline_s
    while not event():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.unit
def test_every_cloudbench_command_ends_with_its_job_shell(monkeypatch):
    from cloudbench import cli
    from cloudbench.site import jobenv

    calls = []
    monkeypatch.setattr(jobenv, "end_with_job_shell", lambda: calls.append(1))
    monkeypatch.setattr(cli, "cmd_status", lambda a: None)
    assert cli.main(["status", "--transfers", "x.tsv", "--out", "y"]) == 0
    assert calls == [1]


@pytest.mark.unit
def test_a_log_left_by_a_killed_attempt_is_kept_not_overwritten(tmp_path):
    from cloudbench.measure.attempts import keep_attempt, set_aside_unrecorded

    record = tmp_path / "r2.json"
    log = tmp_path / "r2.jsonl"
    log.write_text('{"level":"info","msg":"killed mid-way"}\n')
    set_aside_unrecorded(record, [log, tmp_path / "r2.client-1.jsonl"])  # one absent: fine
    kept = list((tmp_path / "r2.attempts").glob("*.unrecorded.r2.jsonl"))
    assert not log.exists() and len(kept) == 1
    assert kept[0].read_text() == '{"level":"info","msg":"killed mid-way"}\n'
    # a log that keep_attempt already kept (a finished attempt, rerun on request) just goes
    log.write_text('{"msg":"finished"}\n')
    keep_attempt(record, {"started_utc": "2026-11-23T10:00:00Z"}, log)
    set_aside_unrecorded(record, [log])
    assert not log.exists()
    assert len(list((tmp_path / "r2.attempts").glob("*.unrecorded.*"))) == 1
    # what a rerun really finds: Snakemake deleted the declared log before running the job
    # again, and only the log's second name, written to while rclone ran, is left
    log.write_text('{"level":"info","msg":"cut by SIGKILL"}\n')
    os.link(log, live_log(log))
    log.unlink()
    set_aside_unrecorded(record, [log])
    kept = sorted((tmp_path / "r2.attempts").glob("*.unrecorded.r2.jsonl"))
    assert len(kept) == 2 and "cut by SIGKILL" in kept[-1].read_text() + kept[0].read_text()
    assert not live_log(log).exists()
    # killed before its client said anything (s3cmd writes a line once an object is moved):
    # the empty log with its second name still counts as an attempt; an empty one without
    # it is no attempt's
    log.write_text("")
    os.link(log, live_log(log))
    log.unlink()
    set_aside_unrecorded(record, [log])
    log.write_text("")
    set_aside_unrecorded(record, [log])
    kept = sorted((tmp_path / "r2.attempts").glob("*.unrecorded.r2.jsonl"))
    assert len(kept) == 3 and sum(p.stat().st_size == 0 for p in kept) == 1
    log.write_text("{}\n")  # an attempt that got its record leaves no second name behind
    os.link(log, live_log(log))
    keep_attempt(record, {"started_utc": "2026-11-23T11:00:00Z"}, log)
    assert not live_log(log).exists()


@pytest.mark.unit
def test_every_attempt_counts_in_the_bytes_moved_that_the_store_bills(tmp_path):
    """A download failed, then one was killed mid-way (rclone's real log of a killed S3
    copy), then one succeeded: three attempts, and the bytes of all three."""
    import shutil

    from cloudbench.measure.attempts import set_aside_unrecorded
    from cloudbench.report.aggregate import attempt_totals

    record, log = tmp_path / "r1.json", tmp_path / "r1.jsonl"
    assert attempt_totals(record, {"bytes_moved": 7}) == {
        "attempts": 1, "bytes_moved_all_attempts": 7,  # a record from before attempts were kept
    }  # fmt: skip
    keep_attempt(record, {"started_utc": "2026-11-23T10:00:00Z", "bytes_moved": 1000})
    shutil.copyfile(ROOT / "tests/data/rclone-logs/s3_killed.jsonl", log)
    set_aside_unrecorded(record, [log])
    ok = {"started_utc": "2026-11-23T10:05:00Z", "bytes_moved": 64 * 2**20}
    keep_attempt(record, ok)
    killed_bytes = 22372352  # the killed log's last stats line
    assert attempt_totals(record, ok) == {
        "attempts": 3, "bytes_moved_all_attempts": 1000 + killed_bytes + 64 * 2**20,
    }  # fmt: skip
    # an upload that failed before moving anything reports no bytes: it counts 0, and the
    # sum stays a number (it was blank)
    other = tmp_path / "r2.json"
    keep_attempt(other, {"started_utc": "2026-11-23T11:00:00Z", "status": "failed"})
    done = {"started_utc": "2026-11-23T11:05:00Z", "status": "ok", "bytes_moved": 5}
    keep_attempt(other, done)
    assert attempt_totals(other, done) == {"attempts": 2, "bytes_moved_all_attempts": 5}


@pytest.mark.unit
def test_a_transfer_that_finished_while_snakemake_stopped_is_told_apart(tmp_path):
    """The ledger (cloudbench.measure.ledger): a measurement recorded ok whose record
    Snakemake never touched (it never registered the job) is published again as it was; one
    Snakemake registered (it touches every output of a job it registers), failed, measured
    under another spec, or whose upload was measured again since, is measured again."""
    from cloudbench.measure import ledger

    record, series = tmp_path / "r1.json", tmp_path / "r1.series.tsv"
    log = tmp_path / "r1.log"

    def finish(status: str, started: str) -> None:
        """What a transfer job leaves: its outputs, the record, the attempt, the seal."""
        series.write_text(f"elapsed_s\tbytes\tmb_per_s\n1.0\t{started[-2:]}\t1.0\n")
        log.write_text(f'{{"msg": "{started}"}}\n')
        row = {"status": status, "started_utc": started}
        write_json(record, row)
        keep_attempt(record, row, log)
        ledger.seal(record, [series], "spec")

    finish("ok", "2026-11-28T10:00:00.000001Z")
    written = (record.read_text(), series.read_text(), log.read_text())
    stamp = ledger.unregistered(record, 1, "spec")
    assert stamp is not None
    assert ledger.unregistered(record, 1, "another spec") is None  # the campaign changed
    assert ledger.unregistered(record, 2, "spec") is None  # an output not kept
    newer_upload = tmp_path / "up.json"
    newer_upload.write_text("{}")
    assert ledger.unregistered(record, 1, "spec", newer_upload) is None
    # Snakemake deletes the outputs before it runs the job again; the job puts them back
    for p in (record, series, log):
        p.unlink()
    row = ledger.republish(record, stamp, [series], log)
    assert row["started_utc"] == "2026-11-28T10:00:00.000001Z"
    assert (record.read_text(), series.read_text(), log.read_text()) == written
    assert ledger.unregistered(record, 1, "spec") == stamp  # not yet registered either
    # registered this time: Snakemake touched the record, and no later run takes it as kept
    os.utime(record)
    assert ledger.unregistered(record, 1, "spec") is None

    # a failed measurement is measured again, registered or not
    finish("failed", "2026-11-28T11:00:00.000001Z")
    assert ledger.unregistered(record, 1, "spec") is None
    # a torn seal is never trusted
    finish("ok", "2026-11-28T12:00:00.000001Z")
    stamp = ledger.unregistered(record, 1, "spec")
    assert stamp is not None
    seal = record.with_suffix(".attempts") / f"{stamp}{ledger.SEAL_SUFFIX}"
    left = seal.stat().st_mtime_ns
    with open(seal, "r+") as fh:
        fh.truncate(5)
    os.utime(seal, ns=(left, left))
    assert ledger.unregistered(record, 1, "spec") is None
    # what the attempts' readers count is unchanged: one attempt per recorded run
    assert len(list(record.with_suffix(".attempts").glob("*.json"))) == 3


@pytest.mark.unit
def test_an_rclone_stopped_by_a_signal_says_which():
    """A user's Ctrl-C'd download was recorded as "rclone failed" (rclone logs nothing then)."""
    from cloudbench.measure.clients.rclone import exit_reason

    assert exit_reason(130) == "stopped by SIGINT (exit 130)"
    assert exit_reason(-9) == "stopped by SIGKILL (exit -9)"
    assert exit_reason(1) == "failed (exit 1)" and exit_reason(255) == "failed (exit 255)"


@pytest.mark.unit
def test_an_rclone_stopped_by_sigterm_is_recorded_as_stopped_not_by_its_stderr(tmp_path):
    """A SIGTERM'd upload was recorded with rclone's stderr as its error: a DEBUG line about
    its config, which is no reason. A dead store is named, not "is a file not a directory"."""
    import shutil

    from cloudbench.measure.clients.base import CopyJob, Plan, Run
    from cloudbench.measure.clients.rclone import CLIENT

    log = tmp_path / "copy.log"
    job = CopyJob(
        "upload", "plain", str(tmp_path), "s3t:bench/dead", ("f1.bin",), 10, 10, 2,
        "s3t:bench", log, tmp_path,
    )  # fmt: skip
    plan = Plan(["rclone"], "1.75.2", {}, "log")
    stderr = 'DEBUG : Setting --config "/x/rclone.conf" from environment variable\n'
    log.write_text("")
    for code in (143, -15):
        out = CLIENT.outcome(job, plan, Run(code, 1.0, 0.0, stderr, ()))
        assert out.error == f"rclone stopped by SIGTERM (exit {code})"
    shutil.copyfile(ROOT / "tests/data/rclone-logs/s3_dead_store.jsonl", log)
    out = CLIENT.outcome(job, plan, Run(1, 12.0, 0.0, stderr, ()))
    assert out.error.startswith("dial tcp 127.0.0.1:")
    assert out.error.endswith(
        'connection refused (rclone said: Failed to create file system for "s3t:bench/dead": '
        "is a file not a directory)"
    )
    # rclone's verdict on a corrupted download names no object; the record's error does
    shutil.copyfile(ROOT / "tests/data/rclone-logs/s3_corrupted_download.jsonl", log)
    out = CLIENT.outcome(job, plan, Run(1, 3.0, 0.0, stderr, ()))
    assert out.error.startswith("Failed to copy: corrupted on transfer: md5 hashes differ")
    assert out.error.endswith(" (on f2.bin)")
    assert out.corrupt
    assert not CLIENT.outcome(job, plan, Run(1, 3.0, 0.0, stderr, (), timed_out=True)).corrupt
    shutil.copyfile(ROOT / "tests/data/rclone-logs/s3_dead_store.jsonl", log)
    assert not CLIENT.outcome(job, plan, Run(1, 12.0, 0.0, stderr, ())).corrupt


@pytest.mark.unit
def test_a_copy_is_corrupt_only_where_it_failed_for_that():
    from cloudbench.measure.group import aggregate
    from cloudbench.records import copy_status

    assert copy_status(None) == copy_status(None, corrupt=True) == "ok"
    assert copy_status("timed out") == "failed"
    assert copy_status("md5 hashes differ", corrupt=True) == "corrupt"
    client = {"client": 0, "status": "ok", "started_epoch": 1.0, "seconds": 1.0}
    bad = {**client, "client": 1, "status": "corrupt", "error": "md5 hashes differ"}
    assert aggregate([client, bad], 2, 1.0)["status"] == "corrupt"
    assert aggregate([client, {**bad, "status": "failed"}], 2, 1.0)["status"] == "failed"
    assert aggregate([client, None], 2, 1.0)["status"] == "failed"
    # retries are summed where clients count them (rclone), empty where none does (s5cmd)
    assert aggregate([client, bad], 2, 1.0)["retries"] is None
    assert aggregate([{**client, "retries": 1}, {**bad, "retries": 0}], 2, 1.0)["retries"] == 1


@pytest.mark.unit
def test_a_transfer_rclone_found_corrupt_is_kept_as_found(tmp_path):
    """Counted corrupt by the last line, with its --forcerun, and no input that would make
    a rerun measure it again (a failed one has its newest attempt as one)."""
    from cloudbench.campaign.paths import attempts_dir
    from cloudbench.site.jobenv import failed_attempt, retry_token
    from cloudbench.site.status import stopped_summary

    paths = [tmp_path / f"r{i}.json" for i in range(3)]
    for p, status in zip(paths, ("ok", "corrupt", "failed"), strict=True):
        write_json(p, {"status": status})
        attempts_dir(str(p)).mkdir()
        write_json(attempts_dir(str(p)) / "a.json", {"status": status})
    line = stopped_summary(paths)
    assert "(1 ok, 1 failed, 1 corrupt)" in line
    assert f"add --forcerun {paths[1]} to the same command" in line
    assert failed_attempt(str(paths[1])) == [] and retry_token(str(paths[1])) == ""
    assert retry_token(str(paths[2])) == "failed:1"
    assert failed_attempt(str(paths[2])) == [str(attempts_dir(str(paths[2])) / "a.json")]


@pytest.mark.quick
def test_bookkeeping_against_a_dead_store_names_the_refused_connection(monkeypatch):
    """A new user's publish and multipart clean-up against a dead store said only rclone's
    "is a file not a directory"; the reason is asked for once more, at -vv."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    for key, value in {
        "TYPE": "s3", "PROVIDER": "Other", "ENDPOINT": f"http://127.0.0.1:{port}",
        "ACCESS_KEY_ID": "k", "SECRET_ACCESS_KEY": "s",
    }.items():  # fmt: skip
        monkeypatch.setenv(f"RCLONE_CONFIG_DEADSTORE_{key}", value)
    fast = ("--low-level-retries", "1", "--contimeout", "2s")
    binary = rc.find_rclone()
    res = rc.run_helper(rc.helper_command(binary, "purge", "deadstore:b/c/data", extra_flags=fast))
    assert res.returncode != 0
    assert res.stderr.startswith(f"dial tcp 127.0.0.1:{port}: connect: connection refused")
    assert "(rclone said: " in res.stderr and "is a file not a directory" in res.stderr
    assert rc.store_unreachable(binary, "deadstore:b", fast).endswith("connection refused")


_WAITING_JOB = """
import argparse, sys, tempfile
from cloudbench import cli
parse = argparse.ArgumentParser.parse_args
def wait(args):
    with tempfile.TemporaryDirectory(dir=sys.argv[1]) as tmp:
        print(tmp, flush=True)
        sys.stdin.read()  # until SIGTERM (or the test's end closes it)
def parse_args(self, *a, **k):
    ns = parse(self, *a, **k)
    ns.func = wait
    return ns
argparse.ArgumentParser.parse_args = parse_args
sys.exit(cli.main(["stage", "--checksums", "c.json", "--out", "o.json"]))
"""


@pytest.mark.quick
def test_a_job_stopped_by_sigterm_ends_as_ctrl_c_ends_it(tmp_path):
    """A new user's SIGTERM to an upload left its temporary folder in /dev/shm (the default
    action ends Python where it stands). SIGTERM (scancel, qdel, a walltime) now unwinds the
    job as Ctrl-C does: its temporary files and client go with it, and it says why."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _WAITING_JOB, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        folder = Path(proc.stdout.readline().strip())  # the job is under way
        assert folder.is_dir()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143
    assert "cloudbench stage: stopped by SIGTERM" in err and "Traceback" not in err
    assert not folder.exists()


_KILLED_JOB = """
import sys
from pathlib import Path
from cloudbench import records
records.small_files_dir = lambda: sys.argv[1]
with records.small_files("copy") as tmp:
    (tmp / "objects").write_text("f1.bin\\n")
    print(tmp, flush=True)
    sys.stdin.read()  # alive until killed, or until the test's end closes its input
"""


@pytest.mark.quick
def test_the_small_files_of_a_killed_job_go_with_the_next_job(tmp_path, monkeypatch):
    """A user found a SIGKILLed job's object list in /dev/shm after a dozen later runs. The
    next job on the host removes a folder whose job is gone, and no folder of a live one."""
    import signal
    import subprocess
    import sys

    from cloudbench import records

    def start():
        p = subprocess.Popen(
            [sys.executable, "-c", _KILLED_JOB, str(tmp_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        return p, Path(p.stdout.readline().strip())

    (killed, gone), (alive, kept) = start(), start()
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=120)
        assert gone.is_dir() and kept.is_dir()  # nothing of the killed job's removed it
        stranger = tmp_path / "cloudbench-copy-1-1-x"  # another pid namespace's: not read here
        stranger.mkdir()
        monkeypatch.setattr(records, "small_files_dir", lambda: str(tmp_path))
        with records.small_files("copy") as mine:
            assert mine.parent == tmp_path
            assert not gone.exists() and kept.is_dir() and stranger.is_dir()
        assert not mine.exists()
    finally:
        alive.kill()
        killed.kill()


@pytest.mark.quick
def test_help_names_every_command_a_person_types():
    import subprocess
    import sys

    from cloudbench.cli import PEOPLE_COMMANDS

    out = subprocess.run(
        [sys.executable, "-m", "cloudbench", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "series" in PEOPLE_COMMANDS  # a new user looked for it in --help and it was not there
    for command in (*PEOPLE_COMMANDS, "upload", "aggregate"):
        assert command in out, command


@pytest.mark.unit
def test_every_command_the_help_names_for_people_runs_its_own_help(capsys):
    """--help lists the people's commands from the table main dispatches by: each answers
    its own --help (a name listed but not dispatched would fall through to the steps'
    parser and fail)."""
    from cloudbench.cli import PEOPLE_COMMANDS, main

    for command in PEOPLE_COMMANDS:
        if command.endswith("-doc"):
            assert main([command]) == 0
            assert capsys.readouterr().out.startswith("#"), command
            continue
        with pytest.raises(SystemExit) as stop:
            main([command, "--help"])
        assert stop.value.code == 0, command
        assert "usage:" in capsys.readouterr().out, command


@pytest.mark.unit
def test_a_group_attempt_killed_before_its_clients_wrote_a_line_still_counts(tmp_path):
    """A new user SIGKILLed a 2-client s5cmd download 1.5 s in: its clients had written
    nothing, so nothing was set aside and attempts stayed short by one. The group's own log
    (its clients' names and start time, with a second name) is written before they start."""
    import json
    import os

    from cloudbench.campaign.paths import client_log, live_log
    from cloudbench.measure.attempts import set_aside_unrecorded
    from cloudbench.report.aggregate import attempt_totals

    record, log = tmp_path / "r1.json", tmp_path / "r1.jsonl"
    log.write_text(json.dumps({"time": "2026-11-24T09:28:18Z", "msg": "2 clients: ..."}) + "\n")
    os.link(log, live_log(log))
    for k in range(2):
        client_log(log, k).write_text("")  # the clients had printed nothing yet
    log.unlink()  # Snakemake deletes a job's declared log before running it again
    set_aside_unrecorded(record, [log, client_log(log, 0), client_log(log, 1)])
    done = {"started_utc": "2026-11-24T09:28:50Z", "status": "ok", "bytes_moved": 9}
    keep_attempt(record, done)
    assert attempt_totals(record, done) == {"attempts": 2, "bytes_moved_all_attempts": 9}


@pytest.mark.unit
def test_first_few_names_three_then_counts_the_rest():
    from cloudbench.records import first_few

    assert first_few(["a.0001"]) == "a.0001"
    assert first_few(list(range(5))) == "0, 1, 2 (and 2 more)"
    assert first_few(["r1.json", "r2.json", "r3.json"], sep=" ") == "r1.json r2.json r3.json"


@pytest.mark.unit
def test_an_iso_time_and_its_epoch_are_one_reading():
    from cloudbench.records import utc_now

    assert utc_now(1_764_000_000.25) == "2025-11-24T16:00:00.250000Z"
    assert utc_now().endswith("Z")


@pytest.mark.unit
def test_a_bookkeeping_call_collects_garbage_only_near_its_limit_unless_the_site_says():
    """rclone's bookkeeping calls run with Go's collector off up to a heap limit (most of a
    small call's CPU is collection while rclone starts); a site's own GOGC or GOMEMLIMIT is
    kept as it is, and the caller's environment is not changed."""
    env = {"PATH": "/bin"}
    assert rc.helper_env(env) == {"PATH": "/bin", "GOGC": "off", "GOMEMLIMIT": "256MiB"}
    assert env == {"PATH": "/bin"}
    assert rc.helper_env({"GOGC": "50"}) == {"GOGC": "50"}
    assert rc.helper_env({"GOMEMLIMIT": "1GiB"}) == {"GOMEMLIMIT": "1GiB"}
