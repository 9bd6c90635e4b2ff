"""Comparisons at their stated level, by simulation (issue: "comparisons cry wolf").

Synthetic campaigns of an unchanged store as the issue measured them: 24 measurements, 10%
lognormal noise within a campaign, each measurement's true rate moved by up to 3% between
campaigns (as a store does from week to week). The old rule (an interval below 1 is
"slower") flagged a regression in most such pairs; the verdicts now allow for a margin and
for the number of measurements compared. The simulation calls the functions compare() calls
(one test checks that compare() agrees with it on a pair) so that thousands of pairs take
seconds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cloudbench.intervals import ratio_interval, shifted_rank_p
from cloudbench.report.compare import FALSE_DISCOVERY_RATE, MARGIN, compare, verdicts

MEASUREMENTS = 24
NOISE = 0.10
WEEKLY_MOVE = 0.03
PAIRS = 400


def campaign_pair(rng, repeats: int, drop: float = 0.0, dropped: int = MEASUREMENTS):
    """Rates of campaigns A and B: B's true rates moved by up to 3%, the first ``dropped``
    measurements of B also ``drop`` slower."""
    base = rng.uniform(50, 500, MEASUREMENTS)
    moved = base * rng.uniform(1 - WEEKLY_MOVE, 1 + WEEKLY_MOVE, MEASUREMENTS)
    moved[:dropped] *= 1 - drop
    a = base[:, None] * rng.lognormal(0, NOISE, (MEASUREMENTS, repeats))
    b = moved[:, None] * rng.lognormal(0, NOISE, (MEASUREMENTS, repeats))
    return a, b


def new_verdicts(a, b) -> list[str]:
    ps = [shifted_rank_p(y, x, 1 - MARGIN, below=True) for x, y in zip(a, b, strict=True)]
    pf = [shifted_rank_p(y, x, 1 + MARGIN, below=False) for x, y in zip(a, b, strict=True)]
    return verdicts(ps, pf, FALSE_DISCOVERY_RATE)


def old_verdicts(a, b) -> list[str]:
    """The rule before: "slower" whenever the factor's interval lies below 1."""
    out = []
    for x, y in zip(a, b, strict=True):
        r = ratio_interval(y, x)
        out.append("slower" if r.high < 1 else "faster" if r.low > 1 else "no clear change")
    return out


def share_with_a_regression(repeats: int, rule, seed: int, **change) -> float:
    rng = np.random.default_rng(seed)
    hits = sum("slower" in rule(*campaign_pair(rng, repeats, **change)) for _ in range(PAIRS))
    return hits / PAIRS


@pytest.mark.parametrize("repeats", [3, 6])
def test_unchanged_store_shows_a_regression_in_at_most_5_percent_of_pairs(repeats):
    new = share_with_a_regression(repeats, new_verdicts, seed=repeats)
    old = share_with_a_regression(repeats, old_verdicts, seed=repeats)
    assert new <= 0.05, f"{new:.1%} of unchanged pairs show a regression at {repeats} repeats"
    # the simulation is the issue's: the old rule cried wolf in about half the pairs or more
    assert old >= 0.3, old


def test_a_store_wide_25_percent_drop_is_found_in_most_pairs_at_6_repeats():
    found = share_with_a_regression(6, new_verdicts, seed=11, drop=0.25)
    assert found >= 0.9, found


def test_a_25_percent_drop_of_one_measurement_is_found_often_at_6_repeats():
    """A lone change among 24 needs complete separation at 6 repeats (p = 1/924 against a
    threshold of 0.05/24): found in a good share of pairs, never at 3 repeats, where the
    page says it cannot be shown."""
    lone6 = share_with_a_regression(6, new_verdicts, seed=12, drop=0.25, dropped=1)
    lone3 = share_with_a_regression(3, new_verdicts, seed=13, drop=0.25, dropped=1)
    assert lone6 >= 0.4, lone6
    assert lone3 == 0.0


