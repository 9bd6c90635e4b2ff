"""How `make test` shares its few rate-checking tests out between pytest-xdist workers."""

from __future__ import annotations

import itertools
import random

import pytest

from tests.conftest import round_robin_order


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
