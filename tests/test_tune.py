"""The tuning mode's search (cloudbench.campaign.tune), run to its end on simulated links
whose answer is known: a per-connection cap and a total cap put the knee at total /
per-connection connections; a setting that fails above some concurrency must be avoided."""

from __future__ import annotations

import random

import pytest

from cloudbench.campaign.model import ConfigError, load_campaign
from cloudbench.campaign.search import (
    BUDGET,
    COLLAPSE,
    DROPPED,
    PLATEAU,
    WAITING,
    Candidate,
    Observed,
    Space,
    Tune,
    search,
)

pytestmark = pytest.mark.unit

PER_CONN, TOTAL = 2.0, 8.0  # MB/s: the knee at 4 connections
FILES = 2  # plain moves at most 2 objects at once


def link(cand: Candidate, fail_above: int | None = None) -> float | None:
    """The simulated link's rate for a candidate (None: it fails)."""
    if fail_above is not None and cand.connections > fail_above:
        return None
    in_flight = cand.clients * (
        min(cand.concurrency, FILES) if cand.layout == "plain" else cand.concurrency
    )
    return min(in_flight * PER_CONN, TOTAL)


def run(space: Space, tune: Tune, fail_above=None, noise=0.02, seed=1, outage_once=None):
    """The search driven to its end: each candidate it asks for is 'measured' on the link."""
    rng = random.Random(seed)
    observed: dict[Candidate, Observed] = {}
    asked, waited = 0, []
    outage = set() if outage_once is None else {outage_once}
    while True:
        res = search(space, tune, observed)
        if res.status == WAITING:
            for c in list(observed):
                if observed[c].store_failed:  # measured again on the next run: it works now
                    observed[c] = Observed((link(c),) * space.repeats, space.repeats)
                    waited.append(c)
            continue
        if not res.next:
            return res, asked
        for c in res.next:
            asked += 1
            if c in outage:
                outage.discard(c)
                observed[c] = Observed((), space.repeats, space.repeats, space.repeats)
                continue
            rate = link(c, fail_above)
            if rate is None:
                observed[c] = Observed((), space.repeats, failed=space.repeats)
            else:
                rates = tuple(rate * (1 + rng.uniform(-noise, noise)) for _ in range(3))
                observed[c] = Observed(rates, space.repeats, seconds=3 * 10 / rate)


LADDER = (1, 2, 4, 8, 16, 32)
SPACE = Space(
    layouts=("plain", "chunked-4MiB", "chunked-16MiB"),
    ladders=dict.fromkeys(("plain", "chunked-4MiB", "chunked-16MiB"), LADDER),
    clients=(1, 2, 4),
    repeats=3,
    candidate_bytes=3 * 10**7,
)
TUNE = Tune(margin=0.10)


def test_the_search_finds_the_knee_of_the_link_with_at_most_half_the_grid():
    res, asked = run(SPACE, TUNE)
    assert res.status == "done"
    assert res.best is not None
    assert res.best.connections == TOTAL / PER_CONN  # the knee: 4 connections
    assert link(res.best) == TOTAL
    assert res.best.layout != "plain"  # plain cannot use more than its 2 files
    assert asked <= len(SPACE.grid) / 2, (asked, len(SPACE.grid))
    assert res.lines["plain"] in (PLATEAU, DROPPED)


def test_a_setting_that_fails_at_high_concurrency_is_avoided_not_averaged_in():
    # per connection 1 MB/s, total 64: the rate grows to 32 connections, but above 8 the
    # setting fails: the best is the last that worked
    space = Space(("chunked-4MiB",), {"chunked-4MiB": LADDER}, (1,), 3, 3 * 10**7)
    res, _ = run(space, TUNE, fail_above=8)
    assert res.best == Candidate("chunked-4MiB", 1, 4)  # 4: the knee under the fixed link
    assert res.lines["chunked-4MiB"] in (PLATEAU, COLLAPSE)
    res, _ = run(
        Space(("chunked-4MiB",), {"chunked-4MiB": LADDER}, (1,), 3, 3 * 10**7),
        TUNE,
        fail_above=2,
    )
    assert res.best == Candidate("chunked-4MiB", 1, 2)
    assert res.lines["chunked-4MiB"] == COLLAPSE
    failed = [c for c in res.measured if c.connections > 2]
    assert failed and res.runner_up not in failed


