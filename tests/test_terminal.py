"""The terminal after a failure or Ctrl-C: one line per job that did not finish and the
run's summary line, never a raw client log (its path, yes).

Before, Ctrl-C during an upload printed 54 lines after it (the local profile, a 16 MiB upload
at 2 MiB/s stopped 3 s in): Snakemake's report of the job (its whole shell command, with the
spec's JSON, twice) and, with ``show-failed-logs``, the transfer's ``-vv`` client log in
full, 30 JSON lines after one second, thousands for an hour-long copy.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from snakemake_interface_logger_plugins.common import LogEvent

from cloudbench.site import terminal
from tests.infra.s3 import serve_s3
from tests.infra.workflow import (
    BIN,
    default_sigint,
    snakemake_command,
    snakemake_env,
    write_config,
)

# rclone reads flags from RCLONE_* variables: a dead server fails fast
FAST_FAIL = {"RCLONE_RETRIES": "1", "RCLONE_LOW_LEVEL_RETRIES": "1", "RCLONE_CONTIMEOUT": "2s"}
JOB_LOG = "results/c/sites/edi/logs/upload/main/plain/rclone-1xauto/r1.log"
CLIENT_LOG = "results/c/sites/edi/client-logs/upload/main/plain/rclone-1xauto/r1.log"


# --- the filter, on a logger of its own ----------------------------------------------------


def _terminal(tmp_path: Path) -> tuple[logging.Logger, io.StringIO, io.StringIO]:
    """A logger with a terminal handler named as Snakemake names its own, and a file
    handler: what each of them shows."""
    logger = logging.getLogger(f"cloudbench-test-{tmp_path.name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    shown, kept = io.StringIO(), io.StringIO()
    for name, stream in (("DefaultStreamHandler", shown), ("DefaultLogFileHandler", kept)):
        handler = logging.StreamHandler(stream)
        handler.name = name
        logger.addHandler(handler)
    assert terminal.install(logger) is None
    assert terminal.install(logger) is None  # twice (a Snakefile parsed again): one filter
    assert len(logger.handlers[0].filters) == 1
    return logger, shown, kept


def _job_error(logs: list[str], **extra) -> dict:
    return {
        "event": LogEvent.JOB_ERROR, "rule_name": "upload", "rule_msg": None, "jobid": 3,
        "log": logs, "shellcmd": "cloudbench upload --spec '{\"campaign\": \"c\"}'",
        **extra,
    }  # fmt: skip


@pytest.mark.unit
def test_a_failed_job_is_one_line_with_its_last_word_and_its_logs_paths(tmp_path):
    job_log, client_log = tmp_path / "r1.log", tmp_path / "r1.client.log"
    job_log.write_text("upload plain r1: 4.1 MB of 16.8 MB (25%)\ncloudbench upload: interrupted\n")
    client_log.write_text('{"time": "x", "level": "info", "stats": {"bytes": 1}}\n' * 3000)
    logger, shown, kept = _terminal(tmp_path)
    logger.error(
        "RuleException:\nCalledProcessError in file x.smk, line 66:\nCommand '...' returned 130",
        extra={"event": LogEvent.ERROR},
    )
    logger.error("Error in rule upload", extra=_job_error([str(job_log), str(client_log)]))
    logger.info("cloudbench: stopped with 0 of 1 measurements recorded")
    lines = shown.getvalue().splitlines()
    assert lines == [
        f"failed: rule upload: cloudbench upload: interrupted (log: {job_log}, {client_log})",
        "cloudbench: stopped with 0 of 1 measurements recorded",
    ]
    assert "CalledProcessError" in kept.getvalue()  # the log file keeps every record


@pytest.mark.unit
def test_a_job_killed_by_a_signal_says_so(tmp_path):
    """A job killed outright ends its log on a progress line: its one line says what ended
    it, from Snakemake's report of the failed command (the shell killed, or its command)."""
    job_log = tmp_path / "r1.log"
    job_log.write_text("s3cmd-1x1: 2 min 10 s elapsed (this client reports no progress)\n")
    logger, shown, _ = _terminal(tmp_path)
    for exc in (
        "Command 'set -euo pipefail; cloudbench upload ...' died with <Signals.SIGKILL: 9>.",
        "Command 'set -euo pipefail; cloudbench upload ...' returned non-zero exit status 137.",
        "Command 'set -euo pipefail; cloudbench upload ...' returned non-zero exit status 1.",
    ):
        logger.error(
            f"RuleException:\nCalledProcessError in file x.smk, line 66:\n{exc}",
            extra={"event": LogEvent.ERROR},
        )
        logger.error("Error in rule upload", extra=_job_error([str(job_log)]))
    logger.error("Error in rule upload", extra=_job_error([str(job_log)]))  # no report before
    said = "s3cmd-1x1: 2 min 10 s elapsed (this client reports no progress)"
    assert shown.getvalue().splitlines() == [
        f"failed: rule upload: killed by SIGKILL: {said} (log: {job_log})",
        f"failed: rule upload: killed by SIGKILL (exit status 137): {said} (log: {job_log})",
        f"failed: rule upload: {said} (log: {job_log})",
        f"failed: rule upload: {said} (log: {job_log})",
    ]
    assert terminal.killed_by("returned non-zero exit status 200") is None  # no such signal
    assert terminal.killed_by("returned non-zero exit status 130") is None  # Ctrl-C: said


