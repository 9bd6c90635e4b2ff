"""A job's processes and cores: the cores it may use, a child that dies with its parent,
and a tree of processes ended together.

Below every stage (the copy, the group of clients and the site's job environment all end
their children this way), so none of them has to import another's module for it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # every job's process imports this module; only a copy starts a client
    import subprocess

# A site's launcher template, which starts a group's clients one per node (measure.group
# reads it, site.jobenv checks a run has one where it needs it): named here, below both, so
# that the job environment every job's process imports need not import the group's module
LAUNCHER_ENV = "CLOUDBENCH_LAUNCHER"


def usable_cores() -> int:
    """Cores this process may run on (the batch job's allocation, not the node's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def die_with_parent() -> None:
    """In a child, before exec: end it (SIGTERM) when the process that started it dies.

    A job killed hard (SIGKILL, a lost node) would otherwise leave its clients and their
    rclone moving data, overlapping the rerun's measurement; SIGTERM lets rclone abort its
    multipart uploads. Linux only; elsewhere a no-op.
    """
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found, then theirs), from /proc.

    A tool started through a shell (a command template, a wrapper script) does its work in
    a grandchild; killing only the child would leave that one moving data. The tree is read
    rather than put in a process group of its own, so Ctrl-C at the terminal still reaches
    every process of the job, as rclone needs it to abort its multipart uploads."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


#: how long a client ended by us has to exit on SIGTERM (rclone aborts its multipart uploads
#: then) before SIGKILL
KILL_GRACE_S = 5.0


def kill_tree(proc: subprocess.Popen, grace_s: float = KILL_GRACE_S) -> None:
    """End ``proc`` and everything it started: SIGTERM (rclone aborts its multipart
    uploads on it), then SIGKILL for whatever is still there after ``grace_s``."""
    import signal
    import time

    tree = [proc.pid, *descendants(proc.pid)]
    for pid in reversed(tree):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