def test_an_outage_is_no_finding_the_search_waits_and_resumes():
    res, _ = run(SPACE, TUNE, noise=0, outage_once=Candidate("chunked-4MiB", 1, 2))
    clean, _ = run(SPACE, TUNE, noise=0)
    assert res.best == clean.best
    assert res.measured == clean.measured
    assert "outage" in " ".join(run_log(SPACE, Candidate("chunked-4MiB", 1, 2)))


def run_log(space, outage):
    """The log of a search whose round holds an outage, before it is measured again."""
    observed = {}
    while True:
        res = search(space, TUNE, observed)
        if res.status == WAITING or not res.next:
            return res.log
        for c in res.next:
            fails = c == outage
            observed[c] = Observed(() if fails else (link(c),) * 3, 3, 3 * fails, 3 * fails)


def test_the_same_records_replay_the_same_search():
    res1, _ = run(SPACE, TUNE, seed=3)
    res2, _ = run(SPACE, TUNE, seed=3)
    assert res1.log == res2.log and res1.best == res2.best


def test_a_bytes_budget_is_never_exceeded_and_says_what_it_left():
    tune = Tune(margin=0.10, budget_bytes=5 * SPACE.candidate_bytes)
    res, asked = run(SPACE, tune)
    assert asked <= 5
    assert res.spent_bytes <= tune.budget_bytes
    assert res.status == BUDGET
    assert res.unexplored


def test_the_best_is_the_fewest_connections_within_the_margin_of_the_fastest():
    res, _ = run(SPACE, TUNE)
    fastest = max(link(c) for c in res.measured)
    assert link(res.best) >= fastest * 0.9
    assert all(
        c.connections >= res.best.connections
        for c in res.measured
        if link(c) is not None and link(c) >= fastest * 0.9
    )


def _campaign(**over):
    cfg = {
        "campaign": "t",
        "remote": "scratch/r",
        "dataset": {"files": 2, "size": "1MiB", "chunk_sizes": ["256KiB"]},
        "strategies": ["plain", "chunked"],
        "concurrency": {"plain": [1, 2, 4], "chunked": [1, 2, 4, 8]},
        "repeats": 3,
        "tune": {"budget": "1GiB"},
        "sites": {"here": {"upload": True, "download": True, "scratch": "scratch/here"}},
    }
    cfg.update(over)
    return load_campaign(cfg)


def test_a_tuned_campaign_starts_each_layout_at_its_lowest_concurrency():
    c = _campaign()
    assert c.tune == Tune(0.10, budget_bytes=2**30)
    settings = {(m.layout.label, m.setting.label) for m in c.measurements()}
    assert settings == {("plain", "rclone-1x1"), ("chunked-256KiB", "rclone-1x1")}


@pytest.mark.parametrize(
    "over, said",
    [
        ({"repeats": 2}, "repeats: 3 or more"),
        ({"repeats": "auto"}, "not repeats: auto"),
        ({"concurrency": {"plain": "auto", "chunked": [1, 2]}}, "concurrency.plain"),
        ({"tune": {"budget": "lots"}}, "tune.budget"),
    ],
)
def test_a_tuned_campaign_that_cannot_search_is_refused_in_one_line(over, said):
    with pytest.raises(ConfigError, match=said.replace(".", r"\.")):
        _campaign(**over)


def test_a_time_budget_reads_as_seconds():
    assert _campaign(tune={"budget": "90m", "margin": "5%"}).tune == Tune(0.05, budget_s=5400)


def _space(*layouts, ladder=(1, 2, 4)):
    return Space(layouts, dict.fromkeys(layouts, ladder), (1,), 3, 3 * 10**7)


def test_one_failed_repeat_or_a_killed_client_is_no_finding_the_round_waits():
    sp = _space("plain")
    first = Candidate("plain", 1, 1)
    for failed in (
        Observed((5.0, 5.1), 3, failed=1),  # one of three: no majority
        Observed((5.0,), 3, failed=2, external=2),  # killed by a signal: not the setting
    ):
        res = search(sp, TUNE, {first: failed})
        assert res.status == WAITING and res.next == []
        assert not failed.collapsed
    # two of three failed by themselves while the store answered: a finding
    assert Observed((5.0,), 3, failed=2).collapsed


