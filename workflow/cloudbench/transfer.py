"""Timed transfers: one rclone copy per measurement, timed outside rclone, logged as JSON.

The wall clock starts just before rclone starts and stops when it exits, so the reported
rate includes everything the user would wait for.  rclone's own stats only feed the
per-second time series and the retry/error accounting.

Other tools (s5cmd, the AWS CLI, a command template: ``measure_tool``) are timed the same
way and give a record with the same keys; their downloads' series come from sampling the
destination every second.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cloudbench import rclone as rc
from cloudbench import tools
from cloudbench.arrival import MOVED_FROM_LISTING
from cloudbench.jobenv import die_with_parent, kill_tree
from cloudbench.paths import attempts_dir, live_log
from cloudbench.progress import LogTail, label_of, progress_interval, progress_of
from cloudbench.rclonelog import on_wall_clock, parse_rclone_log, rate_series
from cloudbench.records import clip_tail, host_info, rate_mb_s, read_json, utc_now, write_json
from cloudbench.secrets import rclone_env_flags, redact, redact_file, secret_values
from cloudbench.spec import TransferSpec

SERIES_HEADER = "elapsed_s\tbytes\tmb_per_s\n"


def command_line(argv: Sequence[str], secrets: Sequence[str]) -> str:
    """The copy's command as one shell line for its record and job log: what ``transfers``,
    ``connections`` and the other concurrency columns were set by (the binary by name;
    credentials never reach a command line, and are redacted if one did)."""
    return redact(shlex.join([Path(argv[0]).name, *argv[1:]]), secrets)


def write_series(path: Path, log_path: Path, start_epoch: float | None = None) -> None:
    """The per-second series from the raw log, on the wall clock since ``start_epoch`` (the
    moment the transfer was started) when given: each stats line's own time stamp, so a
    stall or rclone's start-up shows where it happened (rclone's ``elapsedTime`` does not
    advance while nothing transfers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = parse_rclone_log(_lines(log_path)).samples if log_path.exists() else ()
    if start_epoch is not None:
        samples = on_wall_clock(samples, start_epoch)
    with open(path, "w") as fh:
        fh.write(SERIES_HEADER)
        for elapsed, nbytes, rate in rate_series(samples):
            fh.write(f"{elapsed:.3f}\t{nbytes}\t{rate / 1e6:.3f}\n")


def _lines(path: Path):
    with open(path, errors="replace") as fh:
        yield from fh


def purge(binary: str, prefix: str, flags: tuple[str, ...]) -> None:
    """Remove what an earlier, interrupted measurement left at ``prefix`` (absent is fine)."""
    rc.run_helper(rc.helper_command(binary, "purge", prefix, extra_flags=flags))