@pytest.mark.unit
def test_a_group_failure_is_one_line_and_other_errors_pass(tmp_path):
    """A one-allocation group (every transfer in one batch job) failed: one line for the
    group with its batch log, none for each of its jobs (Snakemake lists them all); an
    error that is not a failed shell command passes as Snakemake wrote it."""
    slurm_log = tmp_path / "group.log"
    slurm_log.write_text("slurmstepd: error: *** JOB 7 CANCELLED DUE TO TIME LIMIT ***\n")
    logger, shown, _ = _terminal(tmp_path)
    jobs = [_job_error([JOB_LOG, CLIENT_LOG], indent=True) for _ in range(3)]
    logger.error(
        "Error in group transfers",
        extra={"event": LogEvent.GROUP_ERROR, "aux_logs": [str(slurm_log)], "job_error_info": jobs},
    )
    for job in jobs:
        logger.error("Error in rule upload", extra=job)
    logger.error("MissingInputException: x", extra={"event": LogEvent.ERROR})
    assert shown.getvalue().splitlines() == [
        "failed: group of 3 jobs (upload): slurmstepd: error: *** JOB 7 CANCELLED DUE TO TIME "
        f"LIMIT *** (log: {slurm_log})",
        "MissingInputException: x",
    ]


@pytest.mark.unit
def test_a_last_word_is_clipped_and_never_json(tmp_path):
    log = tmp_path / "job.log"
    assert terminal.last_word(log) is None  # no log yet
    log.write_text("x" * 1000 + "\n" + '{"level": "debug"}\n')
    said = terminal.last_word(log)
    assert said is not None and len(said) == terminal.LAST_WORD_CHARS and said.endswith("...")
    # cloudbench status: the headline, not the last of the measurements listed under it
    log.write_text("cloudbench status: 2 measurement(s) not ok:\n  failed: a\n  failed: b\n")
    assert terminal.last_word(log) == "cloudbench status: 2 measurement(s) not ok:"
    log.write_text("  failed: a\n" * 1000)  # the headline out of reach: a detail, at worst
    assert terminal.last_word(log) == "failed: a"


# --- the real workflow --------------------------------------------------------------------


def _campaign(tmp_path: Path, *flags: str) -> Path:
    return write_config(
        tmp_path,
        {
            "campaign": "c",
            "remote": "s3t:",
            "bucket": "bench",
            "dataset": {"files": 1, "size": "16MiB"},
            "strategies": ["plain"],
            "repeats": 1,
            "rclone": {"flags": ["--bwlimit", "2M", *flags]},  # 8 s: Ctrl-C lands mid-copy
            "sites": {"edi": {"upload": True, "download": False, "scratch": "scratch"}},
        },
    )


