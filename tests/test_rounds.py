"""The rounds protocol (cloudbench.campaign.rounds): what a site measures after its first
rounds, replayed from the states its checkpoints wrote, alike for repeats by precision and
for the tuning mode, whether the states come from Snakemake's checkpoint or from the files a
stopped run left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudbench.campaign import rounds
from cloudbench.campaign.model import load_campaign

pytestmark = pytest.mark.unit

SITE = {"a": {"upload": True, "download": True, "scratch": "/tmp/s"}}


def _auto():
    return load_campaign(
        {
            "campaign": "c",
            "remote": "/tmp/r",
            "dataset": {"files": 1, "size": "1MiB", "chunk_sizes": ["256KiB"]},
            "strategies": ["plain", "chunked"],
            "repeats": "auto",
            "precision": {"width": "10%", "max_repeats": 9},
            "sites": SITE,
            "site": "a",
        }
    )


def _tuned():
    return load_campaign(
        {
            "campaign": "c",
            "remote": "/tmp/r",
            "dataset": {"files": 2, "size": "1MiB"},
            "strategies": ["plain"],
            "concurrency": {"plain": [1, 2, 4]},
            "repeats": 3,
            "tune": {"budget": "1GiB"},
            "sites": SITE,
            "site": "a",
        }
    )


def _decision(layout: str, direction: str, decision: str) -> dict:
    return {
        "site": "a", "remote": "r", "direction": direction, "layout": layout,
        "setting": "rclone-1xauto", "decision": decision,
    }  # fmt: skip


# after round 6 (the first rounds) the chunked upload needs more, after round 7 still, after
# round 8 it met the target; every other identity met it after round 6
AUTO_STATES = {
    6: {
        "decisions": [
            _decision("plain", "upload", "met target"),
            _decision("chunked-256KiB", "upload", "more"),
            _decision("plain", "download", "met target"),
        ]
    },
    7: {"decisions": [_decision("chunked-256KiB", "upload", "more")]},
    8: {"decisions": [_decision("chunked-256KiB", "upload", "met target")]},
}


def _labels(ms):
    return [(m.direction, m.layout.label, m.setting.label, m.repeat) for m in ms]


def test_repeats_by_precision_replay_the_rounds_each_state_asked_for():
    search = rounds.of(_auto(), "a")
    assert search.first == 6 and search.checkpoint == "precision"
    assert _labels(rounds.later(search, AUTO_STATES.get)) == [
        ("upload", "chunked-256KiB", "rclone-1xauto", 7),
        ("upload", "chunked-256KiB", "rclone-1xauto", 8),
    ]
    assert rounds.last(search, AUTO_STATES.get) == 8


def test_a_precision_round_rests_on_every_repeat_of_what_it_measured_and_the_round_before():
    c = _auto()
    search = rounds.of(c, "a")
    first = search.rests_on(6, AUTO_STATES.get)
    assert sorted(_labels(first)) == sorted(_labels(c.measurements()))  # all of the first rounds
    assert search.previous(6) == []
    eighth = search.rests_on(8, AUTO_STATES.get)
    assert _labels(eighth) == [
        ("upload", "chunked-256KiB", "rclone-1xauto", r) for r in range(1, 9)
    ]
    assert search.previous(8) == [7]
    assert search.state_path("res", 7) == "res/sites/a/precision/round-7.json"


def _search_state(nexts: list[str], settled: list[str] = ()) -> dict:
    """A tuning state with one search whose next round measures these settings."""
    return {
        "site": "a",
        "searches": [
            {
                "remote": "r", "direction": "upload", "tool": "rclone",
                "next": [{"layout": "plain", "setting": s} for s in nexts],
                "settled": [{"layout": "plain", "setting": s} for s in settled],
            }
        ],
    }  # fmt: skip


TUNE_STATES = {
    1: _search_state(["rclone-1x2"]),
    2: _search_state(["rclone-1x4"]),
    3: _search_state([], settled=["rclone-1x4"]),
}


def test_the_tuning_searches_replay_the_rounds_each_state_asked_for():
    c = _tuned()
    search = rounds.of(c, "a")
    assert search.first == 1 and search.checkpoint == "tune"
    later = rounds.later(search, TUNE_STATES.get)
    assert [(m.setting.label, m.repeat) for m in later] == [
        (s, r) for s in ("rclone-1x2", "rclone-1x4") for r in (1, 2, 3)
    ]
    assert rounds.last(search, TUNE_STATES.get) == 3
    # round k's state rests on every record of the searches so far: the first round, then
    # what each round before asked for; it builds on no earlier state's file
    assert search.rests_on(3, TUNE_STATES.get) == [*c.measurements(), *later]
    assert search.rests_on(1, TUNE_STATES.get) == list(c.measurements())
    assert search.previous(3) == []


def _write(results: Path, search, states: dict) -> None:
    for k, state in states.items():
        path = Path(search.state_path(str(results), k))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state))


@pytest.mark.parametrize("campaign, states", [(_auto, AUTO_STATES), (_tuned, TUNE_STATES)])
def test_a_stopped_run_owes_what_its_files_asked_for_as_the_run_would_have(
    tmp_path, campaign, states
):
    """The hooks read the states a run left (rounds.on_disk) and replay them as the input
    functions replay the checkpoint's: the same transfers; a round not decided yet ends it."""
    search = rounds.of(campaign(), "a")
    on_disk = rounds.on_disk(search, str(tmp_path))
    assert rounds.later(search, on_disk) == []  # nothing decided yet
    _write(tmp_path, search, states)
    assert rounds.later(search, on_disk) == rounds.later(search, states.get)
    first_only = {search.first: states[search.first]}
    Path(search.state_path(str(tmp_path), search.first + 1)).unlink()
    assert rounds.later(search, on_disk) == rounds.later(search, first_only.get)
    assert rounds.later(search, on_disk)  # the first state asked for more