def measure(
    spec: TransferSpec,
    src: str,
    dst: str,
    *,
    threads: int,
    expected_files: int,
    expected_bytes: int,
    object_bytes: int,
    log_path: Path,
    series_path: Path,
    label: str | None = None,
    ready: Callable[[], object] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Run one timed copy and return its record (status ok or failed, never an exception).

    ``expected_files`` objects of about ``object_bytes`` each (a file or a chunk) make up the
    copy; together they decide how many connections the strategy really opens. ``ready``
    is called after every preparation and right before the clock starts: the start
    barrier of a group of clients.
    """
    binary = rc.find_rclone()
    version = rc.rclone_version(binary)
    rc.check_version(version, spec.min_rclone_version)
    conc = rc.concurrency(
        spec.layout.strategy,
        threads,
        objects=expected_files,
        object_bytes=object_bytes,
        cutoff=spec.multi_thread_cutoff,
        part_bytes=spec.multi_thread_chunk_size,
        backend=rc.backend_type(binary, spec.remote_url),
        direction=spec.direction,
    )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.unlink(missing_ok=True)
    log_path.touch()  # rclone appends to it, so a second name sees every line
    live_log(log_path).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # a filesystem without hard links: no second name
        os.link(log_path, live_log(log_path))
    cmd = rc.copy_command(
        binary,
        src,
        dst,
        conc=conc,
        log_file=log_path,
        multi_thread_cutoff=spec.multi_thread_cutoff,
        extra_flags=spec.flags,
    )
    label = label or label_of(spec.direction, spec.remote, spec.layout_label, spec.repeat)
    secrets = secret_values()
    command = command_line(cmd, secrets)
    print(f"{label}: {command}", file=sys.stderr, flush=True)
    if ready is not None:
        ready()
    started, epoch = utc_now(), time.time()
    t0 = time.perf_counter()
    output, timed_out = _run_with_progress(cmd, log_path, label, expected_bytes, t0, timeout)
    seconds = time.perf_counter() - t0
    redact_file(log_path, secrets)
    log = parse_rclone_log(_lines(log_path)) if log_path.exists() else None
    write_series(series_path, log_path, epoch)

    final = log.final if log else None
    moved = final.bytes if final else None
    moved_files = final.transfers if final else 0
    error = None
    if timed_out:
        error = timed_out_error(timeout)
    elif output.returncode != 0:
        last = log.last_error if log else None
        error = last or clip_tail(output.stdout, 500) or f"rclone {exit_reason(output.returncode)}"
        error = redact(error, secrets)
    elif (moved or 0) < expected_bytes or moved_files < expected_files:
        # rclone's byte count includes what failed attempts sent, so a retried transfer
        # reports more than the dataset; fewer means something was skipped or lost.
        error = (
            f"rclone moved {moved_files} files / {moved or 0} bytes, expected "
            f"{expected_files} files / {expected_bytes} bytes"
        )
    return {
        **spec.row_keys(),
        "files": len(spec.files),
        "objects": expected_files,
        "bytes_requested": expected_bytes,
        "bytes_moved": moved,
        "started_utc": started,
        "started_epoch": epoch,
        "seconds": round(seconds, 6),
        "mb_per_s": round(rate_mb_s(expected_bytes, seconds), 3) if not error else None,
        "status": "failed" if error else "ok",
        "error": error,
        "retries": log.retries if log else 0,
        "rclone_errors": final.errors if final else None,
        "concurrency": max(1, threads),
        "transfers": conc.transfers,
        "objects_in_flight": conc.objects_in_flight,
        "streams_per_object": conc.streams_per_object,
        "connections": conc.connections,
        "backend": conc.backend,
        "backend_concurrency": conc.backend_concurrency,
        "rclone_exit": output.returncode,
        "rclone_version": version,
        "rclone_env": rclone_env_flags(),
        "tool_version": version,
        "bytes_moved_from": "rclone stats",
        "source": src,
        "destination": dst,
        "command": command,
        **host_info(),
    }


# Where a non-rclone tool's bytes_moved comes from (the tool itself reports none).
MOVED_FROM_DESTINATION = "destination"  # downloads: bytes found at the listed paths
SERIES_FROM_DESTINATION = "destination sampled every second"
NO_UPLOAD_SERIES = "none: an upload's bytes are seen only inside the tool"


def listed_bytes(root: Path, objects: list[str]) -> int:
    """Bytes at ``root`` under the listed object names (absent ones count 0), so a tool
    that skipped or truncated an object moves fewer bytes than requested."""
    total = 0
    for name in objects:
        try:
            total += (root / name).stat().st_size
        except OSError:
            continue
    return total


def measure_tool(
    spec: TransferSpec,
    src: str,
    dst: str,
    *,
    threads: int,
    objects: list[str],
    expected_bytes: int,
    log_path: Path,
    series_path: Path,
    ready: Callable[[], object] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """One timed copy by a tool other than rclone, with the same record keys as
    :func:`measure` (status ok or failed, never an exception).

    The wall clock runs from spawn to exit, as for rclone. A download's destination is
    sampled every second (the series); an upload has no series (nothing outside the tool
    sees its bytes leave), which the record says in ``series_from``. The tool's own output
    is kept, redacted, at the rclone-log path: it is this measurement's tool log.
    """
    tool = spec.setting.tool
    download = spec.direction == "download"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.unlink(missing_ok=True)
    conc = max(1, threads)
    started, epoch = utc_now(), time.time()
    version = command = None
    with tempfile.TemporaryDirectory(prefix="cloudbench-tool-") as tmp:
        try:
            cmd = tools.copy_command(
                tool,
                src,
                dst,
                concurrency=conc,
                files=objects,
                workdir=Path(tmp),
                template=spec.command_template,
            )
            command = command_line(cmd.argv, secret_values())
            version = tools.tool_version(tool, cmd.argv[0])
        except tools.ToolError as err:
            run, error = None, str(err)
        else:
            if ready is not None:
                ready()
            started, epoch = utc_now(), time.time()
            run = tools.run_copy(cmd, sample_dir=Path(dst) if download else None, timeout=timeout)
            error = None
    output = run.output if run else (error or "")
    log_path.write_text(output)
    if download and run:
        tools.write_series(series_path, run.samples)
    else:
        series_path.parent.mkdir(parents=True, exist_ok=True)
        series_path.write_text(SERIES_HEADER)
    # An upload's bytes are counted by the listing after the copy (steps.check_upload_arrived)
    moved = listed_bytes(Path(dst), objects) if run and download else None
    if run and run.timed_out:
        error = timed_out_error(timeout)
    elif run and run.returncode != 0:
        tail = output.strip().splitlines()[-3:]
        said = clip_tail(" | ".join(tail), 500) or "no output"
        error = f"{tool} exited {run.returncode}: {said}"
    elif run and download and (moved or 0) < expected_bytes:
        error = f"{tool} left {moved} bytes at the destination, expected {expected_bytes}"
    seconds = run.seconds if run else 0.0
    return {
        **spec.row_keys(),
        "files": len(spec.files),
        "objects": len(objects),
        "bytes_requested": expected_bytes,
        "bytes_moved": moved,
        "bytes_moved_from": MOVED_FROM_DESTINATION if download else MOVED_FROM_LISTING,
        "series_from": SERIES_FROM_DESTINATION if download else NO_UPLOAD_SERIES,
        "started_utc": started,
        "started_epoch": epoch,
        "seconds": round(seconds, 6),
        "mb_per_s": round(rate_mb_s(expected_bytes, seconds), 3) if not error else None,
        "status": "failed" if error else "ok",
        "error": redact(error, secret_values()) if error else None,
        "retries": None,  # the tools do not report them
        "rclone_errors": None,
        "concurrency": conc,
        "transfers": conc,
        "objects_in_flight": min(conc, len(objects)) or 1,
        "streams_per_object": 1,
        "connections": min(conc, len(objects)) or 1,
        "backend": "s3" if tool in tools.S3_TOOLS else None,
        "backend_concurrency": None,
        "rclone_exit": None,
        "rclone_version": None,
        "tool_exit": run.returncode if run else None,
        "tool_version": version,
        "source": src,
        "destination": dst,
        "command": command,
        **host_info(),
    }


def _run_with_progress(
    cmd: list[str], log_path: Path, label: str, total: int, t0: float, timeout: float | None
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run rclone; every ``progress_interval()`` seconds print a progress line to stderr
    (the job log) from the JSON log as it grows. Waiting wakes up the moment rclone exits,
    so the clock around this call is not stretched by the polling. Past ``timeout`` seconds
    rclone and whatever it started are ended (:func:`cloudbench.jobenv.kill_tree`); the
    second value says so."""
    interval = progress_interval()
    tail = LogTail(log_path)
    deadline = None if timeout is None else t0 + timeout
    timed_out = False
    with tempfile.TemporaryFile("w+") as captured:
        proc = subprocess.Popen(
            cmd,
            stdout=captured,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=die_with_parent,
        )
        while True:
            now = time.perf_counter()
            if deadline is not None and now >= deadline:
                timed_out = True
                kill_tree(proc)
                break
            wait = interval if deadline is None else min(interval, deadline - now)
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.perf_counter() >= deadline:
                    continue
                tail.poll()
                p = progress_of(label, tail.samples, total, time.perf_counter() - t0)
                print(p.line(), file=sys.stderr, flush=True)
        captured.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, captured.read()), timed_out


