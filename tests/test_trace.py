"""``cloudbench trace``'s comparison: a row against its evidence, a group's clients added up,
the windows each kind of evidence gets (pure functions; no process starts)."""

from __future__ import annotations

import pytest

from cloudbench.measure.clients.base import (
    TIMED_BY_LISTING,
    TIMED_BY_LOG_STAMPS,
    TIMED_BY_OBJECT_SECONDS,
    TIMED_BY_SERIES,
    Evidence,
)
from cloudbench.report import trace as tr

pytestmark = pytest.mark.unit

MIB = 2**20


def _row(**over) -> tr.Row:
    values = {
        "label": "edi upload main plain/s5cmd-1x2/r1",
        "tool": "s5cmd",
        "direction": "upload",
        "status": "ok",
        "clients": 1,
        "bytes_moved": 6 * MIB,
        "objects": 2,
        "seconds": 2.0,
    }
    return tr.Row(**(values | over))


def test_a_row_that_its_evidence_says_again_is_traced():
    win = tr.window(tr.LOCAL_LISTING)
    t = tr.judge(_row(), Evidence(6 * MIB, 2, 1.8, "listing"), win)
    assert t.verdict == tr.TRACED and t.problems == ()
    assert tr.exit_status([t]) == 0


@pytest.mark.parametrize(
    ("evidence", "needle"),
    [
        (Evidence(6 * MIB - 1, 2, 1.8, "listing"), "bytes 6291455 in the evidence"),
        (Evidence(6 * MIB, 1, 1.8, "listing"), "objects 1 in the evidence, 2 in the row"),
        (Evidence(6 * MIB, 2, -0.5, "listing"), "seconds -0.500 in the evidence, 2.000"),
        (Evidence(6 * MIB, 2, 2.2, "listing"), "outside local listing -2.00..+0.05 s"),
    ],
)
def test_a_row_its_evidence_contradicts_is_a_mismatch_that_says_which(evidence, needle):
    t = tr.judge(_row(), evidence, tr.window(tr.LOCAL_LISTING))
    assert t.verdict == tr.MISMATCH
    assert any(needle in p for p in t.problems), t.problems
    assert tr.exit_status([t]) == tr.NOT_TRACED_EXIT
    assert "MISMATCH" in tr.line(t) and needle in tr.line(t)


def test_no_evidence_fails_and_an_untimed_row_is_said_not_passed():
    none = tr.judge(_row(), Evidence(None, None, None, "no stats line in r1.log"), None)
    assert none.verdict == tr.NO_EVIDENCE and "no stats line" in none.problems[0]
    source = "listing (r1.listing.tsv): its times are the source's, not the copy's"
    untimed = tr.judge(_row(), Evidence(6 * MIB, 2, None, source), tr.window(tr.STORE_LISTING))
    assert untimed.verdict == tr.UNTIMED
    assert "cannot say the seconds" in untimed.problems[0] and "source's" in untimed.problems[0]
    assert tr.exit_status([untimed]) == tr.NOT_TRACED_EXIT  # never passed by default
    assert tr.exit_status([untimed], allow_untimed=True) == 0  # only when asked, and listed
    assert tr.exit_status([none], allow_untimed=True) == tr.NOT_TRACED_EXIT
    assert "1 of them untimed" in tr.summary([untimed], allow_untimed=True)[-1]


def test_a_failed_row_is_shown_with_its_evidence_not_judged():
    t = tr.judge(_row(status="failed", bytes_moved=None), Evidence(3 * MIB, 1, 0.9, "x"), None)
    assert t.verdict == tr.NOT_OK and "bytes 3145728 in the evidence" in t.problems[0]
    assert tr.exit_status([t]) == 0


@pytest.mark.parametrize(
    ("kind", "row_s", "inside", "outside"),
    [
        # rclone's last stats line: as it ends, at worst a stats interval before
        (tr.LOG_STAMPS, 5.0, (4.01, 5.04), (3.9, 5.1)),
        # an S3 store's LastModified is to the second: the last object may seem to land a
        # second early, and the client exits after it
        (tr.STORE_LISTING, 0.8, (-0.3, 1.7), (-2.3, 1.9)),
        (tr.LOCAL_LISTING, 3.0, (1.1, 3.04), (0.9, 3.1)),
        (tr.SERIES, 3.0, (1.1, 3.4), (0.9, 3.6)),
    ],
)
def test_each_kind_of_evidence_has_its_window(kind, row_s, inside, outside):
    win = tr.window(kind)
    assert all(win.holds(row_s, s) for s in inside)
    assert not any(win.holds(row_s, s) for s in outside)


