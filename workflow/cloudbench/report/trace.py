"""``cloudbench trace RESULTS``: every row of transfers.tsv recomputed from the raw files
kept beside its record, whatever tool moved it.

A row's bytes, objects and seconds are what the measuring side recorded; each client can
say them again from what it left behind (its own log, the destination's listing, the
series: :meth:`cloudbench.measure.clients.base.Client.evidence`). This command asks every
row's client, and compares: bytes and objects exactly, seconds within a window that
depends on the kind of evidence (:func:`window`), since each kind has its own clock and
resolution. A row whose evidence cannot say its seconds is said to be *untimed*, never
passed in silence. Where the evidence also saw the client exit (the series' last sample), a
client that ran on after its last byte for longer than a window allows is measured, not
failed: traced, with a line saying how long its rate counts (:meth:`Window.ran_on_s`). A
group of clients (``clients`` > 1) adds its clients' bytes up and spans the first start to
the last end, as its row does.

The comparison is pure (:func:`judge`, :func:`combine`, :func:`window`); reading the files
is at the edge (:func:`evidence_of`, :func:`trace`).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cloudbench.measure.clients.base import (
    LISTING_CLOCK_S,
    TIMED_BY_LISTING,
    TIMED_BY_LOG_STAMPS,
    TIMED_BY_OBJECT_SECONDS,
    TIMED_BY_SERIES,
    Evidence,
)

# --- the kinds of evidence, and how far each one's seconds may lie from the row's ----------

LOG_STAMPS = TIMED_BY_LOG_STAMPS  # the client's last log line (rclone's last stats line)
OBJECT_SECONDS = TIMED_BY_OBJECT_SECONDS  # the client's per-object seconds, added (s3cmd)
STORE_LISTING = "store listing"  # an upload: the store's time of the last object
LOCAL_LISTING = "local listing"  # a download: this node's time of the last file written
SERIES = TIMED_BY_SERIES  # a download whose files keep the source's times: sampled instead

# rclone writes a stats line every second (measure.rclone.JSON_LOG_FLAGS) and a last one as it
# ends: its time stamp is at most one interval before the process's exit
STATS_INTERVAL_S = 1.0
# the record's start (the wall clock read just before the client is spawned) and a time
# stamp on the same node's clock, the series' and listings' milliseconds
CLOCK_S = 0.05
# a client's exit after its last byte landed (a Python client's teardown: 0.2-0.6 s alone
# here; a busy node stretches it)
EXIT_S = 2.0
# the series' last sample is taken as its sampler stops, just after the copy's clock (a
# thread joined: milliseconds alone, longer on a busy node)
SERIES_STOP_S = 0.5

# A window this share of a row's seconds or more holds them only loosely: a copy shorter than
# four times its window's width could be off by far more than its window shows in its rate
LOOSE_SHARE = 0.25

# a row's verdicts
TRACED = "traced"
UNTIMED = "untimed"  # bytes and objects traced; the evidence cannot say the seconds
MISMATCH = "MISMATCH"
NO_EVIDENCE = "NO EVIDENCE"
NOT_OK = "not ok"  # a failed row: what its evidence says is shown, never judged

# the exit status when some ok row did not trace (2 is a usage error, as every command's)
NOT_TRACED_EXIT = 1


@dataclass(frozen=True)
class Window:
    """The evidence's seconds must lie in [row - below_s, row + above_s]; ``below_s`` None:
    the evidence leaves out part of the copy by its nature, so it only bounds it above."""

    kind: str
    below_s: float | None
    above_s: float
    why: str
    # how far before the row's end the evidence's own sight of the client's exit may lie
    # (Evidence.exited_s: the series' last sample); None: this kind never sees the exit
    exit_below_s: float | None = None

    def holds(self, row_s: float, evidence_s: float) -> bool:
        if evidence_s > row_s + self.above_s:
            return False
        return self.below_s is None or evidence_s >= row_s - self.below_s

    def ran_on_s(self, row_s: float, ev: Evidence) -> float | None:
        """How long the client ran after its last byte, where the evidence saw it exit in
        step with the row's end: then that time is measured, not assumed (``below_s``
        allows only a quiet node's teardown), and a client that lingered is told apart from
        a row whose seconds are wrong. None: the evidence did not see the exit there."""
        if self.exit_below_s is None or ev.exited_s is None or ev.seconds is None:
            return None
        if not row_s - self.exit_below_s <= ev.exited_s <= row_s + self.above_s:
            return None
        return row_s - ev.seconds

    def judges(self, row_s: float, ev: Evidence) -> bool:
        """The evidence's seconds within the window, or before it by a run-on that the
        evidence itself measured (:meth:`ran_on_s`)."""
        assert ev.seconds is not None
        if self.holds(row_s, ev.seconds):
            return True
        return ev.seconds <= row_s + self.above_s and self.ran_on_s(row_s, ev) is not None

    def ran_on_past(self, row_s: float | None, ev: Evidence) -> float | None:
        """The run-on after the last byte where it is longer than the window allows (and so
        measured, not allowed for): the row's rate counts it, and the line says so."""
        if row_s is None or ev.seconds is None or self.holds(row_s, ev.seconds):
            return None
        return self.ran_on_s(row_s, ev)

    def text(self) -> str:
        low = "any" if self.below_s is None else f"-{self.below_s:.2f}"
        return f"{self.kind} {low}..+{self.above_s:.2f} s"


