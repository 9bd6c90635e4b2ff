#!/usr/bin/env python3
"""Report a PBS job's state to Snakemake (cluster-generic ``status-cmd``).

Calling convention (snakemake-executor-plugin-cluster-generic 1.0.9): the
plugin runs ``<status-cmd> '<jobid>'`` through a shell and expects exactly one
line ``running``, ``success`` or ``failed``.  A non-zero exit status aborts the
whole workflow ("Failed to obtain job status"), so this script *always* exits 0
and prints one word; problems are explained in ``logs/pbs/status.log``.

Decision order (why):

1. One qstat call.  On PBS Pro / OpenPBS (``qstat --version`` prints
   ``pbs_version``; the answer is kept in ``logs/pbs/qstat-flavour.json``) it is
   ``qstat -x -f -F json ID``: ``-x`` keeps finished jobs, JSON needs no text
   parsing.  Elsewhere (Torque, Slurm's torque wrapper: neither ``-x`` nor
   ``-F json``) it is ``qstat -f ID``.  States Q/H/W/R/E/T/S (+ PBS Pro B/M/U)
   are ``running``.  C/F/X are finished: ``Exit_status``/``exit_status`` 0
   means ``success``, anything else ``failed``.
2. Finished without an exit status (Slurm's torque wrapper never prints one),
   or no longer known to qstat (rc 153 "Unknown Job Id", PBS Pro rc 35 "Job has
   finished"): the job's own exit record decides, the exit code the wrapper
   made by ``pbs-submit.py`` wrote (``logs/pbs/jobs/<id>.json`` ->
   ``exit_file``).  Nothing recorded -> ``failed`` (killed by qdel, walltime,
   memory...), after a short grace period for shared-filesystem lag.
3. qstat itself fails (non-zero exit that is not "unknown job", a timeout, an
   answer without this job, JSON that does not parse): that says nothing about
   the job, so it is ``running``, unless the job's exit record is there
   (``success``/``failed``), or its deadline has passed: the walltime
   ``pbs-submit.py`` asked for, counted from the job's start (the wrapper's
   ``start_file``) or else from its submission, plus ``DEADLINE_MARGIN_S``; a
   job PBS did not end by then has no exit record because it was killed
   (``failed``).  Reading a failing qstat as ``failed`` would free the site's
   ``network`` slot while the copy still runs (issue #37).
Array ids ``123[4]`` / ``123[]`` (optionally ``.server``) are matched against
the ``Job Id:`` records, ignoring the server suffix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
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
EXIT_FILE_GRACE_S = 3.0
#: after the walltime: PBS's kill, the epilogue, a shared filesystem's lag
DEADLINE_MARGIN_S = 600.0
#: a job submitted without a walltime gets the queue's default, unknown here
UNKNOWN_WALLTIME_S = 24 * 3600.0
FLAVOUR_FILE = "qstat-flavour.json"  # in LOG_DIR

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


def _failed_call(returncode: int, stdout: str, stderr: str) -> QstatVerdict:
    """A qstat that exited non-zero: the server's "no such job" (gone), or an error."""
    message = " ".join((stderr + " " + stdout).split())
    reason = f"qstat rc={returncode} {message}".strip()
    if returncode in GONE_RETURN_CODES or GONE_MESSAGE.search(message):
        return QstatVerdict("gone", reason=reason)
    return QstatVerdict("error", reason=reason)


def verdict_of(record: dict[str, str] | None) -> QstatVerdict:
    """What one job's record says.  A qstat that answered without this job is an error,
    not its end: a server that forgot a job says so (rc 153, "Unknown Job Id")."""
    if record is None:
        return QstatVerdict("error", reason="qstat answered without a record for this id")
    state = str(record.get("job_state", "")).strip()[:1].upper()
    if state in RUNNING_STATES:
        return QstatVerdict("running", reason=f"job_state={state}")
    if state in FINISHED_STATES:
        return QstatVerdict("finished", exit_status_of(record), reason=f"job_state={state}")
    return QstatVerdict("error", reason=f"unexpected job_state {state!r}")


