"""The circuit breaker per site and remote (cloudbench.site.breaker): counted from the
steps' own outcomes, kept in the site's scratch, read by every job and by the run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.campaign import paths
from cloudbench.site import breaker

pytestmark = pytest.mark.unit

REFUSED = "dial tcp 127.0.0.1:9: connect: connection refused"


class Store:
    """A store's answers to the gate's one listing, in order (None: it answered)."""

    def __init__(self, *answers: str | None) -> None:
        self.answers, self.asked = list(answers), 0

    def check(self) -> str | None:
        self.asked += 1
        return self.answers.pop(0) if self.answers else None


def test_failures_in_a_row_open_it_and_any_answer_clears_it(tmp_path):
    policy = breaker.Policy(after_failures=3)
    for n in (1, 2):
        cols = breaker.note(tmp_path, "s1", "r", REFUSED, f"upload r{n}")
        assert cols == {"outage": "during", "outage_since": cols["outage_since"]}
        assert not breaker.read(tmp_path, "s1", "r").is_open(policy)
    breaker.note(tmp_path, "s1", "r", REFUSED, "upload r3")
    state = breaker.read(tmp_path, "s1", "r")
    assert state.is_open(policy) and state.failures == 3 and state.cause == REFUSED
    assert breaker.read(tmp_path, "s2", "r") is None  # per site
    assert breaker.read(tmp_path, "s1", "other") is None  # and per remote
    assert breaker.note(tmp_path, "s1", "r", None, "download r1") == {}
    assert breaker.read(tmp_path, "s1", "r") is None
    assert not paths.store_down(tmp_path, "s1", "r").exists()


def test_no_count_no_request():
    store = Store(REFUSED)
    assert breaker.gate("/nonexistent", "s", "r", breaker.Policy(), store.check, "x") == (
        None,
        {},
    )
    assert store.asked == 0


def test_below_the_limit_one_listing_decides(tmp_path):
    breaker.note(tmp_path, "s", "r", REFUSED, "upload r1")
    store = Store(REFUSED)
    why, cols = breaker.gate(tmp_path, "s", "r", breaker.Policy(), store.check, "upload r2")
    assert store.asked == 1 and why.startswith("not measured: store 'r' has not answered")
    assert cols["outage"] == "during"
    assert breaker.read(tmp_path, "s", "r").failures == 2
    # the store is back: the next measurement goes, marked as the first after the outage
    since = breaker.read(tmp_path, "s", "r").since
    why, cols = breaker.gate(tmp_path, "s", "r", breaker.Policy(), Store(None).check, "r3")
    assert why is None and cols == {"outage": "after", "outage_since": since}
    assert breaker.read(tmp_path, "s", "r") is None


def test_an_open_breaker_checked_lately_asks_nothing(tmp_path):
    policy = breaker.Policy(after_failures=2, probe_every_s=60)
    for _ in range(2):
        breaker.note(tmp_path, "s", "r", REFUSED, "upload")
    store = Store(None)  # it would answer: the gate must not even ask
    why, cols = breaker.gate(tmp_path, "s", "r", policy, store.check, "upload r3")
    assert store.asked == 0
    assert "not tried again this run (store_down)" in why and cols["outage"] == "during"
    # a check older than probe_every_s (a new run, an hour later): one listing decides
    later = lambda: breaker.read(tmp_path, "s", "r").checked_epoch + 61  # noqa: E731
    why, cols = breaker.gate(tmp_path, "s", "r", policy, store.check, "upload r3", now=later)
    assert store.asked == 1 and why is None and cols["outage"] == "after"
    # a breaker left open by an earlier run: this run's first job asks once, however recent
    for _ in range(2):
        breaker.note(tmp_path, "s", "r", REFUSED, "upload")
    checked = breaker.read(tmp_path, "s", "r").checked_epoch
    rerun = breaker.Policy(after_failures=2, probe_every_s=60, run_started_epoch=checked + 1)
    why, cols = breaker.gate(tmp_path, "s", "r", rerun, Store(None).check, "upload r1")
    assert why is None and cols["outage"] == "after"


def test_wait_mode_checks_with_growing_pauses_within_its_budget(tmp_path):
    policy = breaker.Policy(after_failures=1, wait_s=100)
    breaker.note(tmp_path, "s", "r", REFUSED, "upload")
    since = breaker.read(tmp_path, "s", "r").since_epoch
    clock = {"t": since}
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock["t"] += s

    store = Store(REFUSED, REFUSED, REFUSED, None)
    why, cols = breaker.gate(
        tmp_path, "s", "r", policy, store.check, "u", sleep=sleep, now=lambda: clock["t"]
    )
    assert why is None and cols["outage"] == "after"
    assert slept == [10.0, 20.0, 40.0] and store.asked == 4
    # never back: it gives up once the next pause would pass the budget since the outage
    breaker.note(tmp_path, "s", "r", REFUSED, "upload")
    since = breaker.read(tmp_path, "s", "r").since_epoch
    clock["t"], slept[:] = since, []
    why, cols = breaker.gate(
        tmp_path, "s", "r", policy, Store(*[REFUSED] * 9).check, "u", sleep=sleep,
        now=lambda: clock["t"],
    )  # fmt: skip
    assert sum(slept) <= 100 and slept == [10.0, 20.0, 40.0]
    assert "waited 100 s for it (store_down.wait)" in why and cols["outage"] == "during"


def test_the_run_stops_only_for_a_breaker_that_opened_during_it(tmp_path):
    policy = breaker.Policy(after_failures=1)
    places = [(str(tmp_path), "s", "r"), (str(tmp_path), "s", "r2")]
    breaker.note(tmp_path, "s", "r", REFUSED, "upload")
    opened = breaker.read(tmp_path, "s", "r").checked_epoch
    assert breaker.opened_since(places, policy, opened + 1) is None  # an earlier run's
    assert breaker.opened_since(places, policy, opened - 1).remote == "r"
    said = breaker.read(tmp_path, "s", "r").describe()
    assert breaker.summary(places, policy) == [f"at s: {said}"]  # names its site


def test_a_half_written_or_foreign_file_reads_as_no_count(tmp_path):
    paths.store_down(tmp_path, "s", "r").write_text("{not json")
    assert breaker.read(tmp_path, "s", "r") is None
    # the file of the version before the breaker (one failure, no count) reads as one
    paths.store_down(tmp_path, "s", "r").write_text(
        json.dumps({"cause": REFUSED, "since": "2026-01-01T00:00:00Z", "by": "x"})
    )
    assert breaker.read(tmp_path, "s", "r").failures == 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1-02:03:04", 93784.0), ("02:03:04", 7384.0), ("03:04", 184.0), ("UNLIMITED", None),
     ("INVALID", None), ("", None)],
)  # fmt: skip
def test_slurm_time_left_is_read_in_every_form_squeue_prints(text, seconds):
    from cloudbench.site.walltime import parse_slurm_left

    assert parse_slurm_left(text) == seconds


def test_pbs_time_left_is_the_limit_less_what_was_used():
    from cloudbench.site.walltime import parse_pbs_left

    qstat = "Job Id: 12.pbs\n    Resource_List.walltime = 01:00:00\n"
    assert parse_pbs_left(qstat) == 3600.0  # nothing used yet
    used = qstat + "    resources_used.walltime = 00:45:30\n"
    assert parse_pbs_left(used) == 870.0
    assert parse_pbs_left("Job Id: 12.pbs\n") is None


def test_the_steps_after_the_copy_share_the_margin_it_leaves():
    from cloudbench.measure.copy import AFTER_COPY_SAFETY_S, after_copy_s, copy_timeout

    copy_s = copy_timeout(60, None)  # an hour's job: the copy gets 55 minutes
    assert copy_s == 3300.0
    assert after_copy_s(60, copy_s) == 300.0 - AFTER_COPY_SAFETY_S
    assert after_copy_s(None, copy_s) is None  # no walltime: each step its own patience
    # one allocation with 3 minutes left: the copy and what follows fit inside them
    copy_s = copy_timeout(3, None)
    assert copy_s + after_copy_s(3, copy_s) + AFTER_COPY_SAFETY_S == 180.0


def _grid(statuses: dict[tuple[str, str], list[str]], outage=None) -> pd.DataFrame:
    rows = [
        {"site": s, "remote": r, "status": st, "outage": (outage or {}).get((s, r, i))}
        for (s, r), sts in statuses.items()
        for i, st in enumerate(sts)
    ]
    return pd.DataFrame(rows)


def test_a_whole_column_of_failures_is_the_store_a_whole_row_the_site():
    from cloudbench.report.failures import scope_sentences

    ok, bad = ["ok", "ok"], ["failed", "failed"]
    store = _grid({("a", "s3"): bad, ("b", "s3"): bad, ("a", "ceph"): ok, ("b", "ceph"): ok},
                  {("a", "s3", 0): "during"})  # fmt: skip
    said = scope_sentences(store)
    assert said[0].startswith("Store s3: every site's measurement of it failed")
    assert "1 of them while it did not answer" in said[0] and len(said) == 1
    site = _grid({("a", "s3"): bad, ("a", "ceph"): bad, ("b", "s3"): ok, ("b", "ceph"): ok})
    assert scope_sentences(site)[0].startswith("Site a: every one of its measurements failed")
    one = _grid({("a", "s3"): ["ok", "failed"], ("b", "s3"): ok})
    assert scope_sentences(one) == [
        "1 other failed measurement(s) stand alone (their errors are in transfers.tsv)."
    ]
    assert scope_sentences(_grid({("a", "s3"): ok})) == []
    back = _grid({("a", "s3"): ok}, {("a", "s3", 1): "after"}).assign(
        direction="upload", layout="plain", setting="rclone-1xauto", repeat=[1, 2],
        outage_since="2026-11-26T10:13:49.760000Z",
    )  # fmt: skip
    assert scope_sentences(back) == [
        "1 measurement(s) were the first to reach the store again after an outage (column "
        "outage: after), so their rates may carry its recovery: a upload s3 plain "
        "rclone-1xauto r2 (store down since 2026-11-26T10:13:49)."
    ]


def test_the_outage_began_when_the_stalled_copy_last_moved_and_names_the_rclone_remote(tmp_path):
    state = breaker.failed(tmp_path, "s", "main", REFUSED, "upload r1", 1_700_000_000.0, "ucs3:")
    assert state.since == "2023-11-14T22:13:20.000000Z"  # not when the stall was noticed
    assert state.describe().startswith("store 'main' (ucs3:) has not answered since 2023-11-14")
    later = breaker.failed(tmp_path, "s", "main", REFUSED, "upload r2", None, "ucs3:")
    assert later.since == state.since and later.failures == 2


# --- a copy stalled on a dead store (cloudbench.measure.copy._Stall) -------------------------


class _Tail:
    """What _Stall reads of rclone's log: its byte counts so far and its newest network
    failure."""

    def __init__(self) -> None:
        self.samples: list = []
        self.network_error: str | None = None

    def moved(self, n: int) -> None:
        self.samples.append(type("Sample", (), {"bytes": n})())


def _settled(stall, tail, now: float) -> str | None:
    """The stall's verdict once a listing it asked has come back (it asks in a thread)."""
    found = stall.cause(tail, None, now)
    if stall._asking is not None:
        stall._asking.join(timeout=5)
        found = stall.cause(tail, None, now)
    return found