def kind_of(timed_by: str | None, direction: str) -> str | None:
    """Which kind of evidence said the seconds (None: none did): what the client says timed
    them, a listing told apart by whose clock it is on (the store's, or this node's)."""
    if timed_by == TIMED_BY_LISTING:
        return STORE_LISTING if direction == "upload" else LOCAL_LISTING
    return timed_by


def window(kind: str, resolution_s: float = 0.0, clock_uncertainty_s: float = 0.0) -> Window:
    """How far a kind of evidence's seconds may lie from the row's, and why.
    ``resolution_s``: the evidence's own rounding (s3cmd's seconds, each to a tenth);
    ``clock_uncertainty_s``: a group's clients' clocks against the group's one clock
    (cloudbench.measure.group.ClockOffset)."""
    c = clock_uncertainty_s + resolution_s
    if kind == LOG_STAMPS:
        return Window(
            kind,
            STATS_INTERVAL_S + c,
            CLOCK_S + c,
            "the last log line (rclone's last stats line) is written as the client ends, at "
            "worst a stats interval before",
        )
    if kind == OBJECT_SECONDS:
        return Window(
            kind,
            None,
            CLOCK_S + c,
            "the client's own seconds per object (s3cmd's, each to a tenth) leave out its "
            "start-up and listing",
        )
    if kind == STORE_LISTING:
        return Window(
            kind,
            LISTING_CLOCK_S + EXIT_S + c,
            LISTING_CLOCK_S + c,
            "the store keeps an object's time to the second, on its own clock; the client "
            "exits after its last object",
        )
    if kind == LOCAL_LISTING:
        return Window(
            kind, EXIT_S + c, CLOCK_S + c, "the last file's time; the client exits after it"
        )
    if kind == SERIES:
        return Window(
            kind,
            EXIT_S + c,
            SERIES_STOP_S + c,
            "the destination sampled every second, and once more as the client exits",
            exit_below_s=CLOCK_S + c,
        )
    raise ValueError(f"no such kind of evidence: {kind}")


# --- one row against its evidence ----------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """The columns of a transfers.tsv row that its evidence can say again."""

    label: str  # site direction remote layout/setting/rN
    tool: str
    direction: str
    status: str
    clients: int
    bytes_moved: int | None
    objects: int | None
    seconds: float | None


@dataclass(frozen=True)
class Traced:
    """One row, its evidence, the window its seconds were judged by, and the verdict."""

    row: Row
    evidence: Evidence
    window: Window | None
    verdict: str
    problems: tuple[str, ...] = ()
    # the other files kept beside the record, each with what it holds (the evidence of what
    # limited the copy: cloudbench.measure.evidence)
    files: tuple[str, ...] = ()


