"""The terminal of a run (cloudbench's logger plugin, cloudbench.site.terminal): the
campaign's header, one line per measurement with its rate, a progress line now and then,
one line per job that did not finish naming its cause, the summary; never Snakemake's job
banners nor a raw client log (its path, yes).

Before, a 72-measurement campaign printed 2,915 lines of job banners and no rate, and Ctrl-C
during an upload printed 54 lines after it (the local profile, a 16 MiB upload at 2 MiB/s
stopped 3 s in): Snakemake's report of the job (its whole shell command, with the spec's
JSON, twice) and, with ``show-failed-logs``, the transfer's ``-vv`` client log in full.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from snakemake_interface_logger_plugins.common import LogEvent

from cloudbench.site import terminal
from tests.infra.s3 import serve_s3
from tests.infra.terminal import measurement_lines
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


# --- the terminal, fed records as Snakemake logs them ----------------------------------------


def _record(msg: str | None, level: int = logging.INFO, **extra: Any) -> logging.LogRecord:
    return logging.makeLogRecord({"msg": msg, "levelno": level, **extra})


def _shown(t: terminal.CampaignTerminal, *records: logging.LogRecord) -> list[str]:
    return [line for r in records for line in t.lines(r)]


def _job_error(logs: list[str], **extra) -> logging.LogRecord:
    fields = {
        "event": LogEvent.JOB_ERROR,
        "rule_name": "upload",
        "rule_msg": None,
        "jobid": 3,
        "log": logs,
        "shellcmd": 'cloudbench upload --spec \'{"campaign": "c"}\'',
    }
    return _record("Error in rule upload", logging.ERROR, **(fields | extra))  # fmt: skip


def _failed_command(exc: str) -> logging.LogRecord:
    return _record(
        f"RuleException:\nCalledProcessError in file x.smk, line 66:\n{exc}",
        logging.ERROR,
        event=LogEvent.ERROR,
    )


@pytest.mark.unit
def test_a_failed_job_is_one_line_with_its_last_word_and_its_logs_paths(tmp_path):
    job_log, client_log = tmp_path / "r1.log", tmp_path / "r1.client.log"
    job_log.write_text("upload plain r1: 4.1 MB of 16.8 MB (25%)\ncloudbench upload: interrupted\n")
    client_log.write_text('{"time": "x", "level": "info", "stats": {"bytes": 1}}\n' * 3000)
    t = terminal.CampaignTerminal()
    shown = _shown(
        t,
        _failed_command("Command '...' returned 130"),
        _job_error([str(job_log), str(client_log)]),
        _record("Removing output files of failed job upload since they might be corrupted:"),
        _record("Shutting down, this might take some time."),
    )
    assert shown == [
        f"failed: rule upload: cloudbench upload: interrupted (log: {job_log}, {client_log})"
    ]


@pytest.mark.unit
def test_a_job_killed_by_a_signal_says_so(tmp_path):
    """A job killed outright ends its log on a progress line: its one line says what ended
    it, from Snakemake's report of the failed command (the shell killed, or its command)."""
    job_log = tmp_path / "r1.log"
    job_log.write_text("s3cmd-1x1: 2 min 10 s elapsed (this client reports no progress)\n")
    t = terminal.CampaignTerminal()
    records = []
    for exc in (
        "Command 'set -euo pipefail; cloudbench upload ...' died with <Signals.SIGKILL: 9>.",
        "Command 'set -euo pipefail; cloudbench upload ...' returned non-zero exit status 137.",
        "Command 'set -euo pipefail; cloudbench upload ...' returned non-zero exit status 1.",
    ):
        records += [_failed_command(exc), _job_error([str(job_log)], jobid=len(records))]
    other_log = tmp_path / "r2.log"
    other_log.write_text("upload plain r2: 1.0 MB of 16.8 MB (6%)\n")
    # the same words again, from another job
    records += [_failed_command(exc), _job_error([str(job_log)], jobid=len(records))]
    records.append(_job_error([str(other_log)], jobid=len(records)))  # no report before
    said = "s3cmd-1x1: 2 min 10 s elapsed (this client reports no progress)"
    assert _shown(t, *records) == [
        f"failed: rule upload: killed by SIGKILL: {said} (log: {job_log})",
        f"failed: rule upload: killed by SIGKILL (exit status 137): {said} (log: {job_log})",
        f"failed: rule upload: {said} (log: {job_log})",
        f"failed: rule upload: upload plain r2: 1.0 MB of 16.8 MB (6%) (log: {other_log})",
    ]
    assert t.same_again == 1
    assert terminal.killed_by("returned non-zero exit status 200") is None  # no such signal
    assert terminal.killed_by("returned non-zero exit status 130") is None  # Ctrl-C: said