def test_per_object_seconds_bound_the_row_above_by_their_resolution_only():
    """s3cmd's per-object seconds leave out its start-up: any amount below; above, their
    rounding (a twentieth of a second per line, each to a tenth: the evidence says it)."""
    from cloudbench.measure.clients.s3cmd import ROUNDING_S

    win = tr.window(tr.OBJECT_SECONDS, resolution_s=4 * ROUNDING_S)
    assert win.below_s is None and "any" in win.text()
    assert win.holds(10.0, 0.0) and win.holds(1.0, 1.2)
    assert not win.holds(1.0, 1.3)
    assert tr.window(tr.OBJECT_SECONDS, resolution_s=40 * ROUNDING_S).above_s > win.above_s


def test_a_groups_clock_uncertainty_widens_its_window():
    plain = tr.window(tr.LOG_STAMPS)
    group = tr.window(tr.LOG_STAMPS, clock_uncertainty_s=0.2)
    assert group.below_s == pytest.approx(plain.below_s + 0.2)
    assert group.above_s == pytest.approx(plain.above_s + 0.2)


@pytest.mark.parametrize(
    ("timed_by", "direction", "kind"),
    [
        (TIMED_BY_LOG_STAMPS, "upload", tr.LOG_STAMPS),
        (TIMED_BY_OBJECT_SECONDS, "download", tr.OBJECT_SECONDS),
        (TIMED_BY_LISTING, "upload", tr.STORE_LISTING),  # the store's clock, to the second
        (TIMED_BY_LISTING, "download", tr.LOCAL_LISTING),  # this node's
        (TIMED_BY_SERIES, "download", tr.SERIES),
        (None, "upload", None),
    ],
)
def test_the_kind_is_what_the_evidence_says_timed_it(timed_by, direction, kind):
    assert tr.kind_of(timed_by, direction) == kind


def test_seconds_by_no_known_kind_are_not_passed():
    t = tr.judge(_row(), Evidence(6 * MIB, 2, 1.9, "a new client's log"), None)
    assert t.verdict == tr.MISMATCH and "not judged" in t.problems[0]


def test_a_group_adds_its_clients_up_and_spans_first_start_to_last_end():
    stamps = {"timed_by": TIMED_BY_LOG_STAMPS}
    parts = [
        (0.0, Evidence(4 * MIB, 1, 2.0, "rclone's JSON log (r1.client-0.log)", **stamps)),
        (0.3, Evidence(4 * MIB, 1, 2.5, "rclone's JSON log (r1.client-1.log)", **stamps)),
    ]
    ev = tr.combine(parts, Evidence(None, None, None, "no stats line in r1.log"))
    assert (ev.bytes, ev.objects, ev.seconds) == (8 * MIB, 2, pytest.approx(2.8))
    assert ev.timed_by == TIMED_BY_LOG_STAMPS
    assert ev.source.startswith("2 clients:") and "group's" not in ev.source


def test_a_group_whose_clients_cannot_say_the_seconds_takes_the_groups_listing():
    """s5cmd's clients count their bytes in their own logs; the upload's one listing (of the
    whole copy) says when the last object landed."""
    parts = [
        (0.0, Evidence(3 * MIB, 1, None, "no listing")),
        (0.1, Evidence(3 * MIB, 1, None, "x")),
    ]
    ev = tr.combine(parts, Evidence(0, 0, 1.4, "listing (r1.listing.tsv)", TIMED_BY_LISTING))
    assert (ev.bytes, ev.objects, ev.seconds, ev.timed_by) == (6 * MIB, 2, 1.4, TIMED_BY_LISTING)
    assert "the group's listing" in ev.source
    # the AWS CLI's clients count nothing: the group's listing says the bytes too
    none = [(0.0, Evidence(None, None, None, "no listing"))] * 2
    assert tr.combine(none, Evidence(6 * MIB, 2, 1.4, "listing")).bytes == 6 * MIB


def test_row_of_reads_a_tables_cells():
    cells = {
        "site": "edi", "direction": "download", "remote": "main", "layout": "plain",
        "setting": "aws-2x2", "repeat": "1", "tool": "aws", "status": "ok", "clients": "2",
        "bytes_moved": "6291456", "objects": "2.0", "seconds": "0.5",
    }  # fmt: skip
    row = tr.row_of(cells)
    assert row.label == "edi download main plain/aws-2x2/r1"
    assert (row.clients, row.bytes_moved, row.objects, row.seconds) == (2, 6 * MIB, 2, 0.5)
    assert tr.row_of(cells | {"bytes_moved": "", "seconds": "nan"}).bytes_moved is None


def test_a_groups_digest_notes_are_not_counted_as_the_copys(tmp_path):
    """A group's download clients write a digest note beside each file after the timed
    copy: cloudbench's file, not the copy's (a listing kept before this fix held them)."""
    from cloudbench.data.checksums import digest_note_path, is_digest_note
    from cloudbench.measure.arrival import write_listing
    from cloudbench.measure.clients.base import listing_evidence

    note = str(digest_note_path(tmp_path / "d/f1.bin").relative_to(tmp_path))
    assert is_digest_note(note) and not is_digest_note("d/f1.bin")
    listing = tmp_path / "r1.listing.tsv"
    write_listing(listing, {"d/f1.bin": (3 * MIB, 1001.5), note: (248, 1004.0)})
    ev = listing_evidence(listing, started_epoch=1000.0)
    assert (ev.bytes, ev.objects, ev.seconds, ev.timed_by) == (3 * MIB, 1, 1.5, TIMED_BY_LISTING)


