"""Drift: whether rates trend over the rounds of a campaign, and the figure of every rate
against its start time.

A site measures in rounds (:mod:`cloudbench.campaign.order`), so a store or link that
slows over the hours lowers every layout alike instead of the layouts measured last. This
module makes that visible and tests it: per site, remote and direction, every ``ok`` rate
is divided by the median of its own measurement (layout, tool, setting), so layouts of
different speed pool, and the trend of its logarithm over the rounds is the Theil-Sen slope
with Sen's interval. A trend whose interval excludes zero is named on the front page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
import pandas as pd

from cloudbench.campaign.identity import ROUTE, keys_without

LEVEL = 0.95
MIN_ROUNDS = 3  # a trend needs at least three rounds to be told from one odd round
DRIFT_KEYS = ROUTE
DRIFT_COLUMNS = [
    *DRIFT_KEYS, "rounds", "n", "change_per_round", "change_low", "change_high", "level",
    "drift",
]  # fmt: skip


class Trend(NamedTuple):
    """A slope and its interval (``low``/``high`` None where the data cannot bound it)."""

    slope: float
    low: float | None
    high: float | None


def theil_sen(x: Sequence[float], y: Sequence[float], level: float = LEVEL) -> Trend | None:
    """The median of the slopes between every two points of different ``x``, and Sen's
    (1968) distribution-free interval: the order statistics of those slopes whose ranks come
    from the null distribution of Kendall's S (normal approximation, corrected for ties in
    ``x``, as points of one round tie). None with fewer than two distinct ``x``."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    i, j = np.triu_indices(len(xs), k=1)
    keep = xs[i] != xs[j]
    slopes = np.sort((ys[j] - ys[i])[keep] / (xs[j] - xs[i])[keep])
    m = len(slopes)
    if m == 0:
        return None
    n = len(xs)
    ties = np.unique(xs, return_counts=True)[1]
    var = (n * (n - 1) * (2 * n + 5) - float(np.sum(ties * (ties - 1) * (2 * ties + 5)))) / 18
    c = NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(max(var, 0.0))
    lo_rank = math.floor((m - c) / 2)  # 1-based ranks of the interval's ends
    hi_rank = math.ceil((m + c) / 2) + 1
    low = float(slopes[lo_rank - 1]) if lo_rank >= 1 else None
    high = float(slopes[hi_rank - 1]) if hi_rank <= m else None
    return Trend(float(np.median(slopes)), low, high)


def drift_table(transfers: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """One row per site, remote and direction: the rounds, the ok rates used, the change of
    the rate per round (a factor less 1: -0.05 is 5% slower each round) with its interval,
    and ``drift`` true when the interval excludes no change."""
    rows = []
    ok = transfers[(transfers["status"] == "ok") & (transfers["mb_per_s"] > 0)].copy()
    if ok.empty:
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    # its own measurement: the identity less the repeat (the strategy is named by the layout)
    ident = [c for c in keys_without("strategy", "repeat") if c in ok.columns]
    ok["relative"] = ok["mb_per_s"] / ok.groupby(ident, dropna=False)["mb_per_s"].transform(
        "median"
    )
    for key, g in ok.groupby(DRIFT_KEYS, sort=True):
        rounds = int(g["repeat"].nunique())
        trend = (
            theil_sen(g["repeat"].astype(float), np.log(g["relative"]), level)
            if rounds >= MIN_ROUNDS
            else None
        )

        def change(v: float | None) -> float | None:
            return None if v is None else round(math.expm1(v), 4)

        low, high = (trend.low, trend.high) if trend else (None, None)
        rows.append(
            dict(zip(DRIFT_KEYS, key, strict=True))
            | {
                "rounds": rounds,
                "n": len(g),
                "change_per_round": change(trend.slope) if trend else None,
                "change_low": change(low),
                "change_high": change(high),
                "level": level,
                "drift": bool(
                    trend is not None
                    and low is not None
                    and high is not None
                    and (low > 0 or high < 0)
                ),
            }
        )
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


def drift_sentences(table: pd.DataFrame) -> list[str]:
    """The front page's line for every trend whose interval excludes no change."""
    out = []
    for r in table[table["drift"].astype(bool)].to_dict("records") if not table.empty else []:
        way = "fell" if r["change_per_round"] < 0 else "rose"
        out.append(
            f"{r['site']} {r['direction']} ({r['remote']}): rates {way} "
            f"{abs(r['change_per_round']):.1%} per round [{r['change_low']:+.1%}, "
            f"{r['change_high']:+.1%}] {r['level']:.0%} over {r['rounds']} rounds, every "
            "layout alike (the store or link drifted during the campaign; compare layouts "
            "within a round, and see Transfers: rate against start time)"
        )
    return out


def rate_vs_start_png(transfers: pd.DataFrame, table: pd.DataFrame, path: Path) -> None:
    """Every measurement's rate against its start time, a colour per layout, a panel per
    site, remote and direction, with the rounds' spans shaded and the trend in the title."""
    from cloudbench.report import figures  # matplotlib only where a figure is drawn

    ok = transfers[transfers["status"] == "ok"].copy()
    if ok.empty:
        figures.placeholder(path, "No ok transfer yet: nothing to draw against time.")
        return
    ok["start"] = pd.to_datetime(ok["started_utc"], utc=True, errors="coerce")
    t0 = ok["start"].min()
    ok["minutes"] = (ok["start"] - t0).dt.total_seconds() / 60
    keys = list(ok.groupby(DRIFT_KEYS, sort=True).groups)
    fig, axes = figures.grid(len(keys), width=6.0, height=3.8)
    pal = figures.palette(sorted(ok["layout"].unique()))
    trends = table.set_index(DRIFT_KEYS) if not table.empty else table
    for ax, key in zip(axes, keys, strict=True):
        g = ok.set_index(DRIFT_KEYS).loc[[key]].reset_index()
        for r, part in g.groupby("repeat"):
            if r % 2 == 0:
                ax.axvspan(part["minutes"].min(), part["minutes"].max(), color="0.93", lw=0)
        for layout, part in g.groupby("layout"):
            ax.plot(part["minutes"], part["mb_per_s"], "o", color=pal[layout], label=layout)
        title = " ".join(str(k) for k in key)
        if not trends.empty and key in trends.index:
            t = trends.loc[key]
            if pd.notna(t["change_per_round"]):
                lo, hi = t["change_low"], t["change_high"]
                span = f"[{lo:+.1%}, {hi:+.1%}]" if pd.notna(lo) and pd.notna(hi) else "[unbounded]"
                title += f"\n{t['change_per_round']:+.1%} per round {span} {t['level']:.0%}"
                title += " DRIFT" if t["drift"] else ""
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("minutes since the first transfer (grey: even rounds)")
        ax.set_ylabel(figures.RATE_LABEL)
        ax.set_ylim(0, 1.15 * float(g["mb_per_s"].max()))
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    figures.save(fig, path)
