"""The one timed copy, for every client.

The wall clock starts just before the client starts and stops when it exits, so the rate
includes everything a user would wait for; the client's own numbers feed only the series
and the accounting of what moved. Everything that is not the client's business is here,
the same for all of them: the start barrier of a group, progress lines in the job log, the
timeout (the client and everything it started are ended, and the copy fails with how long
it had), redaction of its output, the series file and the record.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cloudbench.campaign.paths import evidence as evidence_path_of
from cloudbench.campaign.paths import live_log
from cloudbench.campaign.secrets import redact, secret_values
from cloudbench.measure import evidence, record, series
from cloudbench.measure.clients import load
from cloudbench.measure.clients.base import (
    PROGRESS_FROM_DESTINATION,
    PROGRESS_FROM_LOG,
    ClientError,
    CopyJob,
    Plan,
    Run,
)
from cloudbench.measure.progress import (
    LogTail,
    Progress,
    human_seconds,
    progress_interval,
    progress_of,
)
from cloudbench.processes import die_with_parent, kill_tree
from cloudbench.records import utc_now

SAMPLE_INTERVAL_S = 1.0  # a destination's bytes, every second: the series of a download
STALL_CHECK_S = 2.0  # how often a running copy is checked for a stall on a dead store


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


AFTER_COPY_SAFETY_S = 15.0  # of the margin, kept for writing the record and exiting


def after_copy_s(walltime_min: float | None, copy_s: float | None) -> float | None:
    """Seconds the steps after the copy (the listing of what arrived, the manifest) share:
    the margin the copy's timeout leaves before the walltime, less a little for the record
    itself; None without a walltime (each step then has its own patience)."""
    if not walltime_min or copy_s is None:
        return None
    return max(1.0, float(walltime_min) * 60 - copy_s - AFTER_COPY_SAFETY_S)


TIMED_OUT = record.TIMED_OUT


def timed_out_error(timeout: float) -> str:
    return f"{TIMED_OUT} {timeout:g} s (copy_timeout, or the job's walltime less a margin)"


def stalled_error(stall_s: float, cause: str) -> str:
    """A copy ended because the store stopped answering: the network cause comes last, so
    the breaker (cloudbench.site.breaker) counts it as the store's failure."""
    return (
        f"the store stopped answering: nothing moved for {stall_s:g} s and the store did "
        f"not answer (store_down.stall); last: {cause}"
    )


# What asks the store, apart from the copy, whether it answers: its network cause, or None.
AskStore = Callable[[], str | None]


class _Stall:
    """Whether a running copy has stalled on a dead store: nothing moved for ``stall_s``
    seconds, and either its log names a network failure or a listing of the store, asked
    then (``ask``, in a thread of its own: the copy's clock is not held up by it), fails
    for one. Only a client whose progress we can see (rclone's stats, a download's
    destination) can be judged; the others run to their timeout.

    Why not rclone's own patience: it retries a dead store for about 8 minutes (retries x
    low-level retries, each with a pacer), a whole batch job's worth of nothing. Why the
    listing: the S3 SDK retries the request in flight silently, so the first network error
    reaches rclone's log about 2 minutes after the store died (126 s in the suite), twice
    the stall limit a campaign sets. A store that answers the listing is slow, not dead:
    the copy goes on, and is asked about again after another ``stall_s`` of nothing."""

    def __init__(self, stall_s: float | None, t0: float, ask: AskStore | None = None) -> None:
        self.stall_s = stall_s
        self.bytes = -1
        self.moved_at = t0
        self.ask = ask
        self.asked_at: float | None = None
        self._answers: list[str | None] = []
        self._asking: threading.Thread | None = None

    def cause(self, tail, sampler, now: float) -> str | None:
        if not self.stall_s or (tail is None and sampler is None):
            return None
        if tail is not None:
            done = tail.samples[-1].bytes if tail.samples else 0
        else:
            done = sampler.points[-1][1] if sampler.points else 0
        if done > self.bytes:
            self.bytes, self.moved_at = done, now
            return None
        if now - self.moved_at < self.stall_s:
            return None
        if tail is not None and tail.network_error:
            return tail.network_error
        return self._listing(now)

    def _listing(self, now: float) -> str | None:
        """The network cause a listing of the store found, once it has come back and when
        nothing moved since it was asked; it is asked at most once a ``stall_s``."""
        if self.ask is None:
            return None
        if self._asking is None:
            if self.asked_at is not None and now - self.asked_at < self.stall_s:
                return None
            self.asked_at, self._answers = now, []
            ask, answers = self.ask, self._answers

            def timed() -> None:
                started = time.perf_counter()
                found = ask()
                answers.append((found, time.perf_counter() - started))

            self._asking = threading.Thread(target=timed, name="cloudbench-stall", daemon=True)
            self._asking.start()
            return None
        if self._asking.is_alive():
            return None
        self._asking = None
        found, took = self._answers[0] if self._answers else (None, 0.0)
        if found is None or self.moved_at > self.asked_at:
            return None  # it answered, or the copy moved while it was asked
        # how long the listing took is part of how long the copy ran on: said, so that the
        # record accounts for every second between its last progress and its end
        return (
            f"a listing of the store after {self.stall_s:g} s without progress, "
            f"failed in {took:.1f} s: {found}"
        )


