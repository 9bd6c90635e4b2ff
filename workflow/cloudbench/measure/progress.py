"""What a person watching a transfer sees: progress lines in job logs, and ``cloudbench watch``.

A 12-hour upload must not be silent between "rule upload" and "Finished". Every transfer
job prints a progress line at a steady interval (bytes, %, rate, ETA) to its job log and
ends with one result line; ``cloudbench watch`` follows every running transfer of a campaign
at this site from the rclone JSON logs as they grow, so it works the same whether the jobs
run here or under Slurm or PBS on other nodes of a shared filesystem.

Rates here are for watching, not for the tables: the tables' rates come from the wall clock
(cloudbench.measure.attempts) and the per-second series (cloudbench.measure.rclonelog.rate_series).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from cloudbench.campaign import paths
from cloudbench.campaign.identity import MeasurementId
from cloudbench.measure.rclonelog import StatsSample, network_cause, stats_sample
from cloudbench.records import clip_middle

PROGRESS_SECONDS = 10.0  # a 1-minute transfer shows 5-6 lines, a 12-hour one ~4,300
PROGRESS_VARIABLE = "CLOUDBENCH_PROGRESS_SECONDS"
RATE_WINDOW_S = 30.0  # the rate shown is over the last half minute of stats lines


def progress_interval() -> float:
    try:
        return max(0.5, float(os.environ.get(PROGRESS_VARIABLE, PROGRESS_SECONDS)))
    except ValueError:
        return PROGRESS_SECONDS


def human_bytes(n: float) -> str:
    """SI units, like the MB/s of every rate: 4.08 GB, 512.0 MB."""
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{int(n)} B"


def human_seconds(s: float) -> str:
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"


class LogTail:
    """The stats lines of a growing rclone JSON log, read incrementally (never re-read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""
        self.samples: list[StatsSample] = []
        self.network_error: str | None = None  # the newest network failure the log names

    def poll(self) -> list[StatsSample]:
        """New complete stats lines since the last call (a half-written line waits)."""
        try:
            with open(self.path, errors="replace") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
                self.offset = fh.tell()
        except FileNotFoundError:
            return []
        text = self.partial + chunk
        lines = text.split("\n")
        self.partial = lines.pop()
        new = []
        for line in lines:
            if '"stats"' not in line:
                if cause := network_cause(line):
                    self.network_error = cause
                continue
            try:
                record = json.loads(line)
                new.append(stats_sample(record, record["stats"]))
            except (ValueError, KeyError, TypeError):
                continue
        self.samples.extend(new)
        return new


@dataclass(frozen=True)
class Progress:
    """Where one transfer stands: bytes so far, of how many, how fast lately."""

    label: str
    done: int
    total: int
    mb_per_s: float
    elapsed_s: float

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0

    @property
    def eta_s(self) -> float:
        left = max(0, self.total - self.done)
        return left / (self.mb_per_s * 1e6) if self.mb_per_s > 0 else math.inf

    @property
    def started(self) -> bool:
        """Whether the client has said how much it moves (its first stats line)."""
        return self.total > 0 or self.done > 0

    def line(self) -> str:
        if not self.started:  # not "0 B of 0 B (0%)": nothing is known yet
            return f"{self.label}: starting, {human_seconds(self.elapsed_s)} elapsed, no stats yet"
        return (
            f"{self.label}: {human_bytes(self.done)} of {human_bytes(self.total)} "
            f"({100 * self.fraction:.0f}%) at {self.mb_per_s:.1f} MB/s, "
            f"{human_seconds(self.elapsed_s)} elapsed, ETA {human_seconds(self.eta_s)}"
        )


def progress_of(
    label: str, samples: Sequence[StatsSample], total: int = 0, elapsed: float | None = None
) -> Progress:
    """Progress from stats lines: rate over the last ``RATE_WINDOW_S`` of them.

    ``total`` is the bytes the transfer must move when the caller knows it; otherwise
    rclone's own ``totalBytes`` (known once it has listed the source). ``elapsed``: the
    wall clock since the transfer started, when the caller has it (rclone's own stats
    clock stands still while nothing is transferring: a stalled store would show 0 s).
    """
    if not samples:
        return Progress(label, 0, total, 0.0, elapsed or 0.0)
    last = samples[-1]
    start = next((s for s in samples if s.elapsed >= last.elapsed - RATE_WINDOW_S), samples[0])
    base_t, base_b = (start.elapsed, start.bytes) if start is not last else (0.0, 0)
    dt = last.elapsed - base_t
    rate = (last.bytes - base_b) / dt / 1e6 if dt > 0 else 0.0
    shown = last.elapsed if elapsed is None else elapsed
    return Progress(label, last.bytes, total or last.total_bytes, rate, shown)


def label_of(
    direction: str, remote: str, layout: str, repeat: int | str, setting: str | None = None
) -> str:
    """``upload chunked-64MiB r2`` (the remote named only when it is not the only one, the
    setting only when it is not one client at the job's threads: ``... r2 rclone-4x32``)."""
    from cloudbench.campaign.labels import Setting  # not the model: every transfer says this

    where = f" {remote}" if remote != "main" else ""
    shown = f" {setting}" if setting and setting != Setting().label else ""
    return f"{direction}{where} {layout} r{repeat}{shown}"


def _seconds(s: float) -> str:
    """A copy's seconds to a tenth, or two figures under one (an s5cmd copy of 16.78 MB in
    0.11 s was said "in 0.0 s")."""
    return f"{s:.1f}" if s >= 1 else f"{s:.2g}"


def result_line(label: str, record: dict[str, Any]) -> str:
    """``upload chunked-64MiB r2: 4.08 GB in 41.2 s = 99.0 MB/s, ok``; a transfer that is
    not ok says what it moved, not what it was asked to: ``download plain r1: failed after
    3.1 s, 0 B of 67.11 MB moved (<error>)``."""
    requested = human_bytes(record.get("bytes_requested") or 0)
    seconds = record.get("seconds")
    if record["status"] == "ok":
        rate = record.get("mb_per_s")
        rate_text = f" = {rate:.1f} MB/s" if rate is not None else ""
        text = f"{label}: {requested} in {_seconds(seconds or 0)} s{rate_text}, ok"
    else:
        after = f" after {_seconds(seconds)} s" if seconds is not None else ""
        moved = human_bytes(record.get("bytes_moved") or 0)
        text = f"{label}: {record['status']}{after}, {moved} of {requested} moved"
    if record.get("error"):
        text += f" ({clip_middle(str(record['error']))})"
    return text


# --- cloudbench watch ---------------------------------------------------------------------


def running_logs(results: Path) -> Iterator[tuple[str, Path]]:
    """(label, rclone log) of every transfer at this site whose record is not written yet.

    A transfer job removes its old log when it starts and writes its record when rclone
    has exited, so a log newer than its record (or without one) is a transfer in flight.
    """
    root = Path(paths.sites_dir(results))
    for log in sorted(root.glob(paths.transfer_logs_glob())):
        site, _, direction, remote, layout, setting = log.parts[-7:-1]
        repeat, _, client = log.stem.removeprefix("r").partition(".")
        labels = dict(site=site, remote=remote, direction=direction, layout=layout)
        m = MeasurementId.of(labels | dict(setting=setting, repeat=repeat))
        record = Path(paths.transfer_record(results, m))
        if record.exists() and record.stat().st_mtime >= log.stat().st_mtime:
            continue
        label = label_of(direction, remote, layout, repeat, setting)
        yield f"{site} {label}" + (f" {client}" if client else ""), log


def snapshot(results: Path, tails: dict[Path, LogTail]) -> list[Progress]:
    out = []
    live = dict(running_logs(results))
    for label, log in live.items():
        tail = tails.setdefault(log, LogTail(log))
        if log.stat().st_size < tail.offset:  # a rerun started a new log
            tails[log] = tail = LogTail(log)
        tail.poll()
        out.append(progress_of(label, tail.samples))
    for log in [p for p in tails if p not in live.values()]:
        del tails[log]
    return out


def published_sites(prefixes: Sequence[str], flags: Sequence[str]) -> list[str]:
    """Sites whose results are on the remote (what other centres have finished)."""
    from cloudbench.measure import rclone as rc

    binary = rc.find_rclone()
    found: set[str] = set()
    for prefix in prefixes:
        res = rc.run_helper(
            rc.helper_command(binary, "lsf", "--dirs-only", f"{prefix}/results", extra_flags=flags),
            timeout=60,
        )
        if res.returncode == 0:
            found.update(line.strip("/") for line in res.stdout.split() if line.strip("/"))
    return sorted(found)


def watch(
    results: Path,
    *,
    interval: float = 2.0,
    plain: bool | None = None,
    idle_exit: float | None = None,
    remote: tuple[Sequence[str], Sequence[str]] | None = None,
    out: TextIO = sys.stdout,
) -> None:
    """Follow the campaign's running transfers until Ctrl-C (or ``idle_exit`` seconds with
    none running). A terminal gets live bars (rich); anything else gets plain lines."""
    plain = not out.isatty() if plain is None else plain
    tails: dict[Path, LogTail] = {}
    idle_since = time.monotonic()
    next_remote = 0.0
    published: list[str] = []

    def frame() -> list[Progress]:
        nonlocal next_remote, published
        if remote and time.monotonic() >= next_remote:
            published = published_sites(*remote)
            next_remote = time.monotonic() + 30
        return snapshot(results, tails)

    def idle(now_running: list[Progress]) -> bool:
        nonlocal idle_since
        if now_running:
            idle_since = time.monotonic()
        return idle_exit is not None and time.monotonic() - idle_since >= idle_exit

    if plain:
        while True:
            rows = frame()
            stamp = time.strftime("%H:%M:%S")
            for p in rows:
                print(f"{stamp} {p.line()}", file=out, flush=True)
            if remote:
                print(f"{stamp} published: {', '.join(published) or 'none yet'}", file=out)
            if not rows:
                print(f"{stamp} no transfer running in {results}", file=out, flush=True)
            if idle(rows):
                return
            time.sleep(interval)
    _watch_rich(frame, idle, interval, out, lambda: published if remote else None)


def _watch_rich(frame, idle, interval: float, out: TextIO, published) -> None:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    console = Console(file=out)

    def render():
        rows = frame()
        table = Table(expand=True, box=None)
        for col in ("transfer", "", "done", "rate", "ETA"):
            table.add_column(col)
        for p in rows:
            table.add_row(
                p.label,
                ProgressBar(total=max(p.total, 1), completed=p.done, width=30),
                f"{human_bytes(p.done)} / {human_bytes(p.total)} ({100 * p.fraction:.0f}%)"
                if p.started
                else "starting",
                f"{p.mb_per_s:.1f} MB/s",
                human_seconds(p.eta_s),
            )
        parts: list[Any] = [table if rows else "no transfer running"]
        sites = published()
        if sites is not None:
            parts.append(f"published on the remote: {', '.join(sites) or 'none yet'}")
        return Group(*parts), rows

    with Live(console=console, refresh_per_second=4) as live:
        while True:
            view, rows = render()
            live.update(view)
            if idle(rows):
                return
            time.sleep(interval)