def judge(row: Row, ev: Evidence, win: Window | None) -> Traced:
    """Bytes and objects exactly, seconds within ``win``. A row that is not ok is shown with
    what its evidence says, not judged: its failure is the status command's to report."""
    problems = []
    if ev.bytes is None and ev.objects is None and ev.seconds is None:
        problems.append(f"no evidence: {ev.source}")
    else:
        if ev.bytes != row.bytes_moved:
            problems.append(f"bytes {ev.bytes} in the evidence, {row.bytes_moved} in the row")
        if ev.objects != row.objects:
            problems.append(f"objects {ev.objects} in the evidence, {row.objects} in the row")
        if ev.seconds is not None and win is None:
            problems.append(f"seconds {ev.seconds:.3f} by no known kind of evidence: not judged")
        elif ev.seconds is not None and row.seconds is not None and win is not None:
            if not win.judges(row.seconds, ev):
                problems.append(
                    f"seconds {ev.seconds:.3f} in the evidence, {row.seconds:.3f} in the row: "
                    f"outside {win.text()}"
                )
    if row.status != "ok":
        verdict = NOT_OK
    elif problems:
        verdict = NO_EVIDENCE if problems[0].startswith("no evidence") else MISMATCH
    elif ev.seconds is None:
        verdict = UNTIMED
        problems.append(f"the evidence cannot say the seconds: {ev.source}")
    else:
        verdict = TRACED
    return Traced(row, ev, win, verdict, tuple(problems))


def looseness(t: Traced) -> float | None:
    """For a traced row whose window is wide against its seconds (:data:`LOOSE_SHARE` of
    them or more: sub-second copies against a one-second stats interval), how far its
    evidence's seconds lie from the row's, as a share of the row's (None: not loose). The
    window alone would pass such a row at several times its real rate; what the evidence
    really says is this share, which the lines and the summary state instead."""
    win, seconds, said = t.window, t.row.seconds, t.evidence.seconds
    if t.verdict != TRACED or win is None or not seconds or said is None:
        return None
    if ((win.below_s or 0.0) + win.above_s) / seconds < LOOSE_SHARE:
        return None
    if ran_on(t) is not None:  # the run-on past the window is said instead, measured
        return None
    return abs(said - seconds) / seconds


def ran_on(t: Traced) -> float | None:
    """A traced row's client's run-on after its last byte, where longer than its window
    allows and measured by the evidence (None otherwise)."""
    if t.verdict != TRACED or t.window is None:
        return None
    return t.window.ran_on_past(t.row.seconds, t.evidence)


def combine(parts: Sequence[tuple[float, Evidence]], whole: Evidence) -> Evidence:
    """A group's evidence: each client's own (with its start, seconds after the group's
    first) added up, bytes and objects summed, seconds from the first start to the last
    end; where the clients' own files cannot say one (an upload's listing is of the whole
    copy), the group's (``whole``: its listing and series) says it."""
    evs = [ev for _start, ev in parts]
    used_whole = False

    def total(key: str) -> int | None:
        nonlocal used_whole
        values = [getattr(ev, key) for ev in evs]
        if values and None not in values:
            return sum(values)
        used_whole = True
        return getattr(whole, key)

    ends = [start + ev.seconds for start, ev in parts if ev.seconds is not None]
    exits = [start + ev.exited_s for start, ev in parts if ev.exited_s is not None]
    if parts and len(ends) == len(parts):
        seconds, timed_by = max(ends), evs[0].timed_by
        resolution = max(ev.resolution_s for ev in evs)
        exited = max(exits) if len(exits) == len(parts) else None
    else:
        seconds, used_whole = whole.seconds, True
        timed_by, resolution, exited = whole.timed_by, whole.resolution_s, whole.exited_s
    nbytes, objects = total("bytes"), total("objects")
    said = f"{len(parts)} clients: {'; '.join(sorted({ev.source for ev in evs}))}"
    if used_whole:
        said += f"; the group's {whole.source}"
    return Evidence(nbytes, objects, seconds, said, timed_by, resolution, exited)


# --- lines -----------------------------------------------------------------------------------


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def line(t: Traced) -> str:
    """One row: what it says, what its evidence says, by which window, and the verdict."""
    r, ev = t.row, t.evidence
    win = t.window.text() if t.window else "no window"
    out = (
        f"{r.label} [{r.tool}] row {_num(r.bytes_moved, 'd')} B {_num(r.objects, 'd')} obj "
        f"{_num(r.seconds, '.3f')} s | evidence {_num(ev.bytes, 'd')} B "
        f"{_num(ev.objects, 'd')} obj {_num(ev.seconds, '.3f')} s [{win}] "
        f"from {ev.source} -> {t.verdict}"
    )
    notes = list(t.problems)
    if (off := looseness(t)) is not None:  # under the verdict, which stays the line's last word
        notes.append(f"a window wide against the copy: the evidence is {off:.1%} off its seconds")
    if (ran := ran_on(t)) is not None:
        notes.append(
            f"the client ran {ran:.2f} s after its last byte (its exit seen at "
            f"{t.evidence.exited_s:.3f} s), past the {t.window.below_s:.2f} s a quiet node's "
            "teardown takes: the row's seconds, and its rate, count that time"
        )
    notes += [f"kept: {f}" for f in t.files]
    return out + "".join(f"\n    {p}" for p in notes)