def command_line(argv: Sequence[str], secrets: Sequence[str]) -> str:
    """The copy's command as one shell line for its record and job log: what ``transfers``,
    ``connections`` and the other concurrency columns were set by (the binary by name;
    credentials never reach a command line, and are redacted if one did)."""
    return redact(shlex.join([Path(argv[0]).name, *argv[1:]]), secrets)


def tree_bytes(root: Path) -> int:
    """Bytes written under ``root`` so far: allocated blocks, capped at the apparent size,
    so a file a client pre-sized (seeked to its end, parts still arriving) counts only what
    is really there."""
    total = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue  # renamed or removed between listing and stat
            total += min(st.st_size, st.st_blocks * 512)
    return total


def evidence_off() -> bool:
    """``CLOUDBENCH_EVIDENCE=off``: no evidence sampled beside the copy (``make bench``'s
    evidence-weight row times the same copy without it; a user need never set it)."""
    return os.environ.get("CLOUDBENCH_EVIDENCE", "").lower() == "off"


def kept_evidence(path: Path) -> Path | None:
    """Where this copy's evidence goes, or None with ``CLOUDBENCH_EVIDENCE=off``; then an
    earlier attempt's file is removed, so that it is never read as this copy's."""
    if evidence_off():
        path.unlink(missing_ok=True)
        return None
    return path