def test_a_copy_stalled_while_its_log_names_a_network_failure_needs_no_listing():
    from cloudbench.measure.copy import _Stall

    store = Store(REFUSED)
    stall, tail = _Stall(60, 0.0, store.check), _Tail()
    tail.moved(1000)
    assert stall.cause(tail, None, 1.0) is None
    tail.network_error = REFUSED
    assert stall.cause(tail, None, 60.0) is None  # moved 59 s ago
    assert stall.cause(tail, None, 61.5) == REFUSED and store.asked == 0


def test_a_silent_stall_asks_the_store_and_ends_the_copy_only_when_it_does_not_answer():
    """The S3 SDK retries a dead store's request silently for about 2 minutes: after the
    stall limit without progress, one listing decides, and a store that answers it is slow,
    not dead (asked again only after another stall limit)."""
    from cloudbench.measure.copy import _Stall, stalled_error
    from cloudbench.measure.rclonelog import network_cause

    store = Store(None, REFUSED)
    stall, tail = _Stall(60, 0.0, store.check), _Tail()
    tail.moved(1000)
    assert stall.cause(tail, None, 1.0) is None
    assert _settled(stall, tail, 61.5) is None and store.asked == 1  # it answered
    assert _settled(stall, tail, 100.0) is None and store.asked == 1  # not asked again yet
    found = _settled(stall, tail, 122.0)
    assert store.asked == 2
    assert re.fullmatch(
        rf"a listing of the store after 60 s without progress, failed in \d+\.\d s: {REFUSED}",
        found,
    ), found
    # the record's error names the cause last, as the breaker reads it
    assert network_cause(stalled_error(60, found)) == REFUSED


