"""What a run shows on the terminal: the campaign, not Snakemake's job banners.

Snakemake prints every job it starts (its inputs, outputs, wildcards, resources: a ``rule
all`` with hundreds of paths), so a 72-measurement campaign printed 2,915 lines and not one
rate; a failed job took 10 to 20 lines, its cause often 85 lines below. cloudbench's logger
plugin (``snakemake_logger_plugin_cloudbench``, set in profiles/default) hands every record
Snakemake logs to :class:`CampaignTerminal`, which says instead:

- a header when the first job starts: the campaign, its sites, how many measurements this
  run will make and how many are recorded already;
- one line per finished measurement, read from its record (the job's declared output) with
  the record reader every other step uses: site, direction, remote, layout, repeat, setting,
  size, seconds, rate and status, and for a download whether its verify step found the
  bytes intact (the line waits for that step, which runs right after it);
- a progress line every tenth of the measurements (every second one at most), with an
  estimate of the time left;
- each failed job in one line naming its cause (:func:`job_error_line`), once for the same
  words (an open breaker refuses every measurement of its store, each through a job of its
  own: the others are counted in the summary); Snakemake's own messages a user acts on
  (nothing to be done, an error with its text, a locked directory, the scheduler's "will
  exit after finishing currently running jobs"), each once;
- a summary when the run ends: what it measured and where the tables, the report and the
  run's full log are.

For N measurements that is about N + 20 lines with any executor: a batch job's own
Snakemake (the jobstep executor runs one inside each allocation) runs in Snakemake's remote
mode, which uses no logger plugin, so its job log keeps Snakemake's plain lines and no
header. The full log under ``.snakemake/log`` keeps every record, and
``--logger-cloudbench-full`` shows Snakemake's own terminal again.

What it reads of Snakemake is the logger plugins' interface only
(snakemake-interface-logger-plugins: a record's ``event`` and the fields each event carries).
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snakemake_interface_logger_plugins.common import LogEvent

from cloudbench.campaign import paths
from cloudbench.campaign.identity import KEYS, MeasurementId, keys_without
from cloudbench.measure import record as transfer
from cloudbench.measure.progress import human_seconds, result_line
from cloudbench.records import read_json

LAST_WORD_CHARS = 300
_TAIL_BYTES = 8192

# The workflow's rules the terminal speaks of (workflow/rules/transfer.smk, check.smk,
# aggregate.smk): a measurement is an upload or a download job; verify checks a download
DOWNLOAD = "download"
MEASURING = ("upload", DOWNLOAD)
VERIFY = "verify"
AGGREGATE = "aggregate"
#: the wildcards that name one copy (a download and its verify step share them): the
#: identity but the direction and what the layout and setting already say
COPY_KEYS = tuple(keys_without("direction", "tool", "strategy"))
#: a progress line after every this share of the measurements
PROGRESS_SHARE = 0.1
#: Snakemake's messages without an event of their own that a user needs, by how they start
#: (the scheduler repeats its stopping message for each job that ends after it: said once)
KEPT_INFO = (
    "Nothing to be done",
    "Report created",  # --report
    "Unlocked working directory",  # --unlock
    "Congratulations, your workflow is in a good condition",  # --lint
)
ONCE_INFO = ("Will exit after finishing currently running jobs",)
COMPLETE_LOG = "Complete log(s): "


# --- a failed job's line ---------------------------------------------------------------------


def last_word(log: str | os.PathLike[str]) -> str | None:
    """The last line of a job log that is a person's headline, clipped: not a JSON log
    line, not an indented detail (``cloudbench status`` and ``preflight`` list what is
    wrong, indented, under one line that says it). A headline that ends with a colon gets
    its first detail on the line too (``preflight failed at site up: rclone ... not
    found``), and how many more there are; None when there is none (no log yet)."""
    try:
        with open(log, "rb") as fh:
            start = max(0, fh.seek(0, os.SEEK_END) - _TAIL_BYTES)
            fh.seek(start)
            tail = fh.read().decode("utf-8", errors="replace").splitlines()[1 if start else 0 :]
    except OSError:
        return None
    lines = [ln for ln in tail if ln.strip() and not ln.lstrip().startswith("{")]
    heads = [i for i, ln in enumerate(lines) if not ln[0].isspace()]
    if not lines:
        return None
    if not heads:  # the details' own, at worst
        said = lines[-1].strip()
    else:
        said = lines[heads[-1]].strip()
        details = [ln.strip() for ln in lines[heads[-1] + 1 :]]
        if said.endswith(":") and details:
            more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
            said = f"{said} {details[0]}{more}"
    return clipped(said)


def clipped(text: str, most: int = LAST_WORD_CHARS) -> str:
    """``text`` in at most ``most`` characters, cut at a word's end ("... bac..." read as a
    word of its own)."""
    if len(text) <= most:
        return text
    head = text[: most - 4]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + " ..."


# How Python's CalledProcessError says a job's shell was ended by a signal: the shell itself
# ("died with <Signals.SIGKILL: 9>"), or the command it waited for (exit status 128 + N)
_DIED_WITH = re.compile(r"died with <Signals\.(SIG[A-Z0-9]+): \d+>")
_EXIT_STATUS = re.compile(r"non-zero exit status (\d+)")


# A dead store's account (site.breaker.State.describe): what it is and since when, then
# the failures, the last cause (its middle may be elided: "dial tcp ...: ... met by") and
# the measurement that met it, in parentheses; or cut short with its line (usercheck54 read
# one account whole twice at one site, its cause elided the second time)
STORE_DOWN = re.compile(
    r"(store \S+(?: \([^)]*\))? has not answered since \S+) "
    r"\(\d+ failure\(s\) in a row; the last, (?:.+? met by [^)]+\)|.* \.\.\.$)"
)

# Snakemake's closing words after failed jobs, which the failed jobs' lines and the
# summary say already (any other error, a workflow's own, is shown)
SAID_BY_THE_SUMMARY = (
    "Exiting because a job execution failed",
    "At least one job did not complete successfully",
)


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
        parts.append(clipped(str(message).replace("\n", " ")))
    if cause:
        parts.append(cause)
    if said:
        parts.append(said)
    where = f" (log: {', '.join(logs)})" if logs else ""
    return ": ".join(parts) + where


# --- a measurement's line, the header, progress and the summary -------------------------------


def measurement_line(rec: transfer.TransferRecord, verified: str | None = None) -> str:
    """``tursa: upload main plain r1 rclone-1xauto: 50.33 MB in 3.0 s = 16.8 MB/s, ok``,
    the line the job's log ends with (measure.progress.result_line) with its site, remote
    and setting always named; a download's verification after it (:func:`verification`)."""
    label = f"{rec.direction} {rec.remote} {rec.layout} r{rec.repeat} {rec.setting}"
    line = f"{rec.site}: {result_line(label, rec.as_json())}"
    return f"{line}, {verified}" if verified else line


