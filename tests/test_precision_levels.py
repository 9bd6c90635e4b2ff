"""``repeats: auto`` keeps its promise: the 95% interval printed after the rule stopped covers
the true median at least 95% of the time (issue: "a stopping rule changes the coverage").

Each simulated identity is measured as the campaign measures it: the first rounds, then one
repeat per round, :func:`cloudbench.campaign.precision.decide` after each, until it meets the
target or reaches the maximum; then the report's interval (``median_interval``) is checked
against the true median. Rates are skewed (lognormal, or a long slow tail: a rate that is
sometimes much lower, never much higher), with and without a slow drift (the store 0.5%
faster each round; the truth is then the median at the middle of the repeats).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cloudbench.campaign.precision import MORE, Precision, decide, first_rounds
from cloudbench.intervals import TARGET_LEVEL, median_interval

TRIALS = 2000
# 2 standard errors of a coverage of 95% over TRIALS identities: the simulation's own noise
SLACK = 2 * math.sqrt(TARGET_LEVEL * (1 - TARGET_LEVEL) / TRIALS)
TARGET = Precision(width=0.10, max_repeats=20)


def coverage(spread: float, tail: bool, drift: float, seed: int = 1) -> float:
    rng = np.random.default_rng(seed)
    first = first_rounds()
    covered = 0
    for _ in range(TRIALS):
        rates: list[float] = []
        while True:
            level = 100.0 * (1 + drift * len(rates))
            noise = 1 - rng.gamma(1.0, spread) if tail else rng.lognormal(0, spread)
            rates.append(level * noise)
            if (
                len(rates) >= first
                and decide(rates, ["ok"] * len(rates), TARGET)["decision"] != MORE
            ):
                break
        low, high, _ = median_interval(rates)
        middle = 100.0 * (1 + drift * (len(rates) - 1) / 2)
        truth = middle * (1 - spread * math.log(2)) if tail else middle
        covered += low <= truth <= high
    return covered / TRIALS


SCENARIOS = [
    pytest.param(0.08, False, 0.0, id="lognormal-8%"),
    pytest.param(0.10, False, 0.005, id="lognormal-10%-drift"),
    pytest.param(0.10, True, 0.0, id="slow-tail-10%"),
    pytest.param(0.12, True, 0.0, id="slow-tail-12%"),
]


@pytest.mark.full
@pytest.mark.parametrize(("spread", "tail", "drift"), SCENARIOS)
def test_the_printed_level_holds_after_the_rule_stops(spread, tail, drift):
    assert coverage(spread, tail, drift) >= TARGET_LEVEL - SLACK