def summary(traced: Sequence[Traced], allow_untimed: bool = False) -> list[str]:
    """The count of each verdict per tool, the windows used, and the overall word."""
    out = ["", "per tool:"]
    for tool in sorted({t.row.tool for t in traced}):
        mine = [t.verdict for t in traced if t.row.tool == tool]
        counts = ", ".join(f"{mine.count(v)} {v}" for v in sorted(set(mine)))
        out.append(f"  {tool}: {counts}")
    windows = {t.window.kind: t.window for t in traced if t.window is not None}
    if windows:
        out.append("seconds windows (evidence against the row):")
        for kind in sorted(windows):
            w = windows[kind]
            low = "no lower bound" if w.below_s is None else f"{w.below_s:.2f} s below"
            out.append(f"  {kind}: {low}, {w.above_s:.2f} s above ({w.why})")
    loose = [off for t in traced if (off := looseness(t)) is not None]
    if loose:
        out.append(
            f"{len(loose)} traced row(s) were copies shorter than {1 / LOOSE_SHARE:g} times "
            "their window's width, which alone would pass them at several times their real "
            f"rate; their evidence says their seconds to within {max(loose):.1%} (each line "
            "says by how much)"
        )
    ran = [r for t in traced if (r := ran_on(t)) is not None]
    if ran:
        out.append(
            f"{len(ran)} traced row(s) whose client ran on after its last byte longer than a "
            f"quiet node's teardown, up to {max(ran):.2f} s (seen in their series): their "
            "rates count that time (each line says how long)"
        )
    bad = [t for t in traced if not passes(t, allow_untimed)]
    untimed = sum(t.verdict == UNTIMED for t in traced)
    ok_rows = sum(t.row.status == "ok" for t in traced)
    if bad:
        out.append(f"NOT TRACED: {len(bad)} of {ok_rows} ok rows")
    elif untimed:
        out.append(f"traced: {ok_rows} ok rows, {untimed} of them untimed (--allow-untimed)")
    else:
        out.append(f"traced: every one of {ok_rows} ok rows")
    return out


def passes(t: Traced, allow_untimed: bool = False) -> bool:
    """Whether a row is traced (a row that is not ok is not this command's to fail)."""
    return t.verdict in (TRACED, NOT_OK) or (allow_untimed and t.verdict == UNTIMED)


def exit_status(traced: Sequence[Traced], allow_untimed: bool = False) -> int:
    return 0 if all(passes(t, allow_untimed) for t in traced) else NOT_TRACED_EXIT


# --- the files (I/O at the edge) ----------------------------------------------------------


def _int(value: str | None) -> int | None:
    f = _float(value)
    return None if f is None else int(f)


def _float(value: str | None) -> float | None:
    if value is None or value.strip() == "":
        return None
    f = float(value)
    return None if math.isnan(f) else f


def row_of(cells: Mapping[str, str]) -> Row:
    """A transfers.tsv row (its cells as read) as the columns compared."""
    label = (
        f"{cells['site']} {cells['direction']} {cells['remote']} "
        f"{cells['layout']}/{cells['setting']}/r{cells['repeat']}"
    )
    return Row(
        label=label,
        tool=cells["tool"],
        direction=cells["direction"],
        status=cells["status"],
        clients=_int(cells.get("clients")) or 1,
        bytes_moved=_int(cells.get("bytes_moved")),
        objects=_int(cells.get("objects")),
        seconds=_float(cells.get("seconds")),
    )


