"""The machine a bench ran on, for bench.md: CPU, memory, file system, tool versions."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path


def _page_reporting() -> str:
    order = Path("/sys/module/page_reporting/parameters/page_reporting_order")
    try:
        return f"on, blocks of 2^{order.read_text().strip()} pages"
    except OSError:
        return "not found"


def _mount_of(path: Path) -> dict[str, str]:
    best: dict[str, str] = {}
    path = path.resolve()
    with open("/proc/self/mounts") as fh:
        for line in fh:
            dev, mnt, fstype, opts = line.split()[:4]
            mnt = mnt.replace("\\040", " ")
            if (path == Path(mnt) or Path(mnt) in path.parents) and len(mnt) >= len(
                best.get("mount", "")
            ):
                best = {"device": dev, "mount": mnt, "fstype": fstype, "options": opts}
    return best


def _cmd_out(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def machine_info(work: Path) -> dict[str, str]:
    cpu = "?"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    mnt = _mount_of(work)
    import cryptography
    import xxhash

    from cloudbench.measure import rclone as rc

    return {
        "host": socket.gethostname(),
        "cpu": cpu,
        "cores": f"{os.cpu_count()} ({len(os.sched_getaffinity(0))} usable)",
        "ram": mem,
        "kernel": platform.release(),
        "free page reporting (virtio-balloon)": _page_reporting(),
        "bench dir": str(work),
        "filesystem": f"{mnt.get('fstype', '?')} on {mnt.get('device', '?')} mounted at "
        f"{mnt.get('mount', '?')} ({mnt.get('options', '?')})",
        "python": platform.python_version()
        + (
            " (PYTHONDONTWRITEBYTECODE set: every job compiles the package anew)"
            if os.environ.get("PYTHONDONTWRITEBYTECODE")
            else ""
        ),
        "cryptography / xxhash (libxxhash)": f"{cryptography.__version__} / {xxhash.VERSION} "
        f"({xxhash.XXHASH_VERSION})",
        "rclone": _cmd_out([rc.find_rclone(), "version"]),
        "xxh128sum": _cmd_out(["xxh128sum", "--version"]),
        "openssl": _cmd_out(["openssl", "version"]),
        "coreutils": _cmd_out(["split", "--version"]),
    }