@pytest.mark.unit
def test_a_group_failure_is_one_line_and_errors_keep_their_text(tmp_path):
    """A one-allocation group (every transfer in one batch job) failed: one line for the
    group with its batch log, none for each of its jobs (Snakemake lists them all); an
    error that is not a failed shell command, and the messages a user acts on, pass as
    Snakemake wrote them; the scheduler's stopping message once."""
    slurm_log = tmp_path / "group.log"
    slurm_log.write_text("slurmstepd: error: *** JOB 7 CANCELLED DUE TO TIME LIMIT ***\n")
    t = terminal.CampaignTerminal()
    jobs = [_job_error([JOB_LOG, CLIENT_LOG], indent=True) for _ in range(3)]
    group = _record(
        "Error in group transfers", logging.ERROR, event=LogEvent.GROUP_ERROR,
        aux_logs=[str(slurm_log)], job_error_info=[j.__dict__ for j in jobs],
    )  # fmt: skip
    stopping = "Will exit after finishing currently running jobs (scheduler)."
    locked = "Error: Directory cannot be locked. Please make sure that no other Snakemake..."
    shown = _shown(
        t, group, *jobs,
        _record("MissingInputException in rule x:\nMissing input files", logging.ERROR,
                event=LogEvent.ERROR),
        _record(locked, logging.ERROR),
        _record(locked, logging.ERROR),  # said once
        *[_record(stopping) for _ in range(6)],
        _record("Building DAG of jobs..."), _record("Select jobs to execute..."),
        _record("Nothing to be done (all requested files are present and up to date)."),
        _record("Creating report..."), _record("Adding transfers.tsv (1.2 MB)."),
        _record("Report created."), _record("Unlocked working directory."),
    )  # fmt: skip
    assert shown == [
        "failed: group of 3 jobs (upload): slurmstepd: error: *** JOB 7 CANCELLED DUE TO TIME "
        f"LIMIT *** (log: {slurm_log})",
        "MissingInputException in rule x:\nMissing input files",
        locked,
        stopping,
        "Nothing to be done (all requested files are present and up to date).",
        "Report created.",
        "Unlocked working directory.",
    ]
    assert t.closing() == []  # no job ran: no summary


@pytest.mark.unit
def test_a_last_word_is_clipped_never_json_and_carries_its_cause(tmp_path):
    log = tmp_path / "job.log"
    assert terminal.last_word(log) is None  # no log yet
    log.write_text("x" * 1000 + "\n" + '{"level": "debug"}\n')
    said = terminal.last_word(log)
    assert said is not None and len(said) <= terminal.LAST_WORD_CHARS and said.endswith("...")
    words = " ".join(f"word{k}" for k in range(100))  # cut at a word's end, never inside one
    short = terminal.clipped(words, 50)
    assert len(short) <= 50 and short.endswith(" ...")
    assert all(w.startswith("word") and w[4:].isdigit() for w in short[:-4].split())
    assert terminal.clipped("short", 50) == "short"
    # cloudbench status: the headline with the first thing it lists, and how many more
    log.write_text("cloudbench status: 2 measurement(s) not ok:\n  failed: a\n  failed: b\n")
    assert terminal.last_word(log) == (
        "cloudbench status: 2 measurement(s) not ok: failed: a (and 1 more)"
    )
    # a preflight's cause on its line, not 85 lines below (issue #48)
    log.write_text(
        "cloudbench preflight: preflight failed at site up:\n"
        "  rclone cannot list s3t:bench: connection refused\n"
    )
    assert terminal.last_word(log) == (
        "cloudbench preflight: preflight failed at site up: rclone cannot list s3t:bench: "
        "connection refused"
    )
    log.write_text("  failed: a\n" * 1000)  # the headline out of reach: a detail, at worst
    assert terminal.last_word(log) == "failed: a"


# --- a campaign's lines -------------------------------------------------------------------------

RESULTS = "results/c"


