"""The one small protocol every client follows, and what a timed copy hands it.

A client does three things, and nothing else: it *plans* a copy (finds and versions its
binary, builds its command line for a share of objects at a concurrency, names the only
credentials it needs in its own environment, says where its per-second progress comes
from), and after the copy it *reads the outcome* (how many bytes and objects it moved and
by whose count, its retries and errors, its series). Timing, the timeout, progress lines,
redaction, the series file and the record are :func:`cloudbench.measure.copy.measure`'s,
the same for every client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cloudbench.measure import tools
from cloudbench.measure.arrival import MOVED_FROM_LISTING
from cloudbench.measure.series import Point
from cloudbench.measure.tools import ToolCommand

# Where a client's per-second progress comes from.
PROGRESS_FROM_LOG = "log"  # the client's own log (rclone's JSON stats lines)
PROGRESS_FROM_DESTINATION = "destination"  # a download's directory, sampled every second
NO_PROGRESS = "none"  # an upload by a client that reports nothing while it runs

# Where a record's bytes_moved comes from, and its series.
MOVED_FROM_CLIENT_STATS = "rclone stats"
MOVED_FROM_DESTINATION = "files on disk after the copy"  # downloads: at the listed paths
SERIES_FROM_DESTINATION = "destination sampled every second"
SERIES_FROM_LOG = "rclone stats lines"
NO_UPLOAD_SERIES = "none: an upload's bytes are seen only inside the tool"


@dataclass(frozen=True)
class CopyJob:
    """One client's timed copy: a share of a copy's objects between a local directory and
    a remote prefix, at a concurrency."""

    direction: str  # upload | download
    strategy: str  # plain | chunked | multithread
    src: str
    dst: str
    objects: tuple[str, ...]  # names relative to the local directory and the remote prefix
    expected_bytes: int
    object_bytes: int  # the size of one object (a file or a chunk)
    threads: int  # the client's concurrency
    remote_url: str
    log_path: Path
    workdir: Path  # a private directory for the small files a command needs
    flags: tuple[str, ...] = ()  # the campaign's rclone flags
    multi_thread_cutoff: int = 0
    multi_thread_chunk_size: int = 0
    min_rclone_version: str = "1.65.0"
    template: str | None = None  # the command client's command line

    @property
    def local(self) -> Path:
        return Path(self.dst if self.direction == "download" else self.src)


@dataclass(frozen=True)
class Plan:
    """What a client will run: its argv, its whole environment (only the credentials it
    needs; None: this process's, as rclone reads its remotes from it), small files to
    write first, and the record's concurrency columns."""

    argv: list[str]
    version: str | None
    columns: Mapping[str, Any]  # concurrency, transfers, connections, backend, ...
    progress: str  # PROGRESS_FROM_LOG, PROGRESS_FROM_DESTINATION or NO_PROGRESS
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    files: Mapping[Path, str] = field(default_factory=dict)
    output_is_log: bool = True  # its stdout/stderr is the measurement's log (rclone: no)

    def write_files(self) -> None:
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


@dataclass(frozen=True)
class Run:
    """How the process went, as the measuring side saw it."""

    returncode: int
    seconds: float
    start_epoch: float
    output: str  # stdout and stderr, redacted
    samples: tuple[Point, ...]  # the destination's bytes, when it was sampled
    timed_out: bool = False


@dataclass(frozen=True)
class Outcome:
    """What the client says it moved, and what went wrong, read after the copy."""

    bytes_moved: int | None
    files_moved: int | None  # None: the client does not count them
    moved_from: str
    series_from: str
    points: tuple[Point, ...]  # the series, on the wall clock since the copy started
    error: str | None
    retries: int | None = None  # None: the client does not report them
    columns: Mapping[str, Any] = field(default_factory=dict)  # client-specific columns
    # the client's own check found that the bytes it delivered are not the source's (rclone's
    # md5 after a download): the record says ``corrupt``, as verify's finding would
    corrupt: bool = False


class Client(Protocol):
    name: str

    def plan(self, job: CopyJob) -> Plan:
        """Find and version the binary, build the copy's command; raise ClientError with
        one line when it cannot (missing, too old, a wrong template, not an S3 remote)."""
        ...

    def outcome(self, job: CopyJob, plan: Plan, run: Run) -> Outcome:
        """Read what the copy did (its log, the destination), after it exited."""
        ...


class ClientError(RuntimeError):
    """A client cannot take this copy: one line that says why and what to do."""


def listed_bytes(root: Path, objects: tuple[str, ...] | list[str]) -> int:
    """Bytes at ``root`` under the listed object names (absent ones count 0), so a client
    that skipped or truncated an object moves fewer bytes than requested."""
    total = 0
    for name in objects:
        try:
            total += (root / name).stat().st_size
        except OSError:
            continue
    return total


def clip_output(output: str, limit: int = 500) -> str:
    from cloudbench.records import clip_tail

    tail = output.strip().splitlines()[-3:]
    return clip_tail(" | ".join(tail), limit) or "no output"


class ExternalClient:
    """A client that reports nothing of its own while it runs (s5cmd, the AWS CLI, a
    site's native tool): a download's destination is sampled for its series and bytes;
    an upload is counted by the listing after the copy (``cloudbench.measure.arrival``)."""

    name = "external"

    def command(self, job: CopyJob) -> ToolCommand:
        """The copy's command line, environment and small files: ``tools.copy_command``
        holds every external tool's command line, so a client is its name (and version)."""
        return tools.copy_command(
            self.name,
            job.src,
            job.dst,
            concurrency=max(1, job.threads),
            files=list(job.objects),
            workdir=job.workdir,
            template=job.template,
        )

    def version(self, binary: str) -> str | None:
        return tools.tool_version(self.name, binary)

    def plan(self, job: CopyJob) -> Plan:
        try:
            cmd = self.command(job)
            version = self.version(cmd.argv[0])
        except tools.ToolError as err:
            raise ClientError(str(err)) from None
        conc = max(1, job.threads)
        in_flight = min(conc, len(job.objects)) or 1
        download = job.direction == "download"
        return Plan(
            argv=cmd.argv,
            version=version,
            columns={
                "concurrency": conc,
                "transfers": conc,
                "objects_in_flight": in_flight,
                "streams_per_object": 1,
                "connections": in_flight,
                "backend": "s3" if self.name in ("s5cmd", "aws") else None,
                "backend_concurrency": None,
            },
            progress=PROGRESS_FROM_DESTINATION if download else NO_PROGRESS,
            environ=cmd.environ(),
            files=cmd.files,
        )

    def outcome(self, job: CopyJob, plan: Plan, run: Run) -> Outcome:
        download = job.direction == "download"
        moved = listed_bytes(job.local, job.objects) if download else None
        error = None
        if run.returncode != 0 and not run.timed_out:
            error = f"{self.name} exited {run.returncode}: {clip_output(run.output)}"
        elif download and (moved or 0) < job.expected_bytes:
            error = (
                f"{self.name} left {moved} bytes at the destination, expected {job.expected_bytes}"
            )
        return Outcome(
            bytes_moved=moved,
            files_moved=None,
            moved_from=MOVED_FROM_DESTINATION if download else MOVED_FROM_LISTING,
            series_from=SERIES_FROM_DESTINATION if download else NO_UPLOAD_SERIES,
            points=run.samples if download else (),
            error=error,
            columns={"rclone_exit": None, "rclone_version": None, "rclone_errors": None},
        )
