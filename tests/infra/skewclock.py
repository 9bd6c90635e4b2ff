"""A process whose wall clock is behind, for tests of clock offsets between nodes.

libfaketime (Debian's ``faketime`` package, installed by scripts/install-sysdeps.sh), preloaded
into a process, shifts what ``clock_gettime`` tells it: Python's ``time.time()`` reads the
shifted clock, as on a node whose NTP failed. Its monotonic clock is shifted by the same
constant: libfaketime 0.9.10 cannot leave it alone under Python >= 3.11, whose
``time.sleep`` then fails with EINVAL (``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``,
wolfcw/libfaketime#426), so durations within a process are unchanged, and that is all
cloudbench reads a monotonic clock for. Statically linked programs (rclone: Go) ignore the
preload and keep the real clock, which makes their logs a witness of real time.
"""

from __future__ import annotations

import glob


def libfaketime() -> str | None:
    """The library's path on this machine (any multiarch directory), or None."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    return found[0] if found else None


def faked_clock_env(seconds_behind: str) -> dict[str, str]:
    """The environment that sets a process's wall clock ``seconds_behind`` seconds behind
    (a number, or a shell variable's ``$name`` for a script to expand)."""
    lib = libfaketime() or "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
    return {"LD_PRELOAD": lib, "FAKETIME": f"-{seconds_behind}"}
