"""The run order: rounds, shuffled within each round, from the campaign's seed."""

from __future__ import annotations

import pytest

from cloudbench.campaign.model import Layout, Measurement, Setting
from cloudbench.campaign.order import PRIORITY_BAND, priorities, run_order

pytestmark = pytest.mark.unit

LAYOUTS = (Layout("plain", 0), Layout("multithread", 0), Layout("chunked", 4 * 2**20))


def _campaign(repeats: int = 3) -> list[Measurement]:
    return [
        Measurement(site, "main", direction, layout, r, Setting())
        for site, direction in (("edi", "upload"), ("edi", "download"), ("ral", "download"))
        for layout in LAYOUTS
        for r in range(1, repeats + 1)
    ]


def test_every_round_before_the_next_and_uploads_before_downloads():
    order = run_order(_campaign(), "seed-1")
    assert sorted(order, key=lambda m: m.key + m.site) == sorted(
        _campaign(), key=lambda m: m.key + m.site
    )  # each measurement once
    assert [m.repeat for m in order] == sorted(m.repeat for m in order)
    for r in (1, 2, 3):
        directions = [m.direction for m in order if m.repeat == r]
        assert directions == sorted(directions, key=("upload", "download").index)


def test_the_order_within_a_round_is_shuffled_and_the_seed_decides_it():
    a, b = run_order(_campaign(), "seed-1"), run_order(_campaign(), "seed-1")
    assert a == b  # recorded: the same seed, the same order, on every rerun
    rounds = [
        [m.layout.label for m in a if m.repeat == r and m.direction == "upload"] for r in (1, 2, 3)
    ]
    others = [run_order(_campaign(), f"seed-{k}") for k in range(2, 12)]
    assert any(o != a for o in others)  # another seed, another order
    # not layout after layout in every round (the same fixed order each round is what
    # would let drift pass for a difference between layouts)
    assert len({tuple(r) for r in rounds}) > 1 or any(
        len({tuple(m.layout.label for m in o if m.repeat == r and m.direction == "upload")
             for r in (1, 2, 3)}) > 1
        for o in others
    )  # fmt: skip


def test_priorities_fall_along_the_order_inside_their_band():
    order = run_order(_campaign(), "s")
    prio = priorities(order)
    values = [prio[m] for m in order]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    lo, hi = PRIORITY_BAND
    assert lo < min(values) and max(values) < hi