def verification(verify_record: Mapping[str, Any] | None) -> str:
    """What a download's verify step found: ``verified``, ``CORRUPT (<first problem>)``,
    or that it is not known (the step failed, or the run ended before it)."""
    if verify_record is None:
        return "verification not known"
    if verify_record.get("status") == "ok":
        return "verified"
    problems = verify_record.get("problems") or []
    first = f" ({problems[0]}{' ...' if len(problems) > 1 else ''})" if problems else ""
    return f"{str(verify_record.get('status', 'not verified')).upper()}{first}"


def time_left(done: int, total: int, elapsed_s: float) -> float:
    """Seconds left at the pace so far (``elapsed_s`` for ``done`` of ``total``); nan
    before the first is done."""
    if done <= 0:
        return math.nan
    return elapsed_s / done * max(0, total - done)


def progress_line(done: int, total: int, failed: int, elapsed_s: float) -> str:
    """``cloudbench: 12 of 36 measurements (1 not ok), 3m10s so far, about 6m20s left``."""
    not_ok = f" ({failed} not ok)" if failed else ""
    return (
        f"cloudbench: {done} of {total} measurements{not_ok}, {human_seconds(elapsed_s)} so "
        f"far, about {human_seconds(time_left(done, total, elapsed_s))} left"
    )


def progress_due(done: int, total: int, share: float = PROGRESS_SHARE) -> bool:
    """Whether the ``done``-th measurement of ``total`` ends a tenth of them, and at least
    two since the last (not one line per measurement in a small campaign), and is not the
    last (the summary says that one)."""
    step = max(2, math.ceil(total * share))
    return 0 < done < total and done % step == 0


