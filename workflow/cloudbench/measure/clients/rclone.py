"""rclone as a client: the study's tool, and the only one that reports its own progress
(a JSON log with a stats line every second) and splits one file into parallel streams.

Its credentials stay where the user put them (rclone's config file or
``RCLONE_CONFIG_<NAME>_*`` variables): rclone inherits the environment and needs nothing
handed over.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from pathlib import Path

from cloudbench.campaign.clients import split_remote
from cloudbench.campaign.paths import live_log
from cloudbench.campaign.rclone_options import remote_env_prefix
from cloudbench.campaign.secrets import rclone_env_flags, redact, redact_file, secret_values
from cloudbench.measure import rclone as rc
from cloudbench.measure.clients.base import (
    MOVED_FROM_CLIENT_STATS,
    PROGRESS_FROM_LOG,
    SERIES_FROM_LOG,
    TIMED_BY_LOG_STAMPS,
    ClientError,
    CopyJob,
    CopyRequest,
    Evidence,
    Kept,
    Outcome,
    Plan,
    Run,
    sides,
)
from cloudbench.measure.rclonelog import (
    VERDICT_RE,
    network_cause,
    on_wall_clock,
    parse_rclone_log,
)
from cloudbench.records import clip_tail, first_few


def stopped_by(returncode: int) -> str | None:
    """The signal that ended a process, by its exit status (negative, or 128 + N as a shell
    reports it and rclone exits after SIGINT and SIGTERM); None if it exited by itself."""
    import signal

    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        return signal.Signals(number).name if number else None
    except ValueError:  # not a signal's number
        return None


def exit_reason(returncode: int) -> str:
    """How a process ended: a signal is named, since rclone logs nothing then."""
    signal_name = stopped_by(returncode)
    if signal_name:
        return f"stopped by {signal_name} (exit {returncode})"
    return f"failed (exit {returncode})"


def _lines(path: Path):
    with open(path, errors="replace") as fh:
        yield from fh


class Rclone:
    name = "rclone"

    def network_cause(self, text: str) -> str | None:
        return network_cause(text)

    def check(self, remote_prefixes, template: str | None) -> list[str]:
        """Nothing of its own: a site's preflight checks rclone (its version, each remote)
        for every campaign, since cloudbench's own bookkeeping runs on it."""
        return []

    def plan(self, job: CopyJob) -> Plan:
        try:
            binary = rc.find_rclone()
            version = rc.rclone_version(binary)
            rc.check_version(version, job.min_rclone_version)
        except rc.RcloneError as err:
            raise ClientError(str(err)) from None
        conc = rc.concurrency(
            job.strategy,
            job.threads,
            objects=len(job.objects),
            object_bytes=job.object_bytes,
            cutoff=job.multi_thread_cutoff,
            part_bytes=job.multi_thread_chunk_size,
            backend=rc.backend_type(binary, job.remote_url),
            direction=job.direction,
        )
        log = job.log_path
        log.parent.mkdir(parents=True, exist_ok=True)
        log.unlink(missing_ok=True)
        log.touch()  # rclone appends to it, so a second name sees every line
        live_log(log).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # a filesystem without hard links: no second name
            os.link(log, live_log(log))
        listing = job.workdir / "objects"  # the exact object list: nothing else is moved
        argv = rc.copy_command(
            binary,
            job.src,
            job.dst,
            conc=conc,
            log_file=log,
            multi_thread_cutoff=job.multi_thread_cutoff,
            extra_flags=(*job.flags, "--files-from", str(listing)),
        )
        return Plan(
            argv=argv,
            version=version,
            columns={
                "concurrency": max(1, job.threads),
                "transfers": conc.transfers,
                "objects_in_flight": conc.objects_in_flight,
                "streams_per_object": conc.streams_per_object,
                "connections": conc.connections,
                "backend": conc.backend,
                "backend_concurrency": conc.backend_concurrency,
            },
            progress=PROGRESS_FROM_LOG,
            files={listing: "".join(f"{n}\n" for n in job.objects)},
            output_is_log=False,
        )

    def outcome(self, job: CopyJob, plan: Plan, run: Run) -> Outcome:
        secrets = secret_values()
        log_path = job.log_path
        redact_file(log_path, secrets)
        log = parse_rclone_log(_lines(log_path)) if log_path.exists() else None
        samples = on_wall_clock(log.samples, run.start_epoch) if log else []
        final = log.final if log else None
        moved = final.bytes if final else None
        moved_files = final.transfers if final else 0
        error = None
        if run.timed_out:
            pass  # measure() says so
        elif run.returncode != 0:
            last = log.last_error if log else None
            if stopped_by(run.returncode):
                # a stopped rclone logs nothing of its own; its stderr holds only what it
                # printed before opening its log (a DEBUG line), which is no reason
                error = f"rclone {exit_reason(run.returncode)}"
                error += f"; its last error: {last}" if last else ""
            else:
                error = (
                    last or clip_tail(run.output, 500) or f"rclone {exit_reason(run.returncode)}"
                )
            if log and log.hidden_cause:
                error = f"{log.hidden_cause} (rclone said: {error})"
            elif log and log.failed_objects and last and VERDICT_RE.match(last):  # names none
                error += f" (on {first_few(log.failed_objects)})"
            error = redact(error, secrets)
        elif (moved or 0) < job.expected_bytes or moved_files < len(job.objects):
            # rclone's byte count includes what failed attempts sent, so a retried transfer
            # reports more than the dataset; fewer means something was skipped or lost.
            error = (
                f"rclone moved {moved_files} files / {moved or 0} bytes, expected "
                f"{len(job.objects)} files / {job.expected_bytes} bytes"
            )
        return Outcome(
            bytes_moved=moved,
            files_moved=moved_files,
            moved_from=MOVED_FROM_CLIENT_STATS,
            series_from=SERIES_FROM_LOG,
            points=tuple((s.elapsed, s.bytes) for s in samples),
            error=error,
            retries=log.retries if log else 0,
            corrupt=bool(error and not run.timed_out and log and log.corrupted),
            columns={
                "rclone_errors": final.errors if final else None,
                "rclone_exit": run.returncode,
                "rclone_version": plan.version,
                "rclone_env": rclone_env_flags(),
                "throttled": log.throttled if log else None,
                "server_errors": log.server_errors if log else None,
                "request_retries": log.request_retries if log else None,
                # DEBUG lines: counted only where the log is at -vv, which says its version
                "low_level_retries": log.low_level_retries if log and log.version else None,
            },
        )

    def evidence(self, kept: Kept) -> Evidence:
        """rclone's JSON log says both: its last stats line's bytes and transfers, and that
        line's time stamp on the record's clock."""
        log = kept.log
        parsed = parse_rclone_log(_lines(log)) if log.exists() else None
        if parsed is None or parsed.final is None:
            return Evidence(None, None, None, f"no stats line in {log.name}")
        points = on_wall_clock(parsed.samples, kept.started_epoch)
        return Evidence(
            bytes=parsed.final.bytes,
            objects=parsed.final.transfers,
            seconds=points[-1].elapsed if points else parsed.final.elapsed,
            source=f"rclone's JSON log ({log.name})",
            timed_by=TIMED_BY_LOG_STAMPS,
        )

    def user_command(self, copy: CopyRequest) -> list[str]:
        """``rclone copy`` of the whole directory with the measured settings (transfers,
        checkers, multi-thread streams, cutoff and part size, the backend's pinned upload
        concurrency, the campaign's flags), no log, stats or object list. rclone finds the
        remote's keys where the user keeps them."""
        direction = copy.direction or sides(copy.src, copy.dst)[0]
        remote = copy.dst if direction == "upload" else copy.src
        backend = copy.backend or remote_backend(remote)

        def setting(backend: str) -> rc.Concurrency:
            return rc.concurrency(
                copy.strategy,
                copy.concurrency,
                objects=1,
                object_bytes=0,
                cutoff=copy.multi_thread_cutoff,
                part_bytes=copy.multi_thread_chunk_size,
                backend=backend,
                direction=direction,
            )

        argv = rc.copy_command(
            rc.BINARY.name,
            copy.src,
            copy.dst,
            conc=setting(backend),
            log_file=None,
            multi_thread_cutoff=copy.multi_thread_cutoff,
            extra_flags=tuple(copy.flags),
        )
        named = split_remote(remote)
        where = (
            f"the rclone remote {named[0]}'s own (rclone config or "
            f"{remote_env_prefix(named[0])}* variables)"
            if named
            else "the remote's own (rclone config or environment)"
        )
        notes = [f"# credentials: {where}, never on the command line"]
        pinned = setting(S3_BACKEND).flags()
        if backend == UNKNOWN_BACKEND and pinned:
            notes.append(
                f"# the rclone remote {named[0] if named else remote} is not defined here, so "
                "its type is not known: a measured upload also pins its backend's upload "
                f"concurrency and part size (on S3: {shlex.join(pinned)})"
            )
        return [*notes, shlex.join(argv)]


UNKNOWN_BACKEND = "unknown"  # what rc.backend_type says of a remote it cannot find
S3_BACKEND = "s3"  # the usual store, for the note on a remote of unknown type


def remote_backend(remote: str) -> str:
    """The rclone backend type of ``remote`` here; ``unknown`` where rclone is missing or
    the remote not defined."""
    try:
        return rc.backend_type(rc.find_rclone(), remote)
    except (rc.RcloneError, OSError):
        return UNKNOWN_BACKEND


CLIENT = Rclone()
