#!/usr/bin/env python3
"""Report a PBS job's state to Snakemake (cluster-generic ``status-cmd``).

Calling convention (snakemake-executor-plugin-cluster-generic 1.0.9): the
plugin runs ``<status-cmd> '<jobid>'`` through a shell and expects exactly one
line ``running``, ``success`` or ``failed``.  A non-zero exit status aborts the
whole workflow ("Failed to obtain job status"), so this script *always* exits 0
and prints one word; problems are explained in ``logs/pbs/status.log``.

Decision order (why):

1. ``qstat -f ID``.  States Q/H/W/R/E/T/S (+ PBS Pro B/M/U) are ``running``.
   C/F/X are finished: ``Exit_status``/``exit_status`` 0 means ``success``,
   anything else ``failed``.
2. Finished without an exit status (Slurm's torque wrapper never prints one),
   or no longer known to qstat (rc 153 "Unknown Job Id", PBS Pro rc 35 "Job has
   finished"; PBS Pro forgets jobs unless ``-x``): use the exit code the
   wrapper made by ``pbs-submit.py`` wrote (``logs/pbs/jobs/<id>.json`` ->
   ``exit_file``).  Nothing recorded -> ``failed`` (killed by qdel, walltime,
   memory...), after a short grace period for shared-filesystem lag.
3. qstat errors (non-zero exit that is not "unknown job", timeout): retried
   ``RETRIES`` times with 1-2 s backoff, then the exit file is consulted and,
   failing that, ``failed`` is printed.

Array ids ``123[4]`` / ``123[]`` (optionally ``.server``) are matched against
the ``Job Id:`` records, ignoring the server suffix.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

LOG_DIR = Path("logs/pbs")  # relative to Snakemake's working directory
RUNNING_STATES = frozenset("QHWRETSBMU")
FINISHED_STATES = frozenset("CFX")
GONE_RETURN_CODES = frozenset({153, 35})
GONE_MESSAGE = re.compile(r"unknown job id|job has finished|does not exist|invalid job id", re.I)
QSTAT_TIMEOUT_S = 20.0
RETRIES = 3
BACKOFF_S = (1.0, 1.5, 2.0)
EXIT_FILE_GRACE_S = 3.0

_ID_RE = re.compile(r"^(?P<num>\d+)(?:\[(?P<idx>\d*)\])?(?:\.(?P<server>.*))?$")
_ATTR_RE = re.compile(r"^\s+(?P<key>[A-Za-z_][\w.]*)\s=\s?(?P<value>.*)$")


@dataclass(frozen=True)
class QstatVerdict:
    """What one qstat call says: running | finished | gone | error."""

    kind: str
    exit_status: int | None = None
    reason: str = ""


def job_key(jobid: str) -> tuple[str, str | None]:
    """(number, array index) ignoring the server: '12[3].srv' -> ('12', '3').

    A plain id has index None, an array parent ``12[]`` has index ''.
    Unparseable ids are returned verbatim.
    """
    m = _ID_RE.match(jobid.strip())
    if not m:
        return (jobid.strip(), None)
    return (m.group("num"), m.group("idx"))


def parse_qstat_full(text: str) -> list[dict[str, str]]:
    """``qstat -f`` output -> one dict per ``Job Id:`` block.

    The id is stored under ``"Job Id"``.  Lines that are not ``key = value``
    continue the previous value (PBS wraps long values onto tab-indented
    lines).
    """
    records: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    last_key: str | None = None
    for line in text.splitlines():
        if line.startswith("Job Id:"):
            current = {"Job Id": line.split(":", 1)[1].strip()}
            records.append(current)
            last_key = None
            continue
        if current is None or not line.strip():
            continue
        m = _ATTR_RE.match(line)
        if m:
            last_key = m.group("key")
            current[last_key] = m.group("value").strip()
        elif last_key is not None:
            current[last_key] += line.strip()
    return records


def find_record(records: Sequence[dict[str, str]], jobid: str) -> dict[str, str] | None:
    """The record whose id means the same job as ``jobid`` (or None)."""
    key = job_key(jobid)
    for rec in records:
        if job_key(rec.get("Job Id", "")) == key:
            return rec
    return None


def exit_status_of(record: dict[str, str]) -> int | None:
    """``Exit_status`` (PBS Pro) / ``exit_status`` (Torque), if present."""
    for k, v in record.items():
        if k.lower() == "exit_status":
            try:
                return int(v.split()[0])
            except (ValueError, IndexError):
                return None
    return None


def interpret_qstat(jobid: str, returncode: int, stdout: str, stderr: str) -> QstatVerdict:
    """Pure interpretation of one ``qstat -f ID`` run."""
    message = " ".join((stderr + " " + stdout).split())
    if returncode != 0:
        if returncode in GONE_RETURN_CODES or GONE_MESSAGE.search(message):
            return QstatVerdict("gone", reason=f"qstat rc={returncode} {message}".strip())
        return QstatVerdict("error", reason=f"qstat rc={returncode} {message}".strip())
    record = find_record(parse_qstat_full(stdout), jobid)
    if record is None:
        return QstatVerdict("gone", reason="qstat returned no record for this id")
    state = record.get("job_state", "").strip()[:1].upper()
    if state in RUNNING_STATES:
        return QstatVerdict("running", reason=f"job_state={state}")
    if state in FINISHED_STATES:
        return QstatVerdict("finished", exit_status_of(record), reason=f"job_state={state}")
    return QstatVerdict("error", reason=f"unexpected job_state {state!r}")


def run_qstat(jobid: str) -> QstatVerdict:
    """Call ``qstat -f ID`` once (bounded in time)."""
    try:
        proc = subprocess.run(
            ["qstat", "-f", jobid],
            capture_output=True,
            text=True,
            timeout=QSTAT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return QstatVerdict("error", reason=f"qstat timed out after {QSTAT_TIMEOUT_S}s")
    except OSError as exc:
        return QstatVerdict("error", reason=f"cannot run qstat: {exc}")
    return interpret_qstat(jobid, proc.returncode, proc.stdout, proc.stderr)


def record_path(jobs_dir: Path, jobid: str) -> Path:
    """Same naming as pbs-submit.py's ``record_path``."""
    return jobs_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", jobid) + ".json")


