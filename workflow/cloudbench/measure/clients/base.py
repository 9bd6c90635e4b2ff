"""The one small protocol every client follows, and what a timed copy hands it.

A client does four things, and nothing else: it *checks* that it can run at a site (its
binary, its remotes), it *plans* a copy (finds and versions its binary, builds its command
line for a share of objects at a concurrency, names the only credentials it needs in its
own environment, says where its per-second progress comes from), after the copy it *reads
the outcome* (how many bytes and objects it moved and by whose count, its retries and
errors, its series), and at any time later it *recounts its evidence*: the bytes and
seconds of a record, recomputed from the raw files kept beside it (its own log, and the
destination's listing where the log has no sizes or times). Timing, the timeout, progress
lines, redaction, the series file and the record are
:func:`cloudbench.measure.copy.measure`'s, the same for every client.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cloudbench.binaries import Binary, BinaryError, find, version_or_none
from cloudbench.campaign.clients import objects_at_once
from cloudbench.measure.arrival import MOVED_FROM_LISTING, read_listing

if TYPE_CHECKING:
    from cloudbench.measure.series import Point

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


# What said an Evidence's seconds: each has its own clock and resolution, so a checker
# (cloudbench.report.trace) judges each by its own window.
TIMED_BY_LOG_STAMPS = "log time stamps"  # the time stamp of the client's last log line
TIMED_BY_OBJECT_SECONDS = "per-object seconds"  # the client's own seconds per object, added
TIMED_BY_LISTING = "listing"  # the destination's time of the last object written
TIMED_BY_SERIES = "series"  # the destination sampled every second


@dataclass(frozen=True)
class Evidence:
    """A record's bytes and seconds recomputed from the raw files its client left beside it
    (``paths.transfer_log``, ``paths.listing``), so a row can be traced to what the client
    and the destination said."""

    bytes: int | None  # None: the evidence does not say
    objects: int | None
    seconds: float | None  # from the copy's start to its last byte, by the evidence's clock
    source: str  # which files said it
    timed_by: str | None = None  # what said the seconds (TIMED_BY_*); None: nothing did
    resolution_s: float = 0.0  # how far the seconds may be off by the evidence's own rounding
    # when the evidence saw the client exit, on the same clock (the series' last sample, taken
    # as the client exits); None: it did not see it. With it, the time a client ran on after
    # its last byte is measured rather than assumed (a Python client's teardown on a starved
    # node took 2.4 s in CI)
    exited_s: float | None = None


@dataclass(frozen=True)
class Kept:
    """The raw files kept beside one record (``campaign.paths``), and its start."""

    log: Path  # the client's own output or log (paths.transfer_log)
    listing: Path | None  # what the copy left at its destination (paths.listing)
    series: Path | None  # the per-second series (paths.series)
    started_epoch: float


# An S3 store keeps an object's time to the second: the last object of a short copy may
# seem to land this much before the copy's start
LISTING_CLOCK_S = 1.0


def timed_evidence(kept: Kept) -> Evidence:
    """The listing's bytes and seconds; where its times are the source's (a download by a
    tool that sets each file's time to the object's), the seconds at which the series
    (the destination sampled every second) first held those bytes."""
    ev = listing_evidence(kept.listing, kept.started_epoch)
    if ev.seconds is not None or ev.bytes is None or kept.series is None:
        return ev
    from cloudbench.measure import series

    points = series.read(kept.series) if kept.series.exists() else []
    whole = [t for t, moved in points if moved >= ev.bytes]
    if not whole:
        return ev
    return replace(
        ev,
        seconds=whole[0],
        source=f"{ev.source}; seconds from {kept.series.name}",
        timed_by=TIMED_BY_SERIES,
        exited_s=whole[-1] if whole[-1] == points[-1][0] else None,
    )


def listing_evidence(listing: Path | None, started_epoch: float) -> Evidence:
    """Bytes and objects of the destination's listing, and seconds from the copy's start to
    when its last object was written (the store's clock after an upload, to the second on
    S3; this node's after a download). A tool that keeps the source's times (rclone, and
    a store that shows them as its own) leaves times from before the copy: then the
    listing has no seconds to say (None), rather than a wrong number."""
    if listing is None or not listing.exists():
        return Evidence(None, None, None, "no listing")
    from cloudbench.data.checksums import is_digest_note

    # a group's download listing once held its clients' digest notes (written after the
    # timed copy): cloudbench's files, not the copy's
    entries = {n: e for n, e in read_listing(listing).items() if not is_digest_note(n)}
    times = [t for _size, t in entries.values() if t is not None]
    last = max(times) - started_epoch if times else None
    kept_source_times = last is not None and last < -LISTING_CLOCK_S
    return Evidence(
        bytes=sum(size for size, _t in entries.values()),
        objects=len(entries),
        seconds=None if kept_source_times else last,
        source=f"listing ({listing.name})"
        + (": its times are the source's, not the copy's" if kept_source_times else ""),
        timed_by=None if kept_source_times or last is None else TIMED_BY_LISTING,
    )


class Client(Protocol):
    name: str

    def check(self, remote_prefixes: Sequence[str], template: str | None) -> list[str]:
        """Before any data is made (a site's preflight): whether this client can run here
        against these remotes, one line per problem; no network."""
        ...

    def plan(self, job: CopyJob) -> Plan:
        """Find and version the binary, build the copy's command; raise ClientError with
        one line when it cannot (missing, too old, a wrong template, not an S3 remote)."""
        ...

    def outcome(self, job: CopyJob, plan: Plan, run: Run) -> Outcome:
        """Read what the copy did (its log, the destination), after it exited."""
        ...

    def evidence(self, kept: Kept) -> Evidence:
        """The copy's bytes and seconds recomputed from the files kept beside its record:
        its raw log, the destination's listing and the series, all free of credentials."""
        ...

    def network_cause(self, text: str) -> str | None:
        """The last network failure (refused, reset, timed out, no route) that ``text``, a
        failed copy's error, names in this client's words or in rclone's (a bookkeeping
        call's, a stalled copy's listing), or None: only such a failure counts against the
        store (cloudbench.site.breaker); any other is an answer."""
        ...

    def user_command(self, copy: CopyRequest) -> list[str]:
        """The copy as a user would type it to move their own data the way it was measured:
        bash lines, each word shlex-quoted; set-up lines and ``#`` comments first (a config
        file written with ``printf``, the variables that carry the credentials named), the
        copy itself last. Several lines where a client's settings are not flags (the AWS
        CLI's config file). The same settings as :meth:`plan`'s command line (the module's
        own builder), without cloudbench's instrumentation (logs, stats, machine-readable
        output, object lists: the whole directory, ``copy.files`` ignored), the binary by
        its plain name; never a credential's value. A remote this environment does not
        define gets a marked placeholder (``<name-endpoint>``) and a comment, not an error."""
        ...


class ClientError(RuntimeError):
    """A client cannot take this copy: one line that says why and what to do."""


@dataclass(frozen=True)
class CopyRequest:
    """What a client's command line is built from: the timed copy of ``files`` (names
    relative to the local directory and to the remote prefix; None: everything under it)
    between a local directory and ``name:bucket/prefix``, ``concurrency`` objects at once
    (``streams``: parts of one object at once, where the tool can). Small files the command
    needs go to ``workdir``. ``access`` and ``binary``: given, not looked up (tests).

    The rest shapes a user's command (:meth:`Client.user_command`), where the client takes
    the setting from the request rather than from a :class:`CopyJob`: the strategy, the
    campaign's rclone flags and multi-thread sizes, the remote's rclone backend (None:
    asked of rclone), and ``instrumented`` False: without what cloudbench reads back (a
    log, machine-readable output)."""

    src: str
    dst: str
    concurrency: int
    workdir: Path
    files: Sequence[str] | None = None
    access: Any = field(default=None, repr=False)
    binary: str | None = None
    template: str | None = None
    streams: int = 1
    strategy: str = "plain"
    flags: Sequence[str] = ()
    multi_thread_cutoff: int = 0
    multi_thread_chunk_size: int = 0
    backend: str | None = None
    instrumented: bool = True
    direction: str | None = None  # None: from which side is a named remote (sides)


def sides(src: str, dst: str) -> tuple[str, str, str]:
    """(direction, local directory, remote path) of a copy between a directory and a remote."""
    from cloudbench.campaign.clients import is_remote

    if is_remote(dst) and not is_remote(src):
        return "upload", src, dst
    if is_remote(src) and not is_remote(dst):
        return "download", dst, src
    raise ClientError(f"copy {src!r} -> {dst!r}: one side must be local, the other name:bucket")


@dataclass(frozen=True)
class ToolCommand:
    """One timed copy: its argv, the variables its process needs on top of the caller's
    environment (credentials live only here), and small files to write before it runs.

    ``remove_env``: the caller's variables the tool must not see (an AWS profile that would
    override the remote's keys). ``whole_environment``: the tool sees every variable of
    the caller (the user's own native client), not only what it needs."""

    tool: str
    argv: list[str]
    env: dict[str, str] = field(repr=False)
    files: dict[Path, str] = field(default_factory=dict)
    remove_env: tuple[str, ...] = ()
    whole_environment: bool = False

    def write_files(self) -> None:
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's full environment: ``base`` (default os.environ) plus ours.

        A client gets only what it needs: every ``RCLONE_CONFIG_*`` variable, every rclone
        credential (by rclone's own metadata: ``RCLONE_B2_KEY``...) and other clouds'
        credentials (``AZURE_*``, ``GOOGLE_*``, ``OS_PASSWORD``...) are dropped; PATH,
        HOME, locale, proxies, TMPDIR and the user's AWS_* variables stay. The ``command``
        tool keeps the whole environment: it is the user's own native client (azcopy,
        uplink, globus-url-copy), which may need the user's own variables and
        credentials, and cloudbench cannot know which; its template is refused if it holds
        a credential, and its output is redacted like every tool's.
        """
        from cloudbench.campaign.secrets import without_credentials

        if self.whole_environment:
            env = dict(os.environ if base is None else base)
        else:
            env = without_credentials(base)
        for name in self.remove_env:
            env.pop(name, None)
        env.update(self.env)
        return env


def file_line(path: Path, text: str) -> str:
    """The bash line that writes ``text`` to ``path`` (a client's small config file), byte
    for byte: ``printf '%s\\n' LINE... > PATH``."""
    if text.endswith("\n"):
        argv = ["printf", "%s\\n", *text.removesuffix("\n").split("\n")]
    else:
        argv = ["printf", "%s", text]
    return f"{shlex.join(argv)} > {shlex.quote(str(path))}"


def shell_lines(cmd: ToolCommand) -> list[str]:
    """``cmd`` as bash lines a user types: its small files written first, then its argv
    with its variables in front (scoped to that one command). A variable that holds a
    credential is left out, whatever it holds: the user has their own. The variables the
    measured copy did not see are unset for it too (``env -u``): an ``AWS_PROFILE`` in the
    user's shell would make the AWS CLI look for that profile in the config file the line
    writes, which holds only the measured settings."""
    from cloudbench.campaign.secrets import secret_variable

    lines = [file_line(path, text) for path, text in cmd.files.items()]
    unset = ["env", *(word for name in cmd.remove_env for word in ("-u", name))]
    env = [
        f"{name}={shlex.quote(value)}"
        for name, value in cmd.env.items()
        if not secret_variable(name, cmd.env)
    ]
    front = [shlex.join(unset)] if cmd.remove_env else []
    return [*lines, " ".join([*front, *env, shlex.join(cmd.argv)])]


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
    an upload is counted by the listing after the copy (``cloudbench.measure.arrival``).

    A module declares its ``binary`` (how it is found and versioned) and builds its
    command line (:meth:`command`); planning, the outcome and the preflight check are here."""

    name = "external"
    binary: Binary | None = None  # None: the command line names its own executable
    backend: str | None = None  # the protocol it speaks, for the record (s3)
    # how the client names a network failure, where not as Go does (s5cmd, rclone)
    network_words: re.Pattern[str] | None = None

    def network_cause(self, text: str) -> str | None:
        # here, not at the top: rclone's log parser is for the transfers that read it; a
        # probe or a preflight, which only load a client's access, start faster without it
        from cloudbench.measure.rclonelog import network_cause as go_network_cause

        own = self.network_words.findall(text) if self.network_words is not None else []
        return own[-1] if own else go_network_cause(text)

    def command(self, copy: CopyRequest) -> ToolCommand:
        """The timed copy's command line, environment and small files."""
        raise NotImplementedError

    def find(self) -> str:
        """This client's binary (its override variable, where ``make`` installs it, PATH)."""
        if self.binary is None:
            raise ClientError(f"{self.name}: its command line names its own executable")
        try:
            return find(self.binary)
        except BinaryError as err:
            raise ClientError(str(err)) from None

    def version(self, binary: str) -> str | None:
        return version_or_none(self.binary, binary) if self.binary else None

    def check(self, remote_prefixes: Sequence[str], template: str | None) -> list[str]:
        try:
            self.find()
        except ClientError as err:
            return [str(err)]
        return []

    def evidence(self, kept: Kept) -> Evidence:
        """No timed, machine-readable log: the destination's listing (and series) say it."""
        return timed_evidence(kept)

    def plan(self, job: CopyJob) -> Plan:
        # what the client honours (campaign.clients.objects_at_once): its argv and the
        # record's columns say the objects it moves at once, not a knob value it overrides
        conc = objects_at_once(self.name, max(1, job.threads))
        cmd = self.command(
            CopyRequest(
                job.src,
                job.dst,
                concurrency=conc,
                workdir=job.workdir,
                files=list(job.objects),
                template=job.template,
            )
        )
        version = self.version(cmd.argv[0])
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
                "backend": self.backend,
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
        )
