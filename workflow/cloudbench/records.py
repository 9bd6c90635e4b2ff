"""Small records written by every job: who measured what, where, when, and how long it took.

Records are JSON files written atomically (temp file + rename) so an interrupted job never
leaves a half-written record that a rerun would trust.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cloudbench.processes import usable_cores

MB = 1_000_000  # rates are reported in MB/s = 10**6 bytes per second
# A job's short-lived small files (an object list, a manifest before it is published) go to
# memory where the node has it: removing a file on a disk file system waits for its journal,
# and while another job frees gigabytes (verify removing a download; an ext4 mounted with
# discard here) that cost a transfer job 0.3-3.5 s of its own time after the copy.
MEMORY_TMP = Path("/dev/shm")


def utc_now(epoch: float | None = None) -> str:
    """UTC wall-clock time (now, or ``epoch``) in ISO 8601 with a Z, comparable across
    centres; a record's ISO time and its epoch seconds are one reading of one clock."""
    when = datetime.now(UTC) if epoch is None else datetime.fromtimestamp(epoch, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: Where a batch system says which job (and step or task) a process belongs to: Slurm's,
#: then PBS's own names. Outside any batch job, a process runs on the submit host.
JOB_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID")
STEP_VARIABLES = ("SLURM_STEP_ID", "PBS_TASKNUM")
SUBMIT_HOST = "submit host"


def batch_job(env: Mapping[str, str]) -> tuple[str, str]:
    """The batch job and step (or PBS task) this process runs in, '' for none."""
    job = next((env[v] for v in JOB_VARIABLES if env.get(v)), "")
    step = next((env[v] for v in STEP_VARIABLES if env.get(v)), "") if job else ""
    return job, step


def ran_on(env: Mapping[str, str]) -> str:
    """Where a measurement ran, as the report names it: ``batch job <id>``, or the submit
    host (a login or data-transfer node, or this machine) where no batch job holds it."""
    job, _ = batch_job(env)
    return f"batch job {job}" if job else SUBMIT_HOST


def _hostname() -> str:
    """The kernel's node name, what ``hostname`` prints (socket.gethostname() is the same
    uname call, and its module costs a transfer job a few milliseconds to import)."""
    return os.uname().nodename


def host_info(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What makes rows from different centres comparable, and traceable to the scheduler:
    host name, usable cores, and the batch job (and step) the process ran in."""
    env = os.environ if env is None else env
    job, step = batch_job(env)
    return {
        "host": _hostname(),
        "node_cores": usable_cores(),
        "batch_job": job,
        "job_step": step,
        "ran_on": ran_on(env),
    }


def process_seconds(stat: str | None = None, uptime: float | None = None) -> float | None:
    """Seconds since this process started, from the kernel's own clock (/proc/self/stat,
    field 22, in clock ticks since boot): the interpreter's start-up is included, which a
    timer started in Python would miss. None where there is no /proc."""
    try:
        stat = stat if stat is not None else Path("/proc/self/stat").read_text()
        uptime = (
            uptime if uptime is not None else float(Path("/proc/uptime").read_text().split()[0])
        )
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # after the command name's ")"
        return round(uptime - ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def small_files_dir(candidate: Path = MEMORY_TMP) -> str | None:
    """Where a job's short-lived small files go: ``candidate`` (memory) when it is a
    writable directory, else None, the system's temporary directory (tempfile's choice)."""
    if candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK):
        return str(candidate)
    return None


_SMALL_FILES_RE = re.compile(r"^cloudbench-[a-z]+-(\d+)-(\d+)-")


def _pid_namespace() -> str:
    """This process's pid namespace (its inode), so that a pid is read in the namespace
    it was taken in: jobs in containers of their own share /dev/shm but not their pids."""
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return "0"


def _remove_orphans(root: Path, namespace: str) -> None:
    """Remove the small-files folders of jobs on this host that are gone (SIGKILL, the
    out-of-memory killer: nothing of theirs ran to remove them), this user's and this pid
    namespace's only; a pid that runs again (reused) keeps its folder until it ends."""
    for folder in root.glob("cloudbench-*"):
        m = _SMALL_FILES_RE.match(folder.name)
        if not m or m.group(1) != namespace:
            continue
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(m.group(2)), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # not ours to ask about, or gone already
            continue


