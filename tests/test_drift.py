"""Drift across rounds: the Theil-Sen slope, Sen's interval, and what the report flags."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cloudbench.report.drift import drift_sentences, drift_table, theil_sen

LAYOUTS = {"plain": 100.0, "multithread": 180.0, "chunked-64MiB": 240.0}


def _campaign(rng, rounds: int, change: float, noise: float = 0.03) -> pd.DataFrame:
    """Three layouts of different speed, measured in rounds; every rate multiplied by
    (1 + change) per round, and by lognormal noise."""
    rows = []
    for r in range(1, rounds + 1):
        for layout, base in LAYOUTS.items():
            rate = base * (1 + change) ** (r - 1) * math.exp(rng.normal(0, noise))
            rows.append({
                "site": "edi", "remote": "main", "direction": "upload", "layout": layout,
                "setting": "rclone-1xauto", "tool": "rclone", "repeat": r, "status": "ok",
                "mb_per_s": rate, "started_utc": f"2026-11-24T10:{r:02d}:00Z",
            })  # fmt: skip
    return pd.DataFrame(rows)


def test_theil_sen_finds_a_straight_line_and_ignores_one_wild_point():
    x = [1, 2, 3, 4, 5, 6]
    t = theil_sen(x, [2 * v + 1 for v in x])
    assert t.slope == pytest.approx(2.0) and t.low == pytest.approx(2.0)
    wild = theil_sen(x, [3, 5, 7, 90, 11, 13])
    assert wild.slope == pytest.approx(2.0)  # the median of the slopes: not pulled to 90
    assert theil_sen([1, 1, 1], [1, 2, 3]) is None  # one round: no slope at all


def test_a_known_drift_is_found_with_its_size_and_a_steady_store_is_not_flagged():
    rng = np.random.default_rng(7)
    falling = drift_table(_campaign(rng, rounds=5, change=-0.05)).iloc[0]
    assert falling["drift"] and falling["rounds"] == 5 and falling["n"] == 15
    assert falling["change_per_round"] == pytest.approx(-0.05, abs=0.015)
    assert falling["change_low"] < -0.05 < falling["change_high"] < 0
    said = drift_sentences(drift_table(_campaign(rng, rounds=5, change=-0.05)))
    assert len(said) == 1 and said[0].startswith("edi upload (main): rates fell")
    steady = drift_table(_campaign(rng, rounds=5, change=0.0)).iloc[0]
    assert steady["change_low"] < 0 < steady["change_high"]
    two = drift_table(_campaign(rng, rounds=2, change=-0.2)).iloc[0]
    assert not two["drift"] and pd.isna(two["change_per_round"])  # too few rounds to tell


@pytest.mark.parametrize("rounds", [3, 4, 6])
def test_sens_interval_holds_its_level_on_a_steady_store(rounds):
    """Simulated campaigns with no drift: the 95% interval flags drift in at most about 5%
    of them (the normal approximation of Kendall's S is what could make it lie)."""
    rng = np.random.default_rng(rounds)
    flagged = sum(
        bool(drift_table(_campaign(rng, rounds, 0.0, noise=0.1)).iloc[0]["drift"])
        for _ in range(400)
    )
    assert flagged / 400 <= 0.05 + 0.025
