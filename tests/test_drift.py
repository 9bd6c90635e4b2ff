"""Drift across rounds: the Theil-Sen slope, Sen's interval, and what the report flags."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cloudbench.report.drift import drift_sentences, drift_table, theil_sen

pytestmark = pytest.mark.unit

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


# Simulated steady campaigns per number of rounds. A share observed over K campaigns has a
# binomial standard error of sqrt(0.05 x 0.95 / K), 0.011 over 400: the 95% interval may flag
# at most 0.05 + 0.025 (2.3 standard errors, which an interval at its level exceeds in about
# 1% of seeds), and one that flagged a steady store in 10% of campaigns could not pass.
CAMPAIGNS = 400


def _steady_campaigns(rng, campaigns: int, rounds: int, noise: float) -> pd.DataFrame:
    """``campaigns`` campaigns as :func:`_campaign` makes them with no change, each its own
    site, in one table: drift_table judges every site on its own, in one call."""
    shape = (campaigns, rounds, len(LAYOUTS))
    rates = np.array(list(LAYOUTS.values())) * np.exp(rng.normal(0, noise, shape))
    site, repeat, layout = np.indices(shape).reshape(3, -1)
    return pd.DataFrame({
        "site": [f"s{i}" for i in site], "remote": "main", "direction": "upload",
        "layout": np.array(list(LAYOUTS))[layout], "setting": "rclone-1xauto",
        "tool": "rclone", "repeat": repeat + 1, "status": "ok", "mb_per_s": rates.ravel(),
    })  # fmt: skip


@pytest.mark.parametrize("rounds", [3, 4, 6])
def test_sens_interval_holds_its_level_on_a_steady_store(rounds):
    """Simulated campaigns with no drift: the 95% interval flags drift in at most about 5%
    of them (the normal approximation of Kendall's S is what could make it lie)."""
    table = drift_table(_steady_campaigns(np.random.default_rng(rounds), CAMPAIGNS, rounds, 0.1))
    assert len(table) == CAMPAIGNS and (table["rounds"] == rounds).all()
    flagged = table["drift"].astype(bool).mean()
    assert flagged <= 0.05 + 0.025, flagged