def counted(n: int, thing: str) -> str:
    """``1 upload``, ``3 uploads``."""
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def header_line(
    campaign: str | None, sites: Sequence[str], to_make: Mapping[str, int], recorded: int | None
) -> str:
    """``cloudbench: campaign demo at tesseract, tursa: 27 measurements to make (9 uploads,
    18 downloads), 0 recorded already``."""
    where = f"campaign {campaign}" if campaign else "this campaign"
    if sites:
        where += f" at {', '.join(sites)}"
    total = sum(to_make.get(r, 0) for r in MEASURING)
    kinds = ", ".join(counted(n, r) for r in MEASURING if (n := to_make.get(r, 0)))
    line = f"cloudbench: {where}: {counted(total, 'measurement')} to make"
    line += f" ({kinds})" if kinds else ""
    return line + (f", {recorded} recorded already" if recorded is not None else "")


def summary_line(
    made: int,
    not_ok: int,
    failed_jobs: int,
    results: str | None,
    log: str | None,
    same_again: int = 0,
    not_started: int = 0,
    kept: int = 0,
) -> str:
    """The run's last line of its own: what it measured (a measurement is made when its
    record is: one whose job failed before it recorded anything, a breaker's refusal say,
    ended before measuring, ``not_started``: among the stopped run's "not measured yet",
    which also counts those never tried), how many jobs failed
    (``same_again`` of them not shown, having said what one shown said), where the tables
    are, how the report is made, and the full log."""
    how = f" ({made - not_ok} ok, {not_ok} not ok)" if not_ok else " (all ok)" if made else ""
    parts = [f"cloudbench: {counted(made, 'measurement')} made in this run{how}"]
    if kept:  # a stopped run's, which this one published
        parts[0] += f", {kept} of them kept from a run that stopped (not measured again)"
    if not_started:
        parts.append(f"{not_started} ended before measuring (no record)")
    if failed_jobs:
        again = f" ({same_again} of them said the same as one above)" if same_again else ""
        parts.append(f"{counted(failed_jobs, 'job')} failed{again}")
    if results:  # only when the tables are there (aggregate ran, now or before)
        parts.append(
            f"tables in {results}; the report: the same command with --report {results}/report.html"
        )
    if log:
        parts.append(f"full log: {log}")
    return "; ".join(parts)


def results_of(job_paths: Sequence[str]) -> str | None:
    """The campaign's results folder named by a job's outputs and logs (campaign.paths: a
    site's files are under ``<results>/sites/``, a campaign-wide job's log under
    ``<results>/logs/``), None when none lies in it (a data file in scratch)."""
    for marker in (f"/{paths.SITES}/", "/logs/"):
        for p in job_paths:
            head, sep, _ = str(p).partition(marker)
            if sep and head:
                return head
    return None


def run_sites(results: str, since: float) -> list[str]:
    """The sites this run acts as: named by the run spec it wrote when it started
    (campaign.paths.run_spec, ``<site>+<site>.json``), the newest written since ``since``. A
    run of no site (the launcher's aggregation: ``.json``) acts as none (its header read
    "campaign c at .json")."""
    specs = [
        (p.stat().st_mtime, p)
        for p in Path(paths.run_spec(results, ["*"])).parent.glob("*.json")
        if p.stat().st_mtime >= since
    ]
    if not specs:
        return []
    return sorted(s for s in max(specs)[1].name.removesuffix(".json").split("+") if s)


def records_at(results: str, sites: Sequence[str]) -> int:
    """How many measurements the sites have a record of that a run keeps: a failed one is
    measured again, so it is among those to make, not among those recorded already (a
    rerun's header read '40 to make, 14 recorded already' for a campaign of 48)."""
    anything: dict[str, Any] = {k: "*" for k in KEYS}
    kept = 0
    for s in sites:
        for path in glob.glob(
            paths.transfer_record(results, MeasurementId(**anything | {"site": s}))
        ):
            try:
                with open(path) as fh:
                    kept += json.load(fh).get("status") != "failed"
            except (OSError, ValueError):  # being written: the run will say it
                continue
    return kept


# --- the terminal ---------------------------------------------------------------------------


@dataclass
class _Job:
    rule: str
    wildcards: dict[str, str]
    output: list[str]
    log: list[str]

    @property
    def copy(self) -> tuple[str, ...]:
        return tuple(str(self.wildcards.get(k, "")) for k in COPY_KEYS)