def test_a_short_copy_traced_within_a_wide_window_says_how_close_its_evidence_really_is():
    """A 0.4 s copy judged by rclone's one-second stats window would pass at evidence of
    0.0 s to 0.45 s, rates up to ten times apart: the line and the summary say what the
    evidence really says (1.8% here), not only "traced" (user check, 2026-11-26)."""
    win = tr.window(tr.LOG_STAMPS)
    short = tr.judge(_row(seconds=0.379), Evidence(6 * MIB, 2, 0.372, "log"), win)
    long = tr.judge(_row(seconds=40.0), Evidence(6 * MIB, 2, 39.9, "log"), win)
    assert short.verdict == long.verdict == tr.TRACED
    assert tr.looseness(short) == pytest.approx(0.007 / 0.379)
    assert tr.looseness(long) is None  # a window under a quarter of its seconds
    first, said_how_close = tr.line(short).splitlines()
    assert first.endswith("-> traced")  # the verdict stays the last word (awk '{print $NF}')
    assert said_how_close.strip() == (
        "a window wide against the copy: the evidence is 1.8% off its seconds"
    )
    assert "off its seconds" not in tr.line(long)
    said = "\n".join(tr.summary([short, long]))
    assert "1 traced row(s) were copies shorter than 4 times their window's width" in said
    assert "to within 1.8%" in said and tr.exit_status([short, long]) == 0


def test_a_client_that_ran_on_after_its_last_byte_is_traced_saying_how_long():
    """CI, 2026-11-27: an AWS CLI download on a starved node had its 6 MiB on disk at 3.72 s
    (the series) and exited at 6.13 s. The series' last sample saw the exit in step with the
    row's end, so the 2.4 s run-on is measured, not a wrong row: traced, and said, since the
    row's rate counts it. A row whose seconds match no exit the evidence saw still fails."""
    win = tr.window(tr.SERIES)
    row = _row(direction="download", tool="aws", seconds=6.126)
    seen = Evidence(6 * MIB, 2, 3.722, "listing; seconds from r1.series.tsv", exited_s=6.13)
    t = tr.judge(row, seen, win)
    assert t.verdict == tr.TRACED, t.problems
    assert tr.ran_on(t) == pytest.approx(2.404)
    said = tr.line(t).splitlines()
    assert said[0].endswith("-> traced") and said[1:] == [
        "    the client ran 2.40 s after its last byte (its exit seen at 6.130 s), past the "
        "2.00 s a quiet node's teardown takes: the row's seconds, and its rate, count that time"
    ]
    assert any("ran on after its last byte" in x and "2.40 s" in x for x in tr.summary([t]))
    # the exit the evidence saw is not the row's end: the row's seconds are not the copy's
    for exited in (3.9, 6.126 - 0.1, 6.126 + 0.6, None):
        wrong = tr.judge(row, Evidence(6 * MIB, 2, 3.722, "series", exited_s=exited), win)
        assert wrong.verdict == tr.MISMATCH and "outside series" in wrong.problems[0]
    # bytes complete after the row ended are never passed by a seen exit
    late = tr.judge(row, Evidence(6 * MIB, 2, 6.7, "series", exited_s=6.13), win)
    assert late.verdict == tr.MISMATCH
    # a run-on within the window is the window's to allow: nothing more is said
    quiet = tr.judge(row, Evidence(6 * MIB, 2, 5.0, "series", exited_s=6.13), win)
    assert quiet.verdict == tr.TRACED and tr.ran_on(quiet) is None
    # only the series sees the exit: another kind's window never passes on it
    local = tr.window(tr.LOCAL_LISTING)
    assert tr.judge(row, Evidence(6 * MIB, 2, 3.722, "x", exited_s=6.13), local).verdict == (
        tr.MISMATCH
    )


def test_a_groups_exit_is_its_last_clients():
    series = {"timed_by": TIMED_BY_SERIES}
    parts = [
        (0.0, Evidence(3 * MIB, 1, 1.0, "a", exited_s=1.5, **series)),
        (0.2, Evidence(3 * MIB, 1, 1.1, "b", exited_s=3.0, **series)),
    ]
    ev = tr.combine(parts, Evidence(None, None, None, "no listing"))
    assert ev.exited_s == pytest.approx(3.2) and ev.seconds == pytest.approx(1.3)
    one_unseen = [parts[0], (0.2, Evidence(3 * MIB, 1, 1.1, "b", **series))]
    assert tr.combine(one_unseen, Evidence(None, None, None, "x")).exited_s is None