def test_a_settled_failure_is_read_from_the_newest_state_at_each_call(tmp_path):
    """Not cached: a checkpoint that writes a newer state mid-run is seen by the next call."""
    c = _tuned()
    search = rounds.of(c, "a")
    failing = next(
        m for m in rounds.later(search, TUNE_STATES.get) if m.setting.label == "rclone-1x4"
    )
    assert not rounds.settled(c, str(tmp_path), failing)  # no state yet
    _write(tmp_path, search, {1: TUNE_STATES[1], 2: TUNE_STATES[2]})
    assert not rounds.settled(c, str(tmp_path), failing)
    _write(tmp_path, search, {3: TUNE_STATES[3]})
    assert rounds.settled(c, str(tmp_path), failing)
    # repeats by precision settle nothing: a failed repeat is measured again
    assert not rounds.settled(_auto(), str(tmp_path), failing)


def test_a_fixed_number_of_repeats_has_no_rounds():
    c = load_campaign(
        {
            "campaign": "c",
            "remote": "/tmp/r",
            "dataset": {"files": 1, "size": "1MiB"},
            "strategies": ["plain"],
            "sites": SITE,
            "site": "a",
        }
    )
    assert rounds.of(c, "a") is None


def test_a_stopped_run_names_the_first_rounds_and_the_later_ones_its_files_asked_for(tmp_path):
    """What the hooks say a stopped run owes (site.lifecycle.owed: its kept transfers, its
    one stopped line): the first rounds, then the rounds the states on disk asked for."""
    from cloudbench.site import lifecycle

    c = _auto()
    search = rounds.of(c, "a")
    run = lifecycle.Run(c, str(tmp_path), str(tmp_path / "run.json"), str, str)
    assert lifecycle.owed(run) == list(c.measurements())
    _write(tmp_path, search, AUTO_STATES)
    later = rounds.later(search, AUTO_STATES.get)
    assert len(later) == 2 and lifecycle.owed(run) == [*c.measurements(), *later]