def evidence_of(results: Path, cells: Mapping[str, str]) -> tuple[Evidence, Window | None]:
    """The evidence of one row, from the files beside its record, and its window."""
    from cloudbench.campaign import paths
    from cloudbench.campaign.identity import MeasurementId
    from cloudbench.measure.clients import load
    from cloudbench.measure.clients.base import Kept
    from cloudbench.measure.group import client_series_path
    from cloudbench.records import read_json

    where = MeasurementId.of(cells)
    record = Path(paths.transfer_record(results, where))
    if not record.exists():
        return Evidence(None, None, None, f"no record ({record.name})"), None
    rec: dict[str, Any] = read_json(record)
    log = Path(paths.transfer_log(results, where))
    client = load(cells["tool"])
    started = rec.get("started_epoch")
    if started is None:
        return Evidence(None, None, None, "the record has no start (never ran)"), None
    whole = client.evidence(
        Kept(log, paths.listing(record), Path(paths.series(str(record))), float(started))
    )
    per = rec.get("per_client") or []
    uncertainty = 0.0
    if int(rec.get("clients") or 1) > 1 and per:
        folder = paths.clients_dir(record)
        parts = []
        for k, c in enumerate(per):
            if c.get("started_epoch") is None:
                parts.append((0.0, Evidence(None, None, None, f"client {k} never started")))
                continue
            offset = float(c.get("clock_offset_s") or 0.0)  # its node's clock to the group's
            own = Kept(
                paths.client_log(log, k),
                None,  # the listing is the whole copy's: the group's
                client_series_path(folder, k),
                float(c["started_epoch"]) - offset,
            )
            parts.append((float(c["started_epoch"]) - float(started), client.evidence(own)))
            uncertainty = max(uncertainty, float(c.get("clock_uncertainty_s") or 0.0))
        whole = combine(parts, whole)
    kind = kind_of(whole.timed_by, cells["direction"])
    return whole, None if kind is None else window(kind, whole.resolution_s, uncertainty)


def read_rows(transfers: Path) -> list[dict[str, str]]:
    with open(transfers, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def trace(results: Path) -> list[Traced]:
    """Every row of ``results``/transfers.tsv against its evidence."""
    out = []
    for cells in read_rows(results / "transfers.tsv"):
        row = row_of(cells)
        if cells.get("started_epoch", "x") == "" and row.status != "ok":
            ev, win = Evidence(None, None, None, "never ran"), None
        else:
            ev, win = evidence_of(results, cells)
        out.append(replace(judge(row, ev, win), files=kept_files(results, cells)))
    return out


def kept_files(results: Path, cells: Mapping[str, str]) -> tuple[str, ...]:
    """The evidence of what limited a row's copy (one file, or one per client), each with
    its count of samples and the row's ``limit``."""
    from cloudbench.campaign import paths
    from cloudbench.campaign.identity import MeasurementId
    from cloudbench.measure import evidence
    from cloudbench.report.limits import evidence_files

    record = Path(paths.transfer_record(results, MeasurementId.of(cells)))
    out = []
    for p in evidence_files(record, {"clients": cells.get("clients") or 1}):
        doc = evidence.read(p)
        if doc is not None:
            said = f": {cells['limit']}" if cells.get("limit") else ""
            out.append(f"{p.name} ({len(doc['samples'])} samples of what limited it{said})")
    return tuple(out)


def main(argv: Sequence[str]) -> int:
    """``cloudbench trace RESULTS``: one line per row, a summary, exit 0 only when every ok
    row traced."""
    p = argparse.ArgumentParser(
        prog="cloudbench trace",
        description="Every row of a campaign's transfers.tsv recomputed from the raw files "
        "kept beside its record (the client's own log, the destination's listing, the "
        "series): bytes and objects exactly, seconds within a window stated per kind of "
        "evidence. Exit 0 only when every ok row traced.",
    )
    p.add_argument("results", type=Path, help="a campaign's results directory (results/NAME)")
    p.add_argument(
        "--allow-untimed",
        action="store_true",
        help="rows whose evidence cannot say the seconds (listed as untimed) do not fail "
        "the check (e.g. a store that keeps the uploader's times as its own)",
    )
    a = p.parse_args(list(argv))
    transfers = a.results / "transfers.tsv"
    if not transfers.exists():
        print(f"cloudbench trace: no {transfers}", file=sys.stderr)
        return 2
    traced = trace(a.results)
    for t in traced:
        print(line(t))
    print("\n".join(summary(traced, a.allow_untimed)))
    return exit_status(traced, a.allow_untimed)