class _Run:
    """Snakemake with the local profile, as typed in a terminal (its own process group,
    SIGINT as the terminal sends it); its output read line by line as it comes."""

    def __init__(self, workdir: Path, cfg: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            snakemake_command(workdir, cfg, profile="local"), cwd=workdir,
            env=snakemake_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True, preexec_fn=default_sigint,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
            raise
        self._reader.join(timeout=30)
        return code


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _copying(workdir: Path, stats: int = 1, least_bytes: int = 0) -> bool:
    """An upload under way: its client log (second name while it runs) has ``stats`` stats
    lines and ``least_bytes`` bytes."""
    live = workdir / (CLIENT_LOG + ".live")
    try:
        text = live.read_text()
    except FileNotFoundError:
        return False
    return text.count('"stats"') >= stats and len(text) >= least_bytes


@pytest.mark.full
@pytest.mark.slow
def test_ctrl_c_during_an_upload_prints_a_few_lines_and_no_json(tmp_path):
    """The issue's acceptance test: Ctrl-C a few stats lines into an upload (a real S3
    server, an rclone bandwidth cap): at most 15 lines after it, no JSON; the upload is one
    line naming its logs, and the run's summary line is there."""
    cfg = _campaign(tmp_path)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        run = _Run(tmp_path, cfg, s3.client_env("S3T"))
        # a few stats lines into the copy: a client log long enough to show if printed
        _wait_for(
            lambda: _copying(tmp_path, stats=2, least_bytes=2000) or run.proc.poll() is not None,
            300,
            "the upload",
        )
        assert run.proc.poll() is None, "\n".join(run.lines[-30:])
        before = len(run.lines)
        os.killpg(run.proc.pid, signal.SIGINT)
        assert run.wait(120) != 0
    after = run.lines[before:]
    assert len(after) <= 15, "\n".join(after)
    assert not [ln for ln in after if "{" in ln], "\n".join(after)
    assert not [ln for ln in after if ln.startswith("Logfile ")], "\n".join(after)
    failed = [ln for ln in after if ln.startswith("failed: rule upload")]
    assert len(failed) == 1, "\n".join(after)
    assert "interrupted" in failed[0] and JOB_LOG in failed[0] and CLIENT_LOG in failed[0]
    assert sum(ln.startswith("cloudbench: stopped with 0 of 1 measurements") for ln in after) == 1
    assert (tmp_path / CLIENT_LOG).stat().st_size > 2000  # there was a log to print


@pytest.mark.full
@pytest.mark.slow
def test_a_failed_transfer_prints_one_line_per_failed_job(tmp_path):
    """The store dies mid-upload: the upload is recorded failed (its job ends well), and the
    jobs that needed the store after it fail; each of them is one line with its own last
    word, and nothing of a client log reaches the terminal."""
    # the campaign's flags come after the bookkeeping calls' own patience (3 low-level
    # retries, rclone.HELPER_PATIENCE), which the RCLONE_* variables cannot shorten: with
    # it, publish waited 50 s for the dead store
    cfg = _campaign(tmp_path, "--low-level-retries", "1", "--contimeout", "2s")
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        run = _Run(tmp_path, cfg, {**s3.client_env("S3T"), **FAST_FAIL})
        _wait_for(lambda: _copying(tmp_path) or run.proc.poll() is not None, 300, "the upload")
        s3.kill()
        assert run.wait(600) != 0
    out = "\n".join(run.lines)
    failed = [ln for ln in run.lines if ln.startswith("failed: ")]
    assert failed and all(" (log: " in ln for ln in failed), out[-3000:]
    # the status job's line: its headline (or, when its log is longer than the tail read,
    # the last measurement it lists), never more than one line
    status = [ln for ln in failed if ln.startswith("failed: rule status: ")]
    assert len(status) == 1 and ("not ok" in status[0] or "edi upload" in status[0]), failed
    assert '"stats"' not in out and "Logfile " not in out and "Error in rule" not in out
    assert "cloudbench: stopped with 1 of 1 measurements recorded (0 ok, 1 failed)" in out