def test_a_listing_that_fails_after_the_copy_moved_again_ends_nothing():
    from cloudbench.measure.copy import _Stall

    store = Store(REFUSED)
    stall, tail = _Stall(60, 0.0, store.check), _Tail()
    assert stall.cause(tail, None, 1.0) is None  # nothing moved yet
    assert stall.cause(tail, None, 61.5) is None  # nor in 60 s: it asks
    stall._asking.join(timeout=5)
    tail.moved(5000)  # the copy moved while the listing was out
    assert stall.cause(tail, None, 63.0) is None and store.asked == 1
    assert stall.cause(tail, None, 124.0) is None  # its answer predates that: not a verdict
    assert _settled(stall, tail, 130.0) is None and store.asked == 2  # asked anew: it answers
    assert _Stall(None, 0.0, store.check).cause(tail, None, 999.0) is None  # stall: off


def test_a_download_seen_only_by_its_files_is_judged_by_the_listing_alone():
    """A client without a log of its own (s5cmd, aws, s3cmd) shows its progress only by the
    files it writes: once they stop growing, the listing decides."""
    from cloudbench.measure.copy import _Stall

    store = Store(REFUSED)
    stall = _Stall(60, 0.0, store.check)
    files = type("Sampler", (), {"points": [(0.0, 0), (1.0, 4096)]})()
    assert stall.cause(None, files, 1.0) is None
    assert stall.cause(None, files, 61.5) is None and store.asked == 1
    stall._asking.join(timeout=5)
    assert stall.cause(None, files, 62.0).endswith(REFUSED)
    unasked = _Stall(60, 0.0)  # nothing to ask, no log: no verdict, however long
    assert unasked.cause(None, files, 1.0) is None and unasked.cause(None, files, 999.0) is None