def interpret_qstat(jobid: str, returncode: int, stdout: str, stderr: str) -> QstatVerdict:
    """Pure interpretation of one ``qstat -f ID`` run."""
    if returncode != 0:
        return _failed_call(returncode, stdout, stderr)
    return verdict_of(find_record(parse_qstat_full(stdout), jobid))


def parse_qstat_json(text: str) -> list[dict[str, str]]:
    """``qstat -f -F json`` (PBS Pro, OpenPBS) -> one flat record per job, as
    :func:`parse_qstat_full` gives: ``{"Job Id": id, "job_state": "F", "Exit_status": "0",
    ...}`` (nested maps such as ``Resource_List`` are left out).  ValueError if it is not
    the documented shape ``{"Jobs": {id: {attribute: value}}}``."""
    data = json.loads(text)
    jobs = data.get("Jobs", {}) if isinstance(data, dict) else None
    if not isinstance(jobs, dict):
        raise ValueError("no 'Jobs' map")
    return [
        {"Job Id": str(job_id)}
        | {k: str(v) for k, v in attrs.items() if not isinstance(v, (dict, list))}
        for job_id, attrs in jobs.items()
        if isinstance(attrs, dict)
    ]


def interpret_qstat_json(jobid: str, returncode: int, stdout: str, stderr: str) -> QstatVerdict:
    """Pure interpretation of one ``qstat -x -f -F json ID`` run (PBS Pro)."""
    if returncode != 0:
        return _failed_call(returncode, stdout, stderr)
    try:
        records = parse_qstat_json(stdout)
    except ValueError as exc:  # some PBS versions print invalid JSON (unescaped values)
        return QstatVerdict("error", reason=f"qstat -F json printed no usable JSON: {exc}")
    return verdict_of(find_record(records, jobid))


def flavour_of(returncode: int, output: str) -> tuple[str, bool]:
    """What ``qstat --version`` says: ``pbspro`` where it names a PBS Pro / OpenPBS version,
    else ``text``; and whether that is this qstat's lasting answer (a version, or a qstat
    that has no such option, as Slurm's torque wrapper says), worth keeping."""
    if returncode == 0:
        return ("pbspro" if "pbs_version" in output.lower() else "text"), True
    return "text", bool(re.search(r"unknown option|usage:", output, re.I))


def qstat_flavour(log_dir: Path) -> str:
    """This site's qstat, asked once (``qstat --version`` needs no server) and kept in
    ``logs/pbs/qstat-flavour.json``; a call that failed otherwise is asked again next time."""
    cache = log_dir / FLAVOUR_FILE
    qstat = shutil.which("qstat") or "qstat"
    try:
        kept = json.loads(cache.read_text())
        if kept.get("qstat") == qstat and kept.get("flavour") in ("pbspro", "text"):
            return kept["flavour"]
    except (OSError, ValueError, AttributeError):
        pass
    try:
        proc = subprocess.run(
            [qstat, "--version"], capture_output=True, text=True, timeout=QSTAT_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return "text"
    flavour, lasting = flavour_of(proc.returncode, proc.stdout + proc.stderr)
    if lasting:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"qstat": qstat, "flavour": flavour}))
        except OSError:
            pass
    return flavour


def run_qstat(jobid: str) -> QstatVerdict:
    """Call qstat once (bounded in time), the way this site's qstat understands."""
    pbspro = qstat_flavour(Path.cwd() / LOG_DIR) == "pbspro"
    args = ["qstat", "-x", "-f", "-F", "json", jobid] if pbspro else ["qstat", "-f", jobid]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=QSTAT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return QstatVerdict("error", reason=f"qstat timed out after {QSTAT_TIMEOUT_S}s")
    except OSError as exc:
        return QstatVerdict("error", reason=f"cannot run qstat: {exc}")
    interpret = interpret_qstat_json if pbspro else interpret_qstat
    return interpret(jobid, proc.returncode, proc.stdout, proc.stderr)