class _ExitWatch:
    """Wakes the moment a process exits (a pidfd, polled): ``Popen.wait(timeout)`` sleeps in
    steps of up to 50 ms, which a timed copy of a second would count as its own."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        try:
            self._fd: int | None = os.pidfd_open(proc.pid)
            self._poll = select.poll()
            self._poll.register(self._fd, select.POLLIN)
        except (AttributeError, OSError):  # not Linux >= 5.3: Popen's own polling
            self._fd = None

    def wait(self, timeout: float) -> bool:
        """True once the process has exited (and is reaped), False after ``timeout`` s."""
        if self._fd is not None and not self._poll.poll(max(0, int(timeout * 1000))):
            return False
        try:
            self.proc.wait(timeout=None if self._fd is not None else timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Sampler:
    """A directory's total bytes every second while a download runs, on the copy's clock."""

    def __init__(self, root: Path, t0: float) -> None:
        self.root, self.t0 = root, t0
        self.points: list[series.Point] = [(0.0, tree_bytes(root))]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        self.points.append((time.perf_counter() - self.t0, tree_bytes(self.root)))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


@dataclass(frozen=True)
class Watch:
    """What the measuring side watches while a client runs: its log (rclone's stats), or a
    download's destination, and how many bytes the copy should reach."""

    label: str
    expected_bytes: int
    log_path: Path | None = None
    destination: Path | None = None
    # where the client's own output goes as it is written (a client whose output is its
    # log), with a second name (paths.live_log) so that a job killed outright leaves it for
    # the rerun to keep; None: a private temporary file
    output_path: Path | None = None


@dataclass(frozen=True)
class Finished:
    returncode: int
    seconds: float
    start_epoch: float
    output: str
    points: tuple[series.Point, ...]  # the destination's bytes, when it was sampled
    timed_out: bool
    stalled: str | None = None  # the network cause a stalled copy was ended on
    moved_last_s: float | None = None  # a stalled copy: when it last moved bytes (its clock)


@contextlib.contextmanager
def _output_file(path: Path | None) -> Iterator[IO[str]]:
    """The file a client's stdout and stderr go to while it runs: ``path`` (truncated, and
    given its second name at once) or an anonymous temporary file. Written as the client
    writes, so a job killed with SIGKILL leaves what its client had said."""
    if path is None:
        with tempfile.TemporaryFile("w+") as f:
            yield f
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    live_log(path).unlink(missing_ok=True)
    with path.open("w+") as f:
        with contextlib.suppress(OSError):  # a filesystem without hard links: no second name
            os.link(path, live_log(path))
        yield f


def _progress_line(watch: Watch, tail, sampler, t0: float) -> str:
    elapsed = time.perf_counter() - t0
    if tail is not None:
        tail.poll()
        return progress_of(watch.label, tail.samples, watch.expected_bytes, elapsed).line()
    if sampler is None:  # an upload by a client that reports nothing while it runs
        return f"{watch.label}: {human_seconds(elapsed)} elapsed (this client reports no progress)"
    done = sampler.points[-1][1] if sampler.points else 0
    rate = done / elapsed / 1e6 if elapsed > 0 else 0.0
    return Progress(watch.label, done, watch.expected_bytes, rate, elapsed).line()


def run(
    argv: Sequence[str],
    environ: Mapping[str, str] | None,
    watch: Watch,
    timeout: float | None = None,
    on_start: Callable[[int], object] | None = None,
    stall_s: float | None = None,
    ask_store: AskStore | None = None,
    evidence_path: Path | None = None,
) -> Finished:
    """Run a client timed by the wall clock from spawn to exit; every
    ``progress_interval()`` seconds print a progress line to the job log. Waiting wakes up
    the moment the client exits, so the clock is not stretched by the polling. Past
    ``timeout`` seconds the client and everything it started are ended, and so is one that
    stalled on a dead store (``_Stall``, which may ``ask_store``). ``on_start(pid)`` runs
    once it is spawned (tests read the process list there). With ``evidence_path``, what
    limited the copy is sampled beside it from outside the client (measure.evidence) and
    written there as it ends."""
    interval = progress_interval()
    tail = LogTail(watch.log_path) if watch.log_path is not None else None
    timed_out = False
    stalled: str | None = None
    with _output_file(watch.output_path) as captured:
        epoch = time.time()
        t0 = time.perf_counter()
        sampler = None
        if watch.destination is not None:
            watch.destination.mkdir(parents=True, exist_ok=True)
            sampler = _Sampler(watch.destination, t0)
        proc = subprocess.Popen(
            list(argv),
            env=None if environ is None else dict(environ),
            stdout=captured,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=die_with_parent,  # a killed job leaves no client moving data
        )
        witness = None if evidence_path is None else evidence.Sampler(proc.pid, t0, evidence_path)
        deadline = None if timeout is None else t0 + timeout
        exits = _ExitWatch(proc)
        stall = _Stall(stall_s, t0, ask_store)
        # the stall is judged every few seconds, progress printed every `interval`
        step = min(interval, STALL_CHECK_S) if stall_s else interval
        next_line = t0 + interval
        try:
            if on_start is not None:
                on_start(proc.pid)
            while True:
                now = time.perf_counter()
                if deadline is not None and now >= deadline:
                    timed_out = True
                    kill_tree(proc)
                    break
                wait = step if deadline is None else min(step, deadline - now)
                if exits.wait(wait):
                    break
                now = time.perf_counter()
                if deadline is not None and now >= deadline:
                    continue
                if tail is not None and stall_s:
                    tail.poll()
                if stalled := stall.cause(tail, sampler, now):
                    kill_tree(proc)
                    break
                if now >= next_line:
                    next_line = now + interval
                    print(_progress_line(watch, tail, sampler, t0), file=sys.stderr, flush=True)
        except BaseException:
            kill_tree(proc, grace_s=2.0)  # Ctrl-C: the client goes with the job
            raise
        finally:
            seconds = time.perf_counter() - t0
            exits.close()
            if sampler is not None:
                sampler.stop()
            if witness is not None:
                witness.stop(seconds)
        captured.seek(0)
        output = captured.read()
    points = tuple(sampler.points) if sampler else ()
    return Finished(
        proc.returncode,
        seconds,
        epoch,
        output,
        points,
        timed_out,
        stalled,
        stall.moved_at - t0 if stalled else None,
    )


def measure(
    job: CopyJob,
    client_name: str,
    *,
    keys: dict[str, Any],
    series_path: Path,
    label: str,
    ready: Callable[[], object] | None = None,
    timeout: float | None = None,
    stall_s: float | None = None,
    ask_store: AskStore | None = None,
) -> record.TransferRecord:
    """Run one timed copy by ``client_name`` and return its record (status ok or failed,
    never an exception). ``keys`` are the measurement's identity columns. ``ready`` is
    called after every preparation, right before the clock starts: the start barrier of a
    group of clients."""
    client = load(client_name)
    secrets = secret_values()
    epoch = time.time()
    started = utc_now(epoch)
    stalled_since: float | None = None
    plan: Plan | None = None
    try:
        plan = client.plan(job)
    except ClientError as err:
        error = redact(str(err), secrets)
    if plan is None:
        outcome, seconds, command, proc_code, version = None, 0.0, None, None, None
    else:
        plan.write_files()
        command = command_line(plan.argv, secrets)
        print(f"{label}: {command}", file=sys.stderr, flush=True)
        if ready is not None:
            ready()
        watch = Watch(
            label,
            job.expected_bytes,
            job.log_path if plan.progress == PROGRESS_FROM_LOG else None,
            job.local if plan.progress == PROGRESS_FROM_DESTINATION else None,
            job.log_path if plan.output_is_log else None,
        )
        done = run(
            plan.argv,
            plan.environ,
            watch,
            timeout,
            stall_s=stall_s,
            ask_store=ask_store,
            evidence_path=kept_evidence(Path(evidence_path_of(series_path))),
        )
        seconds, epoch = done.seconds, done.start_epoch
        started = utc_now(epoch)  # the copy's own start, the clock its seconds run on
        output = redact(done.output, secret_values(plan.environ) if plan.environ else secrets)
        if plan.output_is_log:  # rewritten in place, scrubbed (its second name follows)
            job.log_path.write_text(output)
        outcome = client.outcome(
            job,
            plan,
            Run(
                done.returncode,
                seconds,
                epoch,
                output,
                done.points,
                done.timed_out or bool(done.stalled),
            ),
        )
        if done.timed_out:
            error = timed_out_error(timeout)
        elif done.stalled and stall_s:
            error = stalled_error(stall_s, done.stalled)
            stalled_since = epoch + (done.moved_last_s or 0.0)
        else:
            error = outcome.error
        proc_code, version = done.returncode, plan.version
    if outcome is not None:
        series.write(series_path, outcome.points)
    else:
        series.write(series_path, ())
        if not job.log_path.exists():
            job.log_path.parent.mkdir(parents=True, exist_ok=True)
            job.log_path.write_text(error or "")
    return record.copied(
        keys,
        job,
        plan.columns if plan else None,
        outcome,
        started=started,
        epoch=epoch,
        seconds=seconds,
        error=redact(error, secrets) if error else None,
        corrupt=bool(outcome and outcome.corrupt and not done.timed_out and not done.stalled),
        stalled_since=stalled_since,
        exit_code=proc_code,
        version=version,
        command=command,
    )
