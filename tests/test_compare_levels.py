"""Comparisons at their stated level and with power, by simulation (issue #49, item 1).

Synthetic campaign pairs as the issues measured them: 24 measurements, 10% lognormal noise
within a campaign, each measurement's true rate moved by up to 3% between campaigns (as a
store does from week to week, within the 5% margin). The figures held, each over seeded
simulated pairs:

* pairs that differ only by noise flag anything (slower or faster) in at most 5%, at 3 and at
  6 repeats; likewise when routes' noise differs (half at 5%, half at 20%; one at 20% among
  23 at 5%; one at 5% among 23 at 20%) and when one repeat of one measurement stalls (x2, at
  the edge of being set aside, and x4 slower);
* one measurement's 25% drop among 24 is found in at least 80% of pairs at 6 repeats (the
  exact test per measurement this replaces: 24% on issue #49's runs, 45% on this file's
  seeds, which asserted 40%), with equal noise, on a quiet route among mixed ones (12 or 23
  of them at 20%), and with a stall elsewhere; a store-wide drop in nearly all;
* every simulated row's verdict and printed interval agree: slower exactly when the interval
  lies wholly below 1 - margin, faster exactly when wholly above 1 + margin.

The simulation calls the function compare() calls (moderated.moderated) on thousands of pairs
at once; test_compare_gives_the_simulated_verdicts holds compare() to it on a pair.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cloudbench.report.compare import FALSE_DISCOVERY_RATE, MARGIN, compare
from cloudbench.report.moderated import moderated

pytestmark = pytest.mark.unit

MEASUREMENTS = 24
NOISE = 0.10
WEEKLY_MOVE = 0.03
MIXED = np.array([0.05] * 12 + [0.20] * 12)  # per measurement: quiet routes, then noisy ones
# one route unlike the 23 others: the pool's noise is not its own (one prior for all lent it
# theirs: a quiet route's drop found in 49% of pairs, a noisy route flagged 7% of unchanged
# pairs at 3 repeats)
ONE_QUIET = np.array([0.05] + [0.20] * 23)
ONE_NOISY = np.array([0.05] * 23 + [0.20])
STALL = 4.0  # a stalled repeat: the measurement's rate divided by this (an outage waited out)
# Pairs per simulation. A share observed over K pairs has a binomial standard error of
# sqrt(p (1 - p) / K). Unchanged pairs, K = 1000: 0.69 points at 5%, so the bound below is
# 6.6% and a rule that really flagged 10% of pairs could not pass it; the achieved shares
# (0.2-1.4% equal noise, 0.1-4.2% mixed, 0.4-1.6% with a stall) sit 3 or more errors below
# it. Power, K = 2000: 0.89 points at 80%, the bound 82.1%, which a rule with 80% fails in
# 99 seeds of 100; the achieved 84.1% (20,000 pairs: 84.6%, 85.1% before a route whose
# spread is in the pool's top 1% kept its own) is 2.2 errors above it.
NULL_PAIRS = 1000
POWER_PAIRS = 2000


def campaign_pairs(
    rng, pairs: int, repeats: int, drop: float = 0.0, dropped: int = MEASUREMENTS,
    noise=NOISE, stall: float | None = None, stall_in: str = "b",
):  # fmt: skip
    """Rates of ``pairs`` campaign pairs A and B, each (pairs, 24, repeats): B's true rates
    moved by up to 3%, the first ``dropped`` measurements of B also ``drop`` slower; lognormal
    ``noise`` (one, or one per measurement); with ``stall``, one repeat of one random
    measurement per pair divided by it, in B (``stall_in="b"``) or in either campaign
    ("either"), never in the first (the dropped) measurement when that one is dropped."""
    base = rng.uniform(50, 500, (pairs, MEASUREMENTS))
    moved = base * rng.uniform(1 - WEEKLY_MOVE, 1 + WEEKLY_MOVE, (pairs, MEASUREMENTS))
    moved[:, :dropped] *= 1 - drop
    sigma = np.broadcast_to(np.asarray(noise, dtype=float), (MEASUREMENTS,))[None, :, None]
    a = base[..., None] * np.exp(sigma * rng.standard_normal((pairs, MEASUREMENTS, repeats)))
    b = moved[..., None] * np.exp(sigma * rng.standard_normal((pairs, MEASUREMENTS, repeats)))
    if stall:
        first = dropped if drop and dropped < MEASUREMENTS else 0
        where = rng.integers(first, MEASUREMENTS, pairs), rng.integers(0, repeats, pairs)
        in_a = (
            rng.integers(0, 2, pairs).astype(bool)
            if stall_in == "either"
            else np.zeros(pairs, bool)
        )
        rows = np.arange(pairs)
        a[rows[in_a], where[0][in_a], where[1][in_a]] /= stall
        b[rows[~in_a], where[0][~in_a], where[1][~in_a]] /= stall
    return a, b


def simulate(repeats: int, seed: int, pairs: int, **change):
    """The comparison of every simulated pair, as compare() makes it."""
    rng = np.random.default_rng(seed)
    return moderated(*campaign_pairs(rng, pairs, repeats, **change), MARGIN, FALSE_DISCOVERY_RATE)


def flagging(result) -> float:
    """Share of pairs with any verdict, slower or faster."""
    return float((result.slower | result.faster).any(axis=-1).mean())


def binomial_bound(level: float, runs: int) -> float:
    """The most a share observed over ``runs`` may exceed a stated ``level`` by (2.33
    binomial standard errors: a rule that holds its level fails this in under 1% of
    seeds)."""
    return level + 2.33 * math.sqrt(level * (1 - level) / runs)


def power_bound(power: float, runs: int) -> float:
    """The least share over ``runs`` that shows a power of at least ``power`` (2.33 errors)."""
    return power + 2.33 * math.sqrt(power * (1 - power) / runs)


def verdicts_agree_with_intervals(result) -> bool:
    """slower exactly when the interval lies wholly below 1 - margin, faster wholly above
    1 + margin (the interval printed is at the level the verdicts used)."""
    tested = ~np.isnan(result.p_slower)
    below = tested & (result.high < 1 - MARGIN)
    above = tested & (result.low > 1 + MARGIN)
    return bool((below == result.slower).all() and (above == result.faster).all())


UNCHANGED = {
    "equal noise": {},
    "mixed noise": {"noise": MIXED},
    "one noisy route among quiet ones": {"noise": ONE_NOISY},
    "one quiet route among noisy ones": {"noise": ONE_QUIET},
    "a stall x4": {"stall": STALL},
    "a stall x2": {"stall": 2.0},  # at the edge of being set aside: often kept
}


@pytest.mark.parametrize("repeats", [3, 6])
@pytest.mark.parametrize("case", list(UNCHANGED))
def test_unchanged_pairs_flag_anything_in_at_most_5_percent(case, repeats):
    result = simulate(repeats, seed=repeats + 10 * list(UNCHANGED).index(case),
                      pairs=NULL_PAIRS, **UNCHANGED[case])  # fmt: skip
    share = flagging(result)
    assert share <= binomial_bound(FALSE_DISCOVERY_RATE, NULL_PAIRS), (
        f"{share:.1%} of unchanged pairs flag something at {repeats} repeats ({case})"
    )
    assert verdicts_agree_with_intervals(result)


CHANGED = {
    "equal noise": {},
    "a quiet route among mixed": {"noise": MIXED},  # the dropped route is at 5%
    "the one quiet route among noisy ones": {"noise": ONE_QUIET},  # at 5%, 23 at 20%
    "a stall elsewhere": {"stall": STALL, "stall_in": "either"},
}


@pytest.mark.parametrize("case", list(CHANGED))
def test_one_measurements_25_percent_drop_is_found_in_80_percent_of_pairs(case):
    """One measurement of 24 slowed by 25%, 6 repeats: found (that measurement slower) in at
    least 80% of pairs, within the binomial error of POWER_PAIRS (the old exact test per
    measurement: 24%). A route at 20% noise cannot show a 25% drop at 6 repeats (under 2
    standard errors: a test that knew its noise exactly finds it in 15% of pairs; this one in
    15%), and a 10% route among routes at 5% and 20% has little noise to share (70%):
    docs/method.md says so. Achieved: 84.1%, 100% on the quiet route among mixed, 89.9% on
    the one quiet route among 23 noisy ones (its own spread kept: 48.8% when it was lent
    theirs), 83.9% with a stall."""
    result = simulate(6, seed=100 + list(CHANGED).index(case), pairs=POWER_PAIRS,
                      drop=0.25, dropped=1, **CHANGED[case])  # fmt: skip
    found = float(result.slower[:, 0].mean())
    assert found >= power_bound(0.80, POWER_PAIRS), f"{found:.1%} found ({case})"
    assert verdicts_agree_with_intervals(result)


def test_a_stall_on_the_changed_measurement_is_set_aside_not_read():
    """A stall in A's repeats of the dropped measurement would hide the drop; set aside, it
    counts as a repeat not measured: the comparison is that of 5 repeats against 6 (the drop
    then found in 80% of pairs, against 85% with all 6)."""
    rng = np.random.default_rng(7)
    a, b = campaign_pairs(rng, NULL_PAIRS, 6, drop=0.25, dropped=1)
    stalled, missing = a.copy(), a.copy()
    stalled[:, 0, 0] /= STALL
    missing[:, 0, 0] = np.nan
    result = moderated(stalled, b, MARGIN, FALSE_DISCOVERY_RATE)
    without = moderated(missing, b, MARGIN, FALSE_DISCOVERY_RATE)
    assert (result.set_aside[:, 0] == 1).all() and (result.set_aside[:, 1:] == 0).all()
    assert (result.slower == without.slower).all() and (result.high == without.high).all()
    assert (moderated(a, b, MARGIN, FALSE_DISCOVERY_RATE).set_aside == 0).all()


def test_a_store_wide_25_percent_drop_is_found_in_nearly_all_pairs():
    result = simulate(6, seed=11, pairs=NULL_PAIRS, drop=0.25)
    assert float(result.slower.any(axis=-1).mean()) >= 0.99
    assert not result.faster.any()


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
    a, b = campaign_pairs(rng, 1, 6, drop=0.25, dropped=3, stall=STALL)
    out = compare(transfers(a[0]), transfers(b[0]))
    expected = moderated(a, b, MARGIN, FALSE_DISCOVERY_RATE)
    row = {s: r for s, r in zip(out["setting"], out.to_dict("records"), strict=True)}
    verdict = np.where(
        expected.slower, "slower", np.where(expected.faster, "faster", "no clear change")
    )[0]
    assert [row[f"rclone-1x{i}"]["verdict"] for i in range(MEASUREMENTS)] == list(verdict)
    assert "slower" in verdict and sum(r["set_aside"] for r in row.values()) == 1
    for i in range(MEASUREMENTS):  # the printed interval is the one the verdict used
        r = row[f"rclone-1x{i}"]
        assert r["low"] == pytest.approx(expected.low[0, i], rel=1e-3)
        assert r["high"] == pytest.approx(expected.high[0, i], rel=1e-3)
        assert (r["verdict"] == "slower") == (r["high"] < 1 - MARGIN)
    assert out["level"].to_numpy() == pytest.approx(float(expected.level[0]), rel=1e-3)
    text = meaning(out)
    assert "moderated t" in text and "more than 5%" in text and "wholly below 0.95" in text


def test_three_repeats_say_a_lone_change_needs_a_large_one():
    """Was: "cannot be shown" (the exact test's smallest p of 0.05 at 3 against 3, the flaw
    issue #49 names); now a lone change can be shown at 3 repeats, less often than at 6."""
    from cloudbench.report.compare import meaning

    rng = np.random.default_rng(6)
    a, b = campaign_pairs(rng, 1, 3)
    text = meaning(compare(transfers(a[0]), transfers(b[0])))
    assert "With 3 repeats only a large change of one measurement among 24" in text
    lone3 = simulate(3, seed=13, pairs=NULL_PAIRS, drop=0.25, dropped=1)
    assert 0.2 <= float(lone3.slower[:, 0].mean()) < 0.8


# --- "best": one claim about every rival at once --------------------------------------------


BEST_RUNS = 500  # groups per simulation: 2.33 standard errors of a 5% share are 2.3 points


def best_claims(repeats: int, factor: float, runs: int, seed: int = 1) -> tuple[float, float]:
    """Share of simulated groups (four layouts, 10% lognormal noise, the first ``factor``
    times the others) whose fastest layout the headline calls clearly ahead of every other,
    and the lowest joint level it stated for such a claim (NaN: none made)."""
    from cloudbench.report.headline import _clear

    rng = np.random.default_rng(seed)
    truth = np.array([100 * factor, 100, 100, 100])
    rates = truth[:, None] * rng.lognormal(0, NOISE, (runs, 4, repeats))
    fastest = np.argmax(np.median(rates, axis=2), axis=1)
    # every group one slice of a frame (a frame made per group took twice _clear's time)
    groups = pd.DataFrame(
        {"layout": list("abcd") * runs, "rates": list(rates.reshape(-1, repeats))}
    )
    claims, levels = 0, [math.nan]
    for run, best in enumerate(fastest):
        group = groups.iloc[4 * run : 4 * run + 4]
        clear, level = _clear(group, {"layout": "abcd"[best], "rates": rates[run, best]})
        claims += clear
        levels.append(level if clear else math.nan)
    return claims / runs, float(np.nanmin(levels)) if claims else math.nan


@pytest.mark.parametrize("repeats", [3, 5])
@pytest.mark.parametrize("factor", [1.0, 1.05])  # all equal; the first exactly at the margin
def test_best_is_claimed_falsely_no_more_often_than_its_stated_joint_level_allows(repeats, factor):
    """Where no layout is ahead of every other by more than the margin, "best ... ahead of
    all 3 others at once, jointly at L" may be said in at most 1 - L of groups, within the
    binomial error of BEST_RUNS groups (2026-11-26, over 2000 groups: 0.4% and 0.25% at 3
    repeats, stated 70%; 0% and 0.05% at 5, stated 95%)."""
    from cloudbench.report.headline import BEST_MARGIN

    assert factor <= BEST_MARGIN
    share, level = best_claims(repeats, factor, runs=BEST_RUNS)
    stated = level if not math.isnan(level) else 0.95
    assert share <= binomial_bound(1 - stated, BEST_RUNS), (share, level)


def test_a_clearly_faster_layout_is_named_best_in_most_groups():
    """The power that buys: 1.5 x the others is claimed in 90% of groups at 3 repeats and
    98% at 6 (2026-11-26); 1.3 x in about half at 6."""
    assert best_claims(3, 1.5, runs=BEST_RUNS)[0] > 0.8
    assert best_claims(6, 1.5, runs=BEST_RUNS)[0] > 0.9


def test_the_page_says_how_many_measurements_keep_their_own_noise():
    """One route at 5% among 23 at 20% keeps its own noise, and the page says so."""
    from cloudbench.report.compare import meaning

    rng = np.random.default_rng(9)
    a, b = campaign_pairs(rng, 1, 6, noise=ONE_QUIET)
    a[0, 0] = np.exp(np.log(a[0, 0]).mean() + 0.01 * np.arange(-3, 3))  # surely quiet
    table = compare(transfers(a[0]), transfers(b[0]))
    assert table.attrs["own_noise"] >= 1 and table["own_noise"].sum() == table.attrs["own_noise"]
    assert table.loc[table["setting"] == "rclone-1x0", "own_noise"].item()  # compare.tsv says which
    assert "keeps its own" in meaning(table) or "keep their own" in meaning(table)
