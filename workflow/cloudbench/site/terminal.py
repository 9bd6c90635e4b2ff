"""The terminal after a failure or Ctrl-C: one line per job that did not finish, then the
run's one summary line (rules/common.smk, ``say_how_it_stopped``); never a raw client log.

Snakemake reports a failed job in 10 to 20 lines: its inputs and outputs, the whole shell
command (a transfer's spec is JSON), the exception once more, and with ``show-failed-logs``
every log of the job in full: a transfer's client log is rclone's ``-vv`` JSON, 30 lines a
second into a copy and thousands an hour in, all printed above the summary by one Ctrl-C.
:func:`install` puts a filter on Snakemake's terminal handler only (its log file under
``.snakemake/log`` keeps every detail) that says each failed job in one line: the rule,
the job's own last word (the last line of its job log, which a cloudbench command ends
with: ``cloudbench upload: interrupted (Ctrl-C)``) and where its logs are.

What it reads of Snakemake is the logger plugins' interface (snakemake-interface-logger-
plugins: a record's ``event`` and the fields of a job error), and the name Snakemake gives
its terminal handler; :func:`install` says when it did not find it.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any

from snakemake_interface_logger_plugins.common import LogEvent

STREAM_HANDLER = "DefaultStreamHandler"  # snakemake.logging.LoggerManager's terminal handler
LAST_WORD_CHARS = 300
_TAIL_BYTES = 8192


def last_word(log: str | os.PathLike[str]) -> str | None:
    """The last line of a job log that is a person's headline, clipped: not a JSON log
    line, not an indented detail (``cloudbench status`` and ``preflight`` list what is
    wrong, indented, under one line that says it); None when there is none (no log yet)."""
    try:
        with open(log, "rb") as fh:
            start = max(0, fh.seek(0, os.SEEK_END) - _TAIL_BYTES)
            fh.seek(start)
            tail = fh.read().decode("utf-8", errors="replace").splitlines()[1 if start else 0 :]
    except OSError:
        return None
    lines = [ln for ln in tail if ln.strip() and not ln.lstrip().startswith("{")]
    heads = [ln for ln in lines if not ln[0].isspace()] or lines  # the details' own, at worst
    if not heads:
        return None
    said = heads[-1].strip()
    return said if len(said) <= LAST_WORD_CHARS else said[: LAST_WORD_CHARS - 3] + "..."


# How Python's CalledProcessError says a job's shell was ended by a signal: the shell itself
# ("died with <Signals.SIGKILL: 9>"), or the command it waited for (exit status 128 + N)
_DIED_WITH = re.compile(r"died with <Signals\.(SIG[A-Z0-9]+): \d+>")
_EXIT_STATUS = re.compile(r"non-zero exit status (\d+)")


def killed_by(message: str) -> str | None:
    """``killed by SIGKILL`` when Snakemake's report of a failed shell command says a signal
    ended it, else None. A job killed outright (``kill -9``, the out-of-memory killer) never
    writes a last word of its own: its log ends on a progress line, which alone reads as a
    job that failed while it copied."""
    if m := _DIED_WITH.search(message):
        name, said = m.group(1), f"killed by {m.group(1)}"
    elif (m := _EXIT_STATUS.search(message)) and 128 < int(m.group(1)) < 128 + signal.NSIG:
        try:
            name = signal.Signals(int(m.group(1)) - 128).name
        except ValueError:
            return None
        said = f"killed by {name} (exit status {m.group(1)})"
    else:
        return None
    return None if name == "SIGINT" else said  # Ctrl-C: the job's own last word says it


def job_error_line(
    rule: str, logs: Sequence[str], message: str | None = None, cause: str | None = None
) -> str:
    """One failed job in one line: its rule, how it ended where a signal ended it, what it
    said last, and where its logs are."""
    said = next((w for w in map(last_word, logs[:1]) if w), None)
    parts = [f"failed: {rule}"]
    if message:
        parts.append(str(message).replace("\n", " ")[:LAST_WORD_CHARS])
    if cause:
        parts.append(cause)
    if said:
        parts.append(said)
    where = f" (log: {', '.join(logs)})" if logs else ""
    return ": ".join(parts) + where


class OneLinePerFailedJob(logging.Filter):
    """On the terminal: each job error in one line; a group job's (one allocation for every
    transfer) in one line for the group, its jobs' own reports left out (Snakemake lists
    every job of the group, finished or not); and no traceback of a shell command that
    exited non-zero (its job's line follows)."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self.stream = stream
        # Snakemake reports a local job's failed shell command (the exception, whose text
        # says a signal) just before the job error: kept for that job's line
        self._cause: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        event = getattr(record, "event", None)
        if event == LogEvent.JOB_ERROR:
            if not getattr(record, "indent", False):  # indented: a job of a group's report
                self._say(_job_line(record.__dict__, self._cause))
            self._cause = None
            return False
        if event == LogEvent.GROUP_ERROR:
            jobs = getattr(record, "job_error_info", None) or []
            logs = [str(p) for p in getattr(record, "aux_logs", None) or []]
            rules = sorted({str(j.get("rule_name")) for j in jobs})
            self._say(job_error_line(f"group of {len(jobs)} jobs ({', '.join(rules)})", logs))
            return False
        if event == LogEvent.ERROR and "CalledProcessError in file" in record.getMessage():
            self._cause = killed_by(record.getMessage())
            return False
        return True

    def _say(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


def _job_line(info: dict[str, Any], cause: str | None = None) -> str:
    logs = [str(p) for p in info.get("log") or []]
    return job_error_line(f"rule {info.get('rule_name')}", logs, info.get("rule_msg"), cause)


def install(logger: logging.Logger) -> str | None:
    """Put :class:`OneLinePerFailedJob` on Snakemake's terminal handler; a line to print
    when there is none to put it on (Snakemake changed: the terminal then shows its own
    report of each failed job)."""
    for handler in logger.handlers:
        if handler.name == STREAM_HANDLER:
            if not any(isinstance(f, OneLinePerFailedJob) for f in handler.filters):
                stream = getattr(handler, "stream", None) or sys.stderr
                handler.addFilter(OneLinePerFailedJob(stream))
            return None
    return (
        f"cloudbench: no {STREAM_HANDLER} on Snakemake's logger: failed jobs are reported "
        "in Snakemake's own words"
    )