def _transfer(workdir: Path, direction: str, layout: str, repeat: int, **fields: Any) -> Path:
    """A record as a transfer job writes it (the fields the record reader requires)."""
    rec = {
        "campaign": "c", "site": "edi", "remote": "main", "direction": direction,
        "tool": "rclone", "strategy": layout.split("-")[0], "layout": layout,
        "setting": "rclone-1xauto", "repeat": repeat, "chunk_bytes": 0, "clients": 1,
        "status": "ok", "bytes_requested": 16_777_216, "bytes_moved": 16_777_216,
        "seconds": 2.0, "mb_per_s": 8.389, **fields,
    }  # fmt: skip
    path = (
        workdir
        / f"{RESULTS}/sites/edi/transfers/{direction}/main/{layout}/rclone-1xauto/r{repeat}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return path


def _job(jobid: int, rule: str, output: list[Path], repeat: int = 1, layout: str = "plain"):
    wildcards = {"site": "edi", "remote": "main", "layout": layout,
                 "setting": "rclone-1xauto", "repeat": str(repeat)}  # fmt: skip
    return _record(
        f" Rule: {rule}, Jobid: {jobid}", event=LogEvent.JOB_INFO, jobid=jobid, rule_name=rule,
        wildcards=wildcards, output=[str(p) for p in output], log=[f"{RESULTS}/logs/x.log"],
    )  # fmt: skip


def _done(jobid: int) -> logging.LogRecord:
    return _record(f"Finished jobid: {jobid}", event=LogEvent.JOB_FINISHED, job_id=jobid)


@pytest.mark.unit
def test_a_campaign_is_a_header_a_line_per_measurement_progress_and_a_summary(
    tmp_path, monkeypatch
):
    """Ten measurements: the header counts what the run will make and what is recorded; each
    upload is one line with its record's rate; a download's line waits for its verify step
    and says what it found; a progress line after every tenth (two at least), with the time
    left at the pace so far; Snakemake's banners never; the summary says where the tables
    are."""
    monkeypatch.chdir(tmp_path)
    now = [100.0]
    t = terminal.CampaignTerminal(clock=lambda: now[0], started_wall=time.time() - 5)
    spec = Path(f"{RESULTS}/runs/edi.json")  # written by the run's onstart (paths.run_spec)
    spec.parent.mkdir(parents=True)
    spec.write_text("{}")
    _transfer(tmp_path, "upload", "plain", 9)  # recorded by an earlier run
    # failed in an earlier run: measured again, so among those to make, not recorded already
    _transfer(tmp_path, "upload", "plain", 8, status="failed", mb_per_s=None)
    shown = _shown(
        t,
        _record("Job stats: ...", event=LogEvent.RUN_INFO,
                stats={"upload": 5, "download": 5, "verify": 5, "total": 16}),
        _record("Select jobs to execute..."),
    )  # fmt: skip
    assert shown == []
    lines = []
    jobid = 0
    for repeat in range(1, 6):
        up = Path(f"{RESULTS}/sites/edi/transfers/upload/main/plain/rclone-1xauto/r{repeat}.json")
        jobid += 1
        lines += _shown(t, _job(jobid, "upload", [up], repeat))
        _transfer(tmp_path, "upload", "plain", repeat, mb_per_s=8.0 + repeat / 10)
        now[0] += 2.0
        lines += _shown(t, _done(jobid))
        down = _transfer(tmp_path, "download", "plain", repeat, mb_per_s=9.0 + repeat / 10)
        verify = tmp_path / f"{RESULTS}/sites/edi/verify/main/plain/rclone-1xauto/r{repeat}.json"
        verify.parent.mkdir(parents=True, exist_ok=True)
        found = {"status": "corrupt", "problems": ["edi-001.bin: XXH128 a read, b expected"]}
        verify.write_text(json.dumps(found if repeat == 5 else {"status": "ok"}))
        lines += _shown(t, _job(jobid + 1, "download", [down], repeat))
        now[0] += 2.0
        lines += _shown(t, _done(jobid + 1))
        lines += _shown(t, _job(jobid + 2, "verify", [verify], repeat), _done(jobid + 2))
        jobid += 2
    assert t.closing()[-1] == (  # no tables yet: not named
        "cloudbench: 10 measurements made in this run (9 ok, 1 not ok)"
    )
    Path(f"{RESULTS}/transfers.tsv").write_text("")  # aggregate ran
    lines += t.closing()
    assert lines[0] == (
        "cloudbench: campaign c at edi: 10 measurements to make (5 uploads, 5 downloads), "
        "1 recorded already"
    )
    measured = [ln for ln in lines if ln.startswith("edi: ")]
    assert len(measured) == 10 and len(lines) == 1 + 10 + 4 + 1
    assert (
        measured[0] == "edi: upload main plain r1 rclone-1xauto: 16.78 MB in 2.0 s = 8.1 MB/s, ok"
    )
    assert measured[1] == (
        "edi: download main plain r1 rclone-1xauto: 16.78 MB in 2.0 s = 9.1 MB/s, ok, verified"
    )
    assert measured[-1].endswith(", ok, CORRUPT (edi-001.bin: XXH128 a read, b expected)")
    progress = [ln for ln in lines if " of 10 measurements" in ln]
    assert progress[0] == "cloudbench: 2 of 10 measurements, 4s so far, about 16s left"
    # after 8 of 10 at 2 s each (16 s since the first started): 2 left, about 4 s
    assert progress[3] == "cloudbench: 8 of 10 measurements, 16s so far, about 4s left"
    assert lines[-1] == (
        "cloudbench: 10 measurements made in this run (9 ok, 1 not ok); tables in results/c; "
        "the report: the same command with --report results/c/report.html"
    )


@pytest.mark.unit
def test_a_job_reported_failed_twice_is_one_line_and_one_failure(tmp_path):
    """Snakemake 9.20 reports a batch job's failure twice, the executor's words first
    (SLURM-job '6' failed ...) and then the scheduler's with no cause; one line, counted
    once (s53old, the suite at 9.20.0)."""
    t = terminal.CampaignTerminal()
    logs = ["results/demo/sites/tursa/logs/upload/main/plain/rclone-1xauto/r1.log"]
    first = _job_error(logs, rule_msg="SLURM-job '6' failed, SLURM status is: 'CANCELLED'")
    shown = _shown(t, first, _job_error(logs))
    assert len(shown) == 1 and "SLURM-job '6' failed" in shown[0], shown
    assert t.failed_jobs == 1
    # another job's failure is its own line, and counted
    assert (
        _shown(t, _job_error(logs, jobid=4)) == [f"failed: rule upload (log: {logs[0]})"]
        and t.failed_jobs == 2
    )


@pytest.mark.unit
def test_a_run_jobs_traceback_and_snakemakes_closing_words_are_not_shown():
    """A run: job that raises (store_open refusing a dead store) is its own failed line; its
    RuleException and traceback, "Exiting because a job execution failed" and "WorkflowError:
    At least one job did not complete successfully" say nothing more (usercheck53's store-down
    run); a workflow's own error still shows."""
    t = terminal.CampaignTerminal()
    quiet = [
        _record('RuleException:\nStoreDown in file "transfer.smk", line 60:\ncloudbench '
                "store_open: not started\n  File \"breaker.py\", line 325, in store_open",
                logging.ERROR, event=LogEvent.ERROR),
        _record("Exiting because a job execution failed. Look below for error messages",
                logging.ERROR),
        _record("WorkflowError:\nAt least one job did not complete successfully.",
                logging.ERROR, event=LogEvent.ERROR),
    ]  # fmt: skip
    assert _shown(t, *quiet) == []
    own = _record("WorkflowError:\nMissingInputException: results/x.json", logging.ERROR)
    assert _shown(t, own) == ["WorkflowError:\nMissingInputException: results/x.json"]


@pytest.mark.unit
def test_a_record_a_stopped_run_left_is_said_kept_not_made_again(tmp_path, monkeypatch):
    """The ledger publishes a measurement a stopped run finished: its line says it was kept,
    with when it was measured, and the summary counts it apart (usercheck53: a rerun said
    '1 measurement made in this run' for a record of the interrupted run)."""
    monkeypatch.chdir(tmp_path)
    t = terminal.CampaignTerminal(started_wall=time.time())
    up = _transfer(tmp_path, "upload", "plain", 1, started_epoch=time.time() - 600,
                   started_utc="2026-11-28T16:31:42Z")  # fmt: skip
    lines = _shown(t, _job(1, "upload", [up]), _done(1))[1:]  # after the header
    assert lines[0].endswith(
        "ok; kept: measured at 2026-11-28T16:31:42Z by a run that stopped, not again"
    ), lines
    assert "1 of them kept from a run that stopped (not measured again)" in t.closing()[-1]
    fresh = _transfer(tmp_path, "upload", "plain", 2, started_epoch=time.time())
    assert "kept" not in _shown(t, _job(2, "upload", [fresh]), _done(2))[0]


@pytest.mark.unit
def test_a_dead_stores_account_is_given_once_then_named_as_above():
    """The breaker's whole account of a dead store on the first line that gives it; later
    lines keep the store and since when (usercheck53: 8 lines of up to 488 characters)."""
    t = terminal.CampaignTerminal()
    told = ("store 'main' (objstore:) has not answered since 2026-11-28T16:15:41Z (2 failure(s)"
            " in a row; the last, dial tcp 127.0.0.1:18953: connect: connection refused, met by"
            " download plain r1 rclone-2x2)")  # fmt: skip
    first = t._brief(f"csd3: download ...: failed (not measured: {told}; rerun once it is back)")
    assert told in first
    again = t._brief(f"failed: rule download: not started: {told}; not tried again this run")
    assert again == (
        "failed: rule download: not started: store 'main' (objstore:) has not answered since "
        "2026-11-28T16:15:41Z (as above); not tried again this run"
    )
    other = told.replace("'main' (objstore:)", "'cold' (glacier:)")
    assert other in t._brief(f"failed: {other}")  # another store: told in full once too
    # its cause's middle elided, its count grown since: the same store, as above
    elided = told.replace("2 failure", "3 failure").replace(" connect: connection refused,", " ...")
    assert t._brief(f"up: failed (not measured: {elided}; not tried again)") == (
        "up: failed (not measured: store 'main' (objstore:) has not answered since "
        "2026-11-28T16:15:41Z (as above); not tried again)"
    )
    # a line clipped inside the account: as above too
    clipped = terminal.clipped(f"up: failed ({told.replace('2 failure', '3 failure')})", 150)
    assert clipped.endswith(" ...") and "met by" not in clipped
    assert t._brief(clipped) == (
        "up: failed (store 'main' (objstore:) has not answered since 2026-11-28T16:15:41Z "
        "(as above)"
    )


@pytest.mark.unit
def test_the_header_names_the_sites_a_run_acts_as_and_none_for_a_run_of_no_site(tmp_path):
    """The launcher's aggregation runs as no site: its run spec is ``runs/.json``, and the
    header read "campaign c at .json" (usercheck56)."""
    runs = tmp_path / "c" / "runs"
    runs.mkdir(parents=True)
    (runs / "tursa+bnl.json").write_text("{}")
    assert terminal.run_sites(str(tmp_path / "c"), 0) == ["bnl", "tursa"]
    later = time.time() + 5
    (runs / ".json").write_text("{}")
    os.utime(runs / ".json", (later, later))
    assert terminal.run_sites(str(tmp_path / "c"), later - 1) == []
    assert (
        terminal.header_line("c", [], {}, None) == "cloudbench: campaign c: 0 measurements to make"
    )


@pytest.mark.unit
def test_the_pure_lines():
    assert terminal.time_left(3, 12, 30.0) == 90.0
    assert terminal.progress_line(3, 12, 1, 30.0) == (
        "cloudbench: 3 of 12 measurements (1 not ok), 30s so far, about 1m30s left"
    )
    # a tenth at a time, never after the last (the summary says it)
    assert [d for d in range(1, 37) if terminal.progress_due(d, 36)] == [4, 8, 12, 16, 20, 24,
                                                                         28, 32]  # fmt: skip
    assert [d for d in range(1, 5) if terminal.progress_due(d, 4)] == [2]  # every 2, at least
    assert terminal.verification(None) == "verification not known"
    assert terminal.verification({"status": "ok"}) == "verified"
    assert terminal.header_line(None, [], {"upload": 1}, None) == (
        "cloudbench: this campaign: 1 measurement to make (1 upload)"
    )
    assert terminal.results_of(["/scratch/x.bin", "results/c/sites/edi/preflight.json"]) == (
        "results/c"
    )
    assert terminal.results_of(["results/c/transfers.tsv", "results/c/logs/aggregate.log"]) == (
        "results/c"
    )
    assert terminal.results_of(["/scratch/x.bin"]) is None


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
    # the campaign's terminal: its header, the upload's line saying how it failed and why,
    # every failed job's cause on its own line, about N + 20 lines for N measurements
    assert "cloudbench: campaign c at edi: 1 measurement to make (1 upload)" in out, out
    (upload,) = measurement_lines(out)
    assert upload["direction"] == "upload" and upload["said"].startswith("failed after ")
    assert upload["rate"] is None and "(" in upload["said"], upload  # the client's error
    causes = [ln.split(": ", 2)[2].partition(" (log: ")[0] for ln in failed]
    assert all(c.strip() for c in causes), failed
    assert len(run.lines) <= 1 + 20, out


@pytest.mark.unit
def test_a_download_whose_verify_never_ends_well_says_so(tmp_path, monkeypatch):
    """A download's line waits for its verify step: a verify job that failed says it after
    its own failure line, one the run never reached is said when the run ends."""
    monkeypatch.chdir(tmp_path)
    t = terminal.CampaignTerminal()
    downs = [_transfer(tmp_path, "download", "plain", r) for r in (1, 2)]
    lines = _shown(
        t,
        _record("", event=LogEvent.RUN_INFO, stats={"download": 2, "total": 5}),
        _job(1, "download", [downs[0]], 1), _done(1),
        _job(2, "download", [downs[1]], 2), _done(2),
        _job(3, "verify", [Path("v1.json")], 1),
        _record("Error in rule verify", logging.ERROR, event=LogEvent.JOB_ERROR,
                rule_name="verify", rule_msg=None, jobid=3, log=[]),
    )  # fmt: skip
    assert lines[1:] == [
        "failed: rule verify",
        "edi: download main plain r1 rclone-1xauto: 16.78 MB in 2.0 s = 8.4 MB/s, ok, "
        "verification not known",
    ]
    assert t.closing() == [
        "edi: download main plain r2 rclone-1xauto: 16.78 MB in 2.0 s = 8.4 MB/s, ok, "
        "verification not known",
        "cloudbench: 2 measurements made in this run (all ok); 1 job failed",
    ]


@pytest.mark.unit
def test_an_open_breaker_is_said_once(tmp_path):
    """A store that stops answering: every measurement of it left is refused by a job of
    its own (its store_open job), each saying the same; the terminal says it once and counts
    the others in its summary."""
    t = terminal.CampaignTerminal()
    refused = "cloudbench store_open: not started: store 'main' (s3t:) has not answered since"
    logs = []
    for r in range(1, 5):
        log = tmp_path / f"store_open-r{r}.log"
        log.write_text(refused + "\n")
        logs.append(log)
    shown = _shown(
        t,
        _job(1, "store_open", [Path("x.store-open")]),
        *[
            _record("Error in rule store_open", logging.ERROR, event=LogEvent.JOB_ERROR,
                    rule_name="store_open", rule_msg=None, jobid=r, log=[str(log)])
            for r, log in enumerate(logs, 1)
        ],
    )  # fmt: skip
    assert shown[1:] == [f"failed: rule store_open: {refused} (log: {logs[0]})"]
    assert t.closing()[-1] == (
        "cloudbench: 0 measurements made in this run; 4 jobs failed (3 of them said the same "
        "as one above)"
    )


@pytest.mark.unit
def test_the_summary_counts_a_measurement_never_started_apart_from_those_made():
    """A user's run after the store died: 'stopped with 13 of 24 measurements recorded (7 ok,
    6 failed)' above '15 measurements made in this run (7 ok, 8 not ok)': two jobs a breaker
    refused recorded nothing. Made is recorded, as the stopped run's line counts it."""
    from cloudbench.site.terminal import summary_line

    line = summary_line(13, 6, 3, None, None, same_again=1, not_started=2)
    assert line.startswith("cloudbench: 13 measurements made in this run (7 ok, 6 not ok)")
    assert "; 2 ended before measuring (no record)" in line
    assert "not started" not in summary_line(3, 0, 0, None, None)


@pytest.mark.unit
def test_a_line_of_the_runs_end_is_one_write():
    """A stopped run's hooks speak while Snakemake's logger writes from another thread: each
    line goes out with its newline in one write, so no other line lands inside it (print's
    two writes gave "...then removes itfailed: rule upload: ..." on a Ctrl-C, s57f)."""
    from cloudbench.site import lifecycle

    class Writes(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def write(self, s: str) -> int:
            self.calls.append(s)
            return super().write(s)

    out = Writes()
    lifecycle.say("cloudbench: scratch: kept x", out)
    lifecycle.say("cloudbench: stopped", out)
    assert out.calls == ["cloudbench: scratch: kept x\n", "cloudbench: stopped\n"]
