"""Reading a run's terminal as a person does: its measurement lines
(cloudbench.site.terminal.measurement_line), each with what it names and its rate."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_MEASURED = re.compile(
    r"^(?P<site>\S+): (?P<direction>upload|download) (?P<remote>\S+) (?P<layout>\S+) "
    r"r(?P<repeat>\d+)(?: (?P<setting>\S+))?: (?P<said>.*)$"
)
_RATE = re.compile(r" = (?P<rate>[0-9.]+) MB/s, (?P<status>\w+)")


def measurement_lines(text: str) -> list[dict[str, Any]]:
    """Every measurement line of a terminal's text: site, direction, remote, layout,
    repeat (int), setting, what it said, and its rate (MB/s, None for a transfer not ok)."""
    found = []
    for line in text.splitlines():
        if m := _MEASURED.match(line):
            row: dict[str, Any] = m.groupdict()
            row["repeat"] = int(row["repeat"])
            rate = _RATE.search(row["said"])
            row["rate"] = float(rate["rate"]) if rate else None
            row["line"] = line
            found.append(row)
    return found


_FULL_LOG = re.compile(r"; full log: (?P<path>\S+)$", re.MULTILINE)


def full_log(workdir: Path, text: str) -> str:
    """The run's full log (``.snakemake/log``), which its terminal ``text`` names in its
    summary: Snakemake's own report of every job it ran; empty when it names none (no job
    ran)."""
    m = _FULL_LOG.search(text)
    return (workdir / m["path"]).read_text() if m else ""