def transfers(rates) -> pd.DataFrame:
    """transfers.tsv rows of one campaign: measurement i's repeats at ``rates[i]``."""
    return pd.DataFrame(
        [
            {
                "site": "s",
                "remote": "r",
                "direction": "upload",
                "tool": "rclone",
                "layout": "plain",
                "setting": f"rclone-1x{i}",
                "repeat": k + 1,
                "status": "ok",
                "mb_per_s": v,
            }  # fmt: skip
            for i, row in enumerate(rates)
            for k, v in enumerate(row)
        ]
    )


def test_compare_gives_the_simulated_verdicts_and_says_what_they_mean():
    from cloudbench.report.compare import meaning

    rng = np.random.default_rng(5)
    a, b = campaign_pair(rng, 6, drop=0.25, dropped=3)
    out = compare(transfers(a), transfers(b))
    by_setting = dict(zip(out["setting"], out["verdict"], strict=True))
    expected = new_verdicts(a, b)
    assert [by_setting[f"rclone-1x{i}"] for i in range(MEASUREMENTS)] == expected
    assert "slower" in expected
    assert "more than 5%" in meaning(out) and "false discovery rate" in meaning(out)
    assert out["n_a"].dtype.name == "Int64"
    assert all(len(repr(v)) <= 8 for v in out["median_a"])  # 4 significant digits


def test_three_repeats_say_a_lone_change_cannot_be_shown():
    from cloudbench.report.compare import meaning

    rng = np.random.default_rng(6)
    a, b = campaign_pair(rng, 3)
    text = meaning(compare(transfers(a), transfers(b)))
    assert "cannot be shown among 24" in text and "0.05" in text


# --- "best": one claim about every rival at once --------------------------------------------


def best_claims(repeats: int, factor: float, runs: int, seed: int = 1) -> tuple[float, float]:
    """Share of simulated groups (four layouts, 10% lognormal noise, the first ``factor``
    times the others) whose fastest layout the headline calls clearly ahead of every other,
    and the lowest joint level it stated for such a claim (NaN: none made)."""
    from cloudbench.report.headline import _clear

    rng = np.random.default_rng(seed)
    claims, levels = 0, [math.nan]
    for _ in range(runs):
        rates = [t * rng.lognormal(0, NOISE, repeats) for t in (100 * factor, 100, 100, 100)]
        group = pd.DataFrame({"layout": list("abcd"), "rates": rates})
        best = group.iloc[int(np.argmax([np.median(r) for r in rates]))]
        clear, level = _clear(group, best)
        claims += clear
        levels.append(level if clear else math.nan)
    return claims / runs, float(np.nanmin(levels)) if claims else math.nan


@pytest.mark.parametrize("repeats", [3, 5])
@pytest.mark.parametrize("factor", [1.0, 1.05])  # all equal; the first exactly at the margin
def test_best_is_claimed_falsely_no_more_often_than_its_stated_joint_level_allows(repeats, factor):
    """Where no layout is ahead of every other by more than the margin, "best ... ahead of
    all 3 others at once, jointly at L" may be said in at most 1 - L of groups (2026-11-26:
    0.4% and 0.25% at 3 repeats, stated 70%; 0% and 0.05% at 5, stated 95%)."""
    from cloudbench.report.headline import BEST_MARGIN

    assert factor <= BEST_MARGIN
    share, level = best_claims(repeats, factor, runs=2000)
    assert share <= 1 - (level if not math.isnan(level) else 0.95), (share, level)


def test_a_clearly_faster_layout_is_named_best_in_most_groups():
    """The power that buys: 1.5 x the others is claimed in 90% of groups at 3 repeats and
    98% at 6 (2026-11-26); 1.3 x in about half at 6."""
    assert best_claims(3, 1.5, runs=500)[0] > 0.8
    assert best_claims(6, 1.5, runs=500)[0] > 0.9