@dataclass
class CampaignTerminal:
    """The terminal's state through one run: fed every record Snakemake logs
    (:meth:`lines`), it returns the lines to print; :meth:`closing` gives the last ones."""

    clock: Callable[[], float] = time.monotonic
    started_wall: float = field(default_factory=time.time)
    to_make: dict[str, int] = field(default_factory=dict)
    jobs: dict[int, _Job] = field(default_factory=dict)
    results: str | None = None
    header_said: bool = False
    first_started: float | None = None
    made: int = 0
    not_ok: int = 0
    not_started: int = 0  # measurement jobs that failed before they recorded anything
    failed_jobs: int = 0
    waiting: dict[tuple[str, ...], transfer.TransferRecord] = field(default_factory=dict)
    said_once: set[str] = field(default_factory=set)
    same_again: int = 0  # failed jobs not shown: they said what one shown said
    kept: int = 0  # records a stopped run left, published by this one, not measured again
    stores_said: set[str] = field(default_factory=set)  # dead stores told in full (_brief)
    # jobs whose failure was said: Snakemake 9.20 reports a batch job's failure twice (the
    # executor's words, then the scheduler's), 9.27 once
    errored: set[int] = field(default_factory=set)
    log: str | None = None
    # Snakemake reports a local job's failed shell command (the exception, whose text says a
    # signal) just before the job error: kept for that job's line
    cause: str | None = None

    def lines(self, record: logging.LogRecord) -> list[str]:
        """The lines one record of Snakemake's adds to the terminal (most add none)."""
        return [self._brief(line) for line in self._lines(record)]

    def _brief(self, line: str) -> str:
        """A dead store's whole account (since when, the failures, the last cause, which
        measurement met it) on the first line that gives it; later lines name the store and
        since when, "as above" (usercheck53 read it whole on 8 lines of up to 488 characters)."""

        def once(m: re.Match[str]) -> str:
            if m.group(1) in self.stores_said:
                return f"{m.group(1)} (as above)"
            self.stores_said.add(m.group(1))
            return m.group(0)

        return STORE_DOWN.sub(once, line)

    def _lines(self, record: logging.LogRecord) -> list[str]:
        event = getattr(record, "event", None)
        info = record.__dict__
        if event == LogEvent.RUN_INFO:
            stats = info.get("stats") or {}
            self.to_make = {str(k): int(v) for k, v in stats.items()}
            return []
        if event == LogEvent.JOB_INFO:
            return self._started(info)
        if event == LogEvent.JOB_FINISHED:
            return self._finished(int(info.get("job_id", -1)))
        if event == LogEvent.JOB_ERROR:
            return self._job_error(info)
        if event == LogEvent.GROUP_ERROR:
            jobs = info.get("job_error_info") or []
            logs = [str(p) for p in info.get("aux_logs") or []]
            rules = sorted({str(j.get("rule_name")) for j in jobs})
            self.failed_jobs += 1
            return [job_error_line(f"group of {len(jobs)} jobs ({', '.join(rules)})", logs)]
        message = record.getMessage()
        if event == LogEvent.ERROR and "CalledProcessError in file" in message:
            self.cause = killed_by(message)
            return []
        if event == LogEvent.ERROR and message.startswith("RuleException"):
            return []  # a run: job's exception and traceback: the job's own line says it
        if any(said in message for said in SAID_BY_THE_SUMMARY):
            return []
        if event is None and record.levelno <= logging.INFO:
            return self._info(message)
        if event in (None, LogEvent.ERROR) and record.levelno >= logging.WARNING:
            return self._once(message) if message and message != "None" else []
        return []

    def _once(self, message: str) -> list[str]:
        """A message not said before (Snakemake repeats some for every job that ends)."""
        if message in self.said_once:
            return []
        self.said_once.add(message)
        return [message]

    def closing(self) -> list[str]:
        """The downloads whose verification never came, and the summary (none when no job
        ran: Snakemake said there was nothing to be done)."""
        out = [measurement_line(rec, verification(None)) for rec in self.waiting.values()]
        self.made += len(self.waiting)  # copied ok; whether intact is not known
        self.waiting.clear()
        if self.header_said:
            tables = self.results and Path(paths.table(self.results, "transfers")).exists()
            out.append(
                summary_line(
                    self.made,
                    self.not_ok,
                    self.failed_jobs,
                    self.results if tables else None,
                    self.log,
                    self.same_again,
                    self.not_started,
                    self.kept,
                )
            )
        return out

    # --- events ---

    def _info(self, message: str) -> list[str]:
        if message.startswith(COMPLETE_LOG):
            self.log = message.removeprefix(COMPLETE_LOG).strip()
            return []
        if message.startswith(KEPT_INFO):
            return [message]
        if message.startswith(ONCE_INFO):
            return self._once(message)
        return []

    def _started(self, info: Mapping[str, Any]) -> list[str]:
        job = _Job(
            str(info.get("rule_name")),
            {str(k): str(v) for k, v in (info.get("wildcards") or {}).items()},
            [str(p) for p in info.get("output") or []],
            [str(p) for p in info.get("log") or []],
        )
        self.jobs[int(info.get("jobid", -1))] = job
        if job.rule in MEASURING and self.first_started is None:
            self.first_started = self.clock()
        if self.results is None:
            self.results = results_of([*job.output, *job.log])
        if self.header_said:
            return []
        self.header_said = True
        sites = run_sites(self.results, self.started_wall - 1) if self.results else []
        recorded = records_at(self.results, sites) if self.results and sites else None
        campaign = Path(self.results).name if self.results else None
        return [header_line(campaign, sites, self.to_make, recorded)]

    def _finished(self, jobid: int) -> list[str]:
        job = self.jobs.pop(jobid, None)
        if job is None:
            return []
        if job.rule == VERIFY:
            rec = self.waiting.pop(job.copy, None)
            if rec is None:
                return []
            try:
                checked: dict[str, Any] | None = read_json(Path(job.output[0]))
            except (OSError, ValueError, IndexError):
                checked = None
            return self._measured(rec, verification(checked))
        if job.rule not in MEASURING or not job.output:
            return []
        try:
            rec = transfer.read(Path(job.output[0]))
        except (OSError, ValueError) as e:
            self.made += 1
            self.not_ok += 1
            return [f"{job.wildcards.get('site', '?')}: {job.rule}: no record ({e})"]
        if job.rule == DOWNLOAD and rec.status == "ok":
            self.waiting[job.copy] = rec  # said with its verification
            return []
        return self._measured(rec)

    def _measured(self, rec: transfer.TransferRecord, verified: str | None = None) -> list[str]:
        self.made += 1
        # a verification not known (its job failed: counted there) is not a finding
        if rec.status != "ok" or verified not in (None, "verified", verification(None)):
            self.not_ok += 1
        out = [measurement_line(rec, verified)]
        started = rec.started_epoch if isinstance(rec.started_epoch, int | float) else 0.0
        if 0 < started < self.started_wall - 1:  # published from the ledger (measure.ledger)
            self.kept += 1
            out[0] += f"; kept: measured at {rec.started_utc} by a run that stopped, not again"
        total = max(self.made + len(self.waiting), self.planned())
        if progress_due(self.made, total):
            elapsed = self.clock() - (self.first_started or self.clock())
            out.append(progress_line(self.made, total, self.not_ok, elapsed))
        return out

    def planned(self) -> int:
        """The measurements this run was to make (Snakemake's count of their jobs)."""
        return sum(self.to_make.get(r, 0) for r in MEASURING)

    def _job_error(self, info: Mapping[str, Any]) -> list[str]:
        cause, self.cause = self.cause, None
        if info.get("indent"):  # a job of a group's report: the group's line says it
            return []
        jobid = int(info.get("jobid", -1))
        if jobid >= 0 and jobid in self.errored:
            return []  # said already, with the executor's words
        self.errored.add(jobid)
        self.failed_jobs += 1
        job = self.jobs.pop(jobid, None)
        logs = [str(p) for p in info.get("log") or []]
        line = job_error_line(f"rule {info.get('rule_name')}", logs, info.get("rule_msg"), cause)
        said = line.partition(" (log: ")[0]
        # the same words again (an open breaker refuses every measurement of its store, each
        # through a job of its own): said once, the others counted in the summary
        out = [] if said in self.said_once else [line]
        self.said_once.add(said)
        self.same_again += 0 if out else 1
        if job is not None and job.rule in MEASURING:
            self.not_started += 1  # a failed job's outputs are gone: it recorded nothing
        if job is not None and job.rule == VERIFY and (rec := self.waiting.pop(job.copy, None)):
            out.extend(self._measured(rec, verification(None)))
        return out
