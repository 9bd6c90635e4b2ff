"""How `make test` shares its few rate-checking tests out between pytest-xdist workers."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from tests.conftest import expected_seconds, round_robin_order, suite_order


def _round_robin_loads(seconds: list[float], order: list[int], workers: int) -> list[float]:
    """What xdist does with fewer tests than twice its workers: test k to worker k mod n."""
    loads = [0.0] * workers
    for k, i in enumerate(order):
        loads[k % workers] += seconds[i]
    return loads


def test_the_rates_phase_of_a_past_run_is_not_paired_badly():
    # demo, local clients x2, pbsdsh, one allocation: seconds in the run that took 231 s
    seconds = [140, 88, 86, 43, 134]
    assert max(_round_robin_loads(seconds, list(range(5)), 3)) == 88 + 134  # as collected
    order = round_robin_order(seconds, 3)
    assert sorted(order) == list(range(5))
    assert max(_round_robin_loads(seconds, order, 3)) == 177  # 134 + 43; 88 + 86; 140


@pytest.mark.parametrize("seed", range(30))
def test_no_order_of_the_tests_finishes_sooner(seed):
    rng = random.Random(seed)
    workers = rng.randint(1, 4)
    seconds = [rng.randint(1, 200) for _ in range(rng.randint(1, min(2 * workers - 1, 7)))]
    order = round_robin_order(seconds, workers)
    assert sorted(order) == list(range(len(seconds)))
    best = min(
        max(_round_robin_loads(seconds, list(p), workers))
        for p in itertools.permutations(range(len(seconds)))
    )
    assert max(_round_robin_loads(seconds, order, workers)) == best


def test_long_tests_are_handed_out_first_within_their_tier():
    tiers = ["unit", "full", "quick", "full", "full", "unit"]
    seconds = [0.0, 20.0, 5.0, 93.0, 0.0, 1.0]
    # full: 93 s, 20 s, then the unlisted one; quick; unit: the longer first
    assert suite_order(tiers, seconds) == [3, 1, 4, 2, 5, 0]
    assert suite_order(["full", "full"], [0.0, 0.0]) == [0, 1]  # ties: collection order


def test_the_expected_seconds_file_lists_tests_that_exist(tmp_path):
    listed = expected_seconds()
    assert len(listed) > 10 and all(s >= 15 for s in listed.values())
    root = Path(__file__).resolve().parents[1]
    for nodeid in listed:
        path, _, name = nodeid.partition("::")
        function = name.split("[")[0]
        assert f"def {function}(" in (root / path).read_text(), nodeid
    (tmp_path / "e.tsv").write_text("# a comment\n12\ttests/x.py::t[a b]\n")
    assert expected_seconds(tmp_path / "e.tsv") == {"tests/x.py::t[a b]": 12.0}
    assert expected_seconds(tmp_path / "absent.tsv") == {}