def record_path(jobs_dir: Path, jobid: str) -> Path:
    """Same naming as pbs-submit.py's ``record_path``."""
    return jobs_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", jobid) + ".json")


def submit_record(jobs_dir: Path, jobid: str) -> dict:
    """What pbs-submit.py recorded about ``jobid`` ({} if nothing)."""
    try:
        record = json.loads(record_path(jobs_dir, jobid).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def read_exit(record: dict, grace_s: float) -> tuple[int | None, str]:
    """Exit code written by the job's wrapper: (code or None, reason)."""
    if not record.get("exit_file"):
        return None, "no pbs-submit.py record for this id in logs/pbs/jobs"
    exit_file = Path(record["exit_file"])
    deadline = time.monotonic() + grace_s
    while True:
        try:
            os.listdir(exit_file.parent)  # refreshes NFS directory caches
            return int(exit_file.read_text().split()[0]), f"exit file {exit_file}"
        except (OSError, ValueError, IndexError):
            if time.monotonic() >= deadline:
                return (
                    None,
                    f"job recorded no exit code ({exit_file} missing): killed, "
                    f"cancelled or out of walltime/memory? see {record.get('stderr')}",
                )
            time.sleep(0.5)


def read_start(record: dict) -> float | None:
    """When the job's wrapper started (the epoch it wrote), None if it has not (yet)."""
    try:
        return float(Path(record["start_file"]).read_text().split()[0])
    except (KeyError, TypeError, OSError, ValueError, IndexError):
        return None


def deadline_of(record: dict, started: float | None) -> float | None:
    """The latest moment the job can still run: its walltime from its start (else from
    its submission, the earlier bound) plus a margin; None without a submit record."""
    try:
        since = float(started if started is not None else record["submitted"])
    except (KeyError, TypeError, ValueError):
        return None
    walltime = record.get("walltime_s") or UNKNOWN_WALLTIME_S
    return since + float(walltime) + DEADLINE_MARGIN_S


def unanswered(record: dict, error: str, now: float) -> tuple[str, str]:
    """A failing qstat: the job's exit record, else running until its deadline."""
    code, why = read_exit(record, 0.0)
    if code is not None:
        return ("success" if code == 0 else "failed"), f"{error}; exit code {code} from {why}"
    deadline = deadline_of(record, read_start(record))
    if deadline is None:
        return "failed", f"{error}; {why}"
    if now < deadline:
        left = deadline - now
        return "running", f"{error}; no exit record, {left:.0f} s before its deadline: running"
    return "failed", f"{error}; past its walltime + {DEADLINE_MARGIN_S:g} s margin and {why}"


def decide(
    jobid: str,
    jobs_dir: Path,
    query: Callable[[str], QstatVerdict] | None = None,
    grace_s: float | None = None,
    now: float | None = None,
) -> tuple[str, str, dict]:
    """(running|success|failed, reason, submit record) for ``jobid``."""
    grace_s = EXIT_FILE_GRACE_S if grace_s is None else grace_s
    verdict = (query or run_qstat)(jobid)
    if verdict.kind == "running":
        return "running", verdict.reason, {}
    if verdict.kind == "finished" and verdict.exit_status is not None:
        status = "success" if verdict.exit_status == 0 else "failed"
        return status, f"{verdict.reason} Exit_status={verdict.exit_status}", {}
    record = submit_record(jobs_dir, jobid)
    if verdict.kind == "error":
        status, reason = unanswered(record, verdict.reason, time.time() if now is None else now)
        return status, reason, record
    code, why = read_exit(record, grace_s)
    if code is None:
        return "failed", f"{verdict.reason}; {why}", record
    status = "success" if code == 0 else "failed"
    return status, f"{verdict.reason}; exit code {code} from {why}", record


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
        if status != "running" or not reason.startswith("job_state="):  # qstat failed
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
