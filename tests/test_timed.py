"""A measurement's timed copy (cloudbench.measure.timed) holds the site's copy slot around
the copy, as a plain context: a slot another copy holds past the copy's time limit fails the
measurement unmeasured, saying who holds it, and the wait is in the record, never a rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudbench.campaign.model import load_campaign
from cloudbench.campaign.spec import transfer_spec
from cloudbench.measure import series, timed
from tests.test_slot import first_line, start_holder, stop

pytestmark = pytest.mark.quick


def _spec(scratch: Path):
    c = load_campaign(
        {
            "campaign": "c",
            "remote": "/tmp/r",
            "dataset": {"files": 1, "size": "1MiB"},
            "strategies": ["plain"],
            "sites": {"a": {"upload": True, "download": True, "scratch": str(scratch)}},
            "site": "a",
        }
    )
    return transfer_spec(c, next(iter(c.measurements())))


def test_a_slot_held_past_the_copys_limit_fails_it_unmeasured_naming_the_holder(tmp_path):
    spec = _spec(tmp_path / "scratch")
    holder = start_holder(Path(spec.scratch), tmp_path / "release")
    try:
        first_line(holder)  # it holds the slot
        out = tmp_path / "out"
        out.mkdir()
        copy = timed.Copy(spec, 1, "src", "dst", [], out / "r1.log", out / "r1.series.tsv")
        limit = 0.5
        rec = timed.timed_copy(copy, out / "r1.json", timeout=limit)
    finally:
        stop(holder)
    assert rec.status != "ok" and rec.get("mb_per_s") is None
    assert "held by holder release" in str(rec.error)
    assert rec.get("waited_for_slot_s") >= limit  # it waited its whole limit, and says so
    assert series.read(copy.series) == []  # nothing was copied: an empty series