@contextmanager
def small_files(purpose: str) -> Iterator[Path]:
    """A private folder for a job's short-lived small files (an object list, a manifest
    before it is published), in memory where it can be (:func:`small_files_dir`), removed
    when done. Its name carries the job's pid namespace and pid, so the next job on the host
    removes one a killed job left behind (a user found them in /dev/shm after a SIGKILL)."""
    where = small_files_dir()
    namespace = _pid_namespace()
    _remove_orphans(Path(where or tempfile.gettempdir()), namespace)
    prefix = f"cloudbench-{purpose}-{namespace}-{os.getpid()}-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=where) as tmp:
        yield Path(tmp)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict[str, Any]:
    with open(path) as fh:
        return json.load(fh)


def clip_tail(text: str, limit: int = 300) -> str:
    """The end of a long tool message for a record or a log line: cut at a word boundary
    and marked, so an error never begins mid-word ("eded maximum number of attempts")."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    space = cut.find(" ")
    return "..." + (cut[space + 1 :] if 0 <= space < limit // 3 else cut)


def clip_middle(text: str, limit: int = 300) -> str:
    """A long message for one line: its head (what happened, as cloudbench words it) and its
    tail (the tool's last word: ``dial tcp ...: connection refused``), cut at word
    boundaries with `` ... `` between. A user read ``(...s without progress: dial tcp ...``,
    the cause clipped away with the head."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    keep = (limit - 5) // 2
    head, tail = text[:keep], text[-keep:]
    head = head[: head.rfind(" ")] if " " in head[keep // 2 :] else head
    tail = tail[tail.find(" ") + 1 :] if " " in tail[: keep // 2] else tail
    return f"{head} ... {tail}"


def first_few(items: Sequence[object], sep: str = ", ", most: int = 3) -> str:
    """The first ``most`` items for a message, then how many more: a long list of chunks or
    records would bury the line it is part of."""
    more = f" (and {len(items) - most} more)" if len(items) > most else ""
    return sep.join(str(i) for i in items[:most]) + more


# Statuses that are findings about the data, not a copy that went wrong: the record is kept
# as found, and a rerun does not measure it again (``--forcerun`` does); ``failed`` ones are.
KEPT_AS_FOUND = ("corrupt", "unverified")


def copy_status(error: str | None, corrupt: bool = False) -> str:
    """A copy's status: ``ok``; ``corrupt`` where the client's own check found that the
    bytes it delivered are not the source's (its error says so); else ``failed``."""
    if not error:
        return "ok"
    return "corrupt" if corrupt else "failed"


def rate_mb_s(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / MB if seconds > 0 else float("nan")


class StepTimer:
    """Times one non-transfer step; ``nbytes`` is set by the step to what it processed.

    A plain class, not a dataclass: this module is below every job, and a job that makes no
    dataclass of its own (``status``) then never imports dataclasses (and inspect with it)."""

    def __init__(
        self,
        step: str,
        started_utc: str | None = None,
        nbytes: int = 0,
        seconds: float = 0.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.step = step
        self.started_utc = utc_now() if started_utc is None else started_utc
        self.nbytes = nbytes
        self.seconds = seconds
        self.extra: dict[str, Any] = {} if extra is None else extra

    def record(self, **context: Any) -> dict[str, Any]:
        return {
            "step": self.step,
            **context,
            **self.extra,
            "bytes": self.nbytes,
            "started_utc": self.started_utc,
            "seconds": round(self.seconds, 6),
            # a step that read nothing (it reused a digest) has no rate to report
            "mb_per_s": round(rate_mb_s(self.nbytes, self.seconds), 3) if self.nbytes else None,
            **host_info(),
        }


@contextmanager
def timed_step(step: str) -> Iterator[StepTimer]:
    timer = StepTimer(step)
    t0 = time.perf_counter()
    yield timer
    timer.seconds = time.perf_counter() - t0