def test_a_breaker_opened_during_the_run_refuses_the_next_measurements_at_once(tmp_path):
    """What stops a run's measurements of a dead store through Snakemake's own rule for a
    failed job: the store_open job before each (a local job in Snakemake's process: never
    submitted) fails with the breaker's line in its log, so its transfer is never
    submitted; without it, it leaves its token.
    A breaker an earlier run left open, a run that waits for its store, and a job run by
    hand (no run spec) refuse nothing: their jobs ask the store (breaker.gate)."""
    from cloudbench.campaign import jobs
    from cloudbench.campaign.spec import TransferSpec

    spec = TransferSpec(
        campaign="c", bucket="b", site="s", upload_site="s", remote="main",
        remote_url="s3t:", direction="upload", layout_label="plain", repeat=2,
        files=("f",), file_bytes=1, chunk_width=3, scratch=str(tmp_path), seed="x",
    )  # fmt: skip
    run_spec = tmp_path / "run.json"

    log = tmp_path / "store_open.log"

    def store_open(started: float, wait_s: float = 0.0) -> tuple[int, Path]:
        sd = jobs.StoreDownSpec(after_failures=2, stall_s=60.0, wait_s=wait_s)
        jobs.write_run(run_spec, jobs.RunSpec(sd, started, True, {}))
        out = tmp_path / f"r2.{len(list(tmp_path.glob('*.store-open')))}.store-open"
        try:
            breaker.store_open(spec.to_json(), run_spec, out, log)
        except breaker.StoreDown:
            return 2, out
        return 0, out

    code, out = store_open(1.0)
    assert code == 0 and out.exists()
    breaker.note(tmp_path, "s", "main", REFUSED, "upload r1", url="s3t:")
    assert store_open(1.0)[0] == 0  # one failure: not open
    breaker.note(tmp_path, "s", "main", REFUSED, "upload r1", url="s3t:")
    code, out = store_open(1.0)
    assert code == 2 and not out.exists()
    said = log.read_text().strip().splitlines()
    assert len(said) == 1 and said[0].startswith(
        "cloudbench store_open: not started: store 'main' (s3t:) has not answered since"
    )
    assert "not tried again this run (store_down)" in said[0]
    checked = breaker.read(tmp_path, "s", "main").checked_epoch
    assert store_open(checked + 1)[0] == 0  # an earlier run's: this run's first job asks
    assert store_open(1.0, wait_s=600)[0] == 0  # the run waits for its store instead
    # the transfer itself refuses the same, and only within a run
    policy = breaker.Policy(after_failures=2, run_started_epoch=1.0)
    assert breaker.refused(tmp_path, "s", "main", policy).remote == "main"
    assert breaker.refused(tmp_path, "s", "main", breaker.Policy(after_failures=2)) is None
    assert breaker.refused(tmp_path, "s", "other", policy) is None