# A copy gets the batch job's walltime less this share of it (at most WALLTIME_MARGIN_S), so
# a hung client is ended, and recorded as failed, before the scheduler kills the job.
WALLTIME_MARGIN = 0.1
WALLTIME_MARGIN_S = 300.0


def copy_timeout(walltime_min: float | None, campaign_timeout_s: float | None) -> float | None:
    """Seconds a timed copy may take: the campaign's ``copy_timeout`` when it sets one,
    capped by the job's walltime less a margin (a scheduler would kill the job, record
    and all, at its walltime); None when neither is known."""
    limits = []
    if campaign_timeout_s:
        limits.append(float(campaign_timeout_s))
    if walltime_min:
        wall = float(walltime_min) * 60
        limits.append(max(wall - min(WALLTIME_MARGIN_S, WALLTIME_MARGIN * wall), 1.0))
    return min(limits) if limits else None


def timed_out_error(timeout: float) -> str:
    return f"timed out after {timeout:g} s (copy_timeout, or the job's walltime less a margin)"


def keep_attempt(
    record_path: Path,
    record: dict[str, Any],
    log_path: Path | None = None,
    client_logs: Sequence[Path] = (),
) -> None:
    """Every attempt's record and rclone log, kept beside the current one.

    A rerun replaces the record Snakemake tracks; the history of failed attempts (and what
    they cost) stays in ``<record>.attempts/`` so nothing measured is ever lost.
    """
    stamp = record["started_utc"].replace(":", "").replace("-", "")
    folder = attempts_dir(record_path)
    write_json(folder / f"{stamp}.json", record)
    if log_path is not None and log_path.exists() and log_path.stat().st_size:
        shutil.copyfile(log_path, folder / f"{stamp}.rclone.jsonl")
    for k, client_log in enumerate(client_logs):  # several clients: each one's own log
        if client_log.exists():
            shutil.copyfile(client_log, folder / f"{stamp}.client-{k}.rclone.jsonl")
    for log in [*([log_path] if log_path is not None else []), *client_logs]:
        live_log(log).unlink(missing_ok=True)  # recorded: no longer an attempt to set aside


