"""The site's copy slot: at most one timed copy at a time per site scratch, whatever the
scheduler or its status command believes.

Snakemake's ``network=1`` resource keeps a run's transfers apart only as long as it knows
which jobs still run: a status command that wrongly says ``failed`` frees the resource while
the copy goes on, and the next transfer would overlap it (both rates wrong). So the timed
copy itself (one client, or the whole group of N clients) holds an exclusive lock on a file
in the site's scratch, which every job of the site shares; a second transfer job waits for
it, bounded by its own copy timeout, and its row says how long (``waited_for_slot_s``,
never part of the copy's ``seconds``).

The lock is a POSIX record lock (``fcntl.lockf``): the kernel (or the shared filesystem's
lock manager) releases it when its holder dies, even by SIGKILL or a walltime kill, so a dead
job never blocks the site. Which shared filesystems honour it across nodes: docs/hpc-sites.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cloudbench.records import host_info, utc_now

SLOT_FILE = ".cloudbench-copy-slot"
POLL_S = 0.25
#: a wait with no copy timeout to bound it (no walltime known): the profiles' transfer runtime
DEFAULT_WAIT_S = 12 * 3600.0
_BUSY = frozenset({errno.EACCES, errno.EAGAIN})


class SlotError(RuntimeError):
    """The copy cannot hold the slot, so it is not measured (the row says why)."""

    def __init__(self, message: str, waited_s: float = 0.0) -> None:
        super().__init__(message)
        self.waited_s = waited_s


class SlotTimeout(SlotError):
    """The slot stayed taken for the whole wait."""


@dataclass
class Held:
    """What taking the slot cost, for the copy's row."""

    waited_s: float
    path: Path


def slot_path(scratch: str | Path) -> Path:
    """The site's one slot file, in its scratch (the place every job of the site shares)."""
    return Path(scratch) / SLOT_FILE


def holder_of(path: Path) -> str:
    """Who holds the slot, as its holder wrote it (for a waiting job's message)."""
    try:
        who = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "unknown holder"
    return (
        f"{who.get('label', '?')} on {who.get('host', '?')} pid {who.get('pid', '?')}"
        + (f" (batch job {who['batch_job']})" if who.get("batch_job") else "")
        + f" since {who.get('since', '?')}"
    )


def _try_lock(fd: int) -> bool:
    """Take the lock if free; False if another process holds it."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in _BUSY:
            return False
        raise
    return True


def acquire(
    fd: int,
    wait_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Seconds waited for the lock on ``fd``; SlotTimeout past ``wait_s``."""
    start = clock()
    while not _try_lock(fd):
        waited = clock() - start
        if waited >= wait_s:
            raise SlotTimeout(f"waited {waited:.0f} s for the site's copy slot", waited)
        sleep(min(POLL_S, max(wait_s - waited, 0.0)))
    return clock() - start


@contextlib.contextmanager
def held(scratch: str | Path, timeout: float | None, label: str = "") -> Iterator[Held]:
    """Hold the site's copy slot for the block; wait for it at most ``timeout`` seconds.

    A scratch whose filesystem has no locks (``ENOLCK``, ``ENOSYS``...) raises SlotError:
    the guarantee cannot be given there, and the measurement fails, saying so, rather than
    risk an overlap nobody would see."""
    path = slot_path(scratch)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o664)
    try:
        wait_s = DEFAULT_WAIT_S if timeout is None else float(timeout)
        try:
            waited = acquire(fd, wait_s)
        except SlotTimeout as err:
            raise SlotTimeout(f"{err} (held by {holder_of(path)})", err.waited_s) from None
        except OSError as err:
            raise SlotError(
                f"cannot lock the site's copy slot {path}: {err.strerror} (a scratch without "
                "file locks: see docs/hpc-sites.md, 'One copy at a time')"
            ) from None
        who = {"label": label, "since": utc_now(), "pid": os.getpid(), **host_info()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(who).encode(), 0)
        yield Held(round(waited, 3), path)
    finally:
        os.close(fd)  # closing releases the lock (so does the holder's death)


def remaining(timeout: float | None, waited_s: float) -> float | None:
    """The copy's own time limit after the wait (the job's walltime was spent waiting)."""
    return None if timeout is None else max(timeout - waited_s, 1.0)