def recorded_exit(jobs_dir: Path, jobid: str, grace_s: float) -> tuple[int | None, str, dict]:
    """Exit code written by the job's wrapper: (code or None, reason, record)."""
    try:
        record = json.loads(record_path(jobs_dir, jobid).read_text())
        exit_file = Path(record["exit_file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, "no pbs-submit.py record for this id in logs/pbs/jobs", {}
    deadline = time.monotonic() + grace_s
    while True:
        try:
            os.listdir(exit_file.parent)  # refreshes NFS directory caches
            return int(exit_file.read_text().split()[0]), f"exit file {exit_file}", record
        except (OSError, ValueError, IndexError):
            if time.monotonic() >= deadline:
                return (
                    None,
                    f"job recorded no exit code ({exit_file} missing): killed, "
                    f"cancelled or out of walltime/memory? see {record.get('stderr')}",
                    record,
                )
            time.sleep(0.5)


def decide(
    jobid: str,
    jobs_dir: Path,
    query: Callable[[str], QstatVerdict] | None = None,
    sleep: Callable[[float], None] | None = None,
    grace_s: float | None = None,
) -> tuple[str, str, dict]:
    """(running|success|failed, reason, submit record) for ``jobid``."""
    grace_s = EXIT_FILE_GRACE_S if grace_s is None else grace_s
    query = query or run_qstat
    sleep = sleep or time.sleep
    verdict = query(jobid)
    errors = []
    for delay in BACKOFF_S[:RETRIES]:
        if verdict.kind != "error":
            break
        errors.append(verdict.reason)
        sleep(delay)
        verdict = query(jobid)
    if verdict.kind == "running":
        return "running", verdict.reason, {}
    if verdict.kind == "finished" and verdict.exit_status is not None:
        status = "success" if verdict.exit_status == 0 else "failed"
        return status, f"{verdict.reason} Exit_status={verdict.exit_status}", {}
    if verdict.kind == "error":
        errors.append(verdict.reason)
        summary = f"qstat failed {len(errors)} times ({errors[-1]})"
    else:
        summary = verdict.reason
    code, why, record = recorded_exit(jobs_dir, jobid, grace_s)
    if code is None:
        return "failed", f"{summary}; {why}", record
    return ("success" if code == 0 else "failed"), f"{summary}; exit code {code} from {why}", record


def log(log_dir: Path, jobid: str, status: str, reason: str) -> None:
    """Append one line to ``logs/pbs/status.log`` (never raises)."""
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / "status.log", "a") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {jobid} {status}: {reason}\n")
    except OSError:
        pass


def main(argv: list[str]) -> int:
    log_dir = Path.cwd() / LOG_DIR
    jobid = argv[0].strip() if argv else ""
    try:
        if not jobid:
            status, reason, record = "failed", "no job id given", {}
        else:
            status, reason, record = decide(jobid, log_dir / "jobs")
        if status != "running":
            log(log_dir, jobid, status, reason)
        if status == "success":  # keep the copies of failed jobs for debugging
            try:
                if not record:
                    record = json.loads(record_path(log_dir / "jobs", jobid).read_text())
                for key in ("wrapper", "jobscript"):
                    if record.get(key):
                        Path(record[key]).unlink(missing_ok=True)
            except (OSError, ValueError, AttributeError):
                pass  # cleanup only
    except Exception as exc:  # noqa: BLE001 - must never break the workflow
        status = "failed"
        log(log_dir, jobid, status, f"internal error: {exc!r}")
    print(status)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