def set_aside_unrecorded(record_path: Path, logs: Sequence[Path]) -> None:
    """Logs left by an attempt that never wrote its record (a job killed hard, or stopped
    with Ctrl-C) go into ``<record>.attempts/`` as ``<mtime>.unrecorded.<name>``, so the next
    attempt does not overwrite them; a log already kept by :func:`keep_attempt` just goes.
    Such a log is found at its own path or, when Snakemake has deleted that before the rerun,
    by its second name (:func:`cloudbench.paths.live_log`)."""
    folder = attempts_dir(record_path)
    for log in logs:
        found = next((p for p in (log, live_log(log)) if p.exists()), None)
        data = found.read_bytes() if found is not None else b""
        kept = folder.is_dir() and any(
            p.stat().st_size == len(data) and p.read_bytes() == data for p in folder.glob("*.jsonl")
        )
        if data and not kept:
            when = datetime.fromtimestamp(found.stat().st_mtime, UTC)
            folder.mkdir(parents=True, exist_ok=True)
            kept_as = folder / f"{when:%Y%m%dT%H%M%S.%fZ}.unrecorded.{log.name}"
            shutil.copyfile(found, kept_as)
            redact_file(kept_as)  # a killed job never scrubbed its log
        log.unlink(missing_ok=True)
        live_log(log).unlink(missing_ok=True)


def exit_reason(returncode: int) -> str:
    """How a process ended, by its exit status: a signal (negative, or 128 + N as a shell
    reports it and rclone exits after SIGINT) is named, since rclone logs nothing then."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        return f"stopped by {signal.Signals(number).name} (exit {returncode})"
    except ValueError:  # 0: no signal; or not a signal's number
        return f"failed (exit {returncode})"


def fresh_dir(path: Path) -> Path:
    """An empty directory: a repeat must move the data again, never find it already there."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def last_attempt(record_path: Path) -> dict[str, Any] | None:
    """The most recent kept attempt of a record (attempt files sort by start time)."""
    kept = sorted(attempts_dir(record_path).glob("*.json"))
    return read_json(kept[-1]) if kept else None