def test_a_layout_is_dropped_only_behind_a_setting_that_worked():
    sp = _space("plain", "chunked-1MiB")
    obs = {
        # collapsed: two of its three repeats failed; its one fast repeat leads nothing
        Candidate("plain", 1, 1): Observed((200.0,), 3, failed=2),
        Candidate("chunked-1MiB", 1, 1): Observed((100.0, 101.0, 99.0), 3),
    }
    res = search(sp, TUNE, obs)
    assert res.lines["plain"] == COLLAPSE
    assert res.next == [Candidate("chunked-1MiB", 1, 2)]  # climbs on, not dropped


def test_a_gain_inside_the_noise_is_a_plateau_not_a_climb():
    sp = _space("chunked-1MiB")
    one, two = Candidate("chunked-1MiB", 1, 1), Candidate("chunked-1MiB", 1, 2)
    obs = {one: Observed((100.0, 90.0, 110.0), 3), two: Observed((112.0, 95.0, 125.0), 3)}
    res = search(sp, TUNE, obs)  # +12% in the medians, but the factor's interval holds 1
    assert res.lines["chunked-1MiB"] == PLATEAU and res.next == []


def test_a_budget_that_cuts_a_line_says_so():
    # round 1's three fit, and one of round 2's: two layouts' climbs end at the budget
    tune = Tune(margin=0.10, budget_bytes=4 * SPACE.candidate_bytes)
    res, asked = run(SPACE, tune)
    assert asked == 4
    assert sorted(res.lines.values()).count(BUDGET) == 3  # the one kept ran out next
    assert all("budget reached" in u for u in res.unexplored)


def test_the_tuned_block_says_what_was_not_explored_only_when_something_was(tmp_path):
    """tuned.tsv read back gives NaN for an empty 'unexplored': the demo's first screen said
    'Not explored: nan' under every search that explored everything."""
    import pandas as pd

    from cloudbench.report.tuned import COLUMNS, tuned_html

    row = dict.fromkeys(COLUMNS, "")
    row.update(site="tursa", remote="main", direction="upload", tool="rclone", status="done")
    row.update(layout="chunked-4MiB", setting="rclone-1x4", clients=1, concurrency=4)
    row.update(median_mb_per_s=15.7, low_mb_per_s=15.6, high_mb_per_s=16.2, level=0.75)
    row.update(runner_up_setting=None, measurements=12, grid_measurements=12, budget="1GiB")
    path = tmp_path / "tuned.tsv"
    pd.DataFrame([row, {**row, "unexplored": "plain above 4: plateau"}]).to_csv(
        path, sep="\t", index=False
    )
    page = tuned_html(pd.read_csv(path, sep="\t"))
    assert "nan" not in page
    assert page.count("not explored") == 1 and "tursa upload, not explored: plain above 4" in page


@pytest.mark.unit
def test_the_tuning_blocks_note_names_each_searched_routes_limit():
    """Issue #50: the verdict is said in the tuning block's note too, beside the knee it
    explains; an undetermined route says nothing there."""
    import pandas as pd

    from cloudbench.report.tuned import tuned_html

    row = {"site": "tursa", "remote": "main", "direction": "upload", "tool": "rclone",
           "status": "done", "layout": "chunked-4MiB", "setting": "rclone-1x4", "clients": 1,
           "concurrency": 4, "median_mb_per_s": 16.208, "low_mb_per_s": 16.197,
           "high_mb_per_s": 16.29, "level": 0.75, "runner_up_layout": "chunked-4MiB",
           "runner_up_setting": "rclone-1x8", "runner_up_mb_per_s": 16.234, "factor": 0.998,
           "factor_low": 0.997, "factor_high": 1.007, "factor_level": 0.9,
           "clearly_ahead": False, "measurements": 12, "grid_measurements": 12,
           "spent_bytes": 402653184, "spent_s": 48.8, "budget": "1GiB moved", "margin": 0.1,
           "unexplored": None, "warning": None, "command": "rclone copy a b"}  # fmt: skip
    table = pd.DataFrame([row])
    said = tuned_html(table, {}, {("tursa", "main", "upload"): "the client's own cap"})
    assert "Limited by" in said and "the client&#x27;s own cap (tursa upload)" in said, said
    quiet = tuned_html(table, {}, {("tursa", "main", "upload"): "undetermined"})
    assert "Limited by" not in quiet
