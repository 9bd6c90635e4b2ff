"""How the rate grows with clients and with each client's concurrency: the knee and collapses.

A sweep is a curve: the ok repeats' rates at each value of one knob (clients, or a client's
concurrency) with everything else held fixed. A curve belongs to one tool: two tools
are two curves, two knees and two recommendations, never one pooled sweep.

A repeat that failed (or arrived corrupt) delivered nothing: it counts as 0 MB/s at its
value, so a value where repeats failed pulls its median down and can be a collapse; it is
never dropped. The knee is the smallest value whose median reaches a stated fraction of the
best median on the curve: where adding more stops paying. Its spread is a bootstrap range
(each value's repeats resampled, the knee found again, the 2.5th and 97.5th percentiles
kept): a picture of how firm the knee is, with no coverage claimed (at 3 repeats per value
the resampled medians are the repeats themselves). A collapse is a value whose factor over
the best smaller value is below ``COLLAPSE_RATIO`` with its exact interval
(:func:`cloudbench.intervals.ratio_interval`) entirely below 1: incast, throttling, a store
that falls over. It is flagged, never averaged away.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cloudbench.campaign.clients import capped_by_rclone_flags
from cloudbench.campaign.identity import keys_through, keys_without
from cloudbench.intervals import (
    MIN_REPEATS_FOR_INTERVAL,
    level_text,
    median_interval,
    ratio_interval,
)
from cloudbench.report.labels import rate as rate_text
from cloudbench.report.stats import with_setting

N_BOOT = 10_000  # resamples of the knee's bootstrap range
SEED = 2026  # the same records draw the same range
KNEE_RANGE = 0.95  # the share of resampled knees its range holds (no coverage claimed)
DELIVERED_NOTHING = ("failed", "corrupt")  # statuses that count as 0 MB/s in a sweep
KNEE_FRACTION = 0.90  # the knee: the first value whose median reaches 90% of the best
COLLAPSE_RATIO = 0.90  # a collapse: at least 10% below a smaller value, and significant
AXES = {"clients": "clients", "concurrency": "concurrency"}  # knob -> column
# one curve's identity: a measurement's identity less the swept knob (the setting, which
# names the clients and the concurrency), the repeat and the strategy the layout names
CURVE_KEYS = keys_without("strategy", "setting", "repeat")
SCALING_COLUMNS = [
    *CURVE_KEYS, "axis", "held", "values", "knee", "knee_low", "knee_high", "best",
    "best_median", "saturated", "failed", "collapse",
]  # fmt: skip
POINT_COLUMNS = [
    *CURVE_KEYS, "clients", "concurrency", "n", "failed", "median", "low", "high", "level",
]  # fmt: skip


@dataclass(frozen=True)
class Knee:
    value: float  # the smallest swept value whose median reaches fraction x the best
    low: float  # bootstrap range of that value (nan with fewer than 3 repeats somewhere)
    high: float
    best: float  # the value with the best median
    best_median: float
    fraction: float


@dataclass(frozen=True)
class Collapse:
    value: float  # the slower, larger value
    than: float  # the smaller value it is slower than (the best below it)
    ratio: float  # median(value) / median(than)
    low: float
    high: float
    level: float  # coverage of [low, high]
    failed: int  # repeats at ``value`` that delivered nothing (counted as 0 MB/s)


def _sorted(curve: Mapping[float, Sequence[float]]) -> tuple[np.ndarray, list[np.ndarray]]:
    xs = sorted(v for v, r in curve.items() if len(r))
    return np.asarray(xs, float), [np.asarray(curve[x], float) for x in xs]


def _first_reaching(medians: np.ndarray, fraction: float) -> np.ndarray:
    """Index of the first column whose median reaches ``fraction`` x the row's best."""
    return np.argmax(medians >= fraction * medians.max(axis=-1, keepdims=True), axis=-1)


def knee(
    curve: Mapping[float, Sequence[float]],
    fraction: float = KNEE_FRACTION,
    n: int = N_BOOT,
    seed: int = SEED,
) -> Knee | None:
    """The knee of one curve (value -> ok rates); None with fewer than two values."""
    xs, rates = _sorted(curve)
    if xs.size < 2:
        return None
    medians = np.array([np.median(r) for r in rates])
    at = int(_first_reaching(medians, fraction))
    best = int(np.argmax(medians))
    low = high = math.nan
    if min(r.size for r in rates) >= MIN_REPEATS_FOR_INTERVAL:
        rng = np.random.default_rng(seed)
        boot = np.column_stack(
            [np.median(r[rng.integers(0, r.size, (n, r.size))], axis=1) for r in rates]
        )
        knees = xs[_first_reaching(boot, fraction)]
        tail = (1 - KNEE_RANGE) / 2
        low = float(np.quantile(knees, tail, method="lower"))
        high = float(np.quantile(knees, 1 - tail, method="higher"))
    return Knee(float(xs[at]), low, high, float(xs[best]), float(medians[best]), fraction)


def collapses(
    curve: Mapping[float, Sequence[float]],
    ratio: float = COLLAPSE_RATIO,
) -> list[Collapse]:
    """Values significantly slower than the best smaller value: the median ratio is below
    ``ratio`` and its exact interval lies entirely below 1 (needs 3 repeats each; a failed
    repeat is a 0 MB/s repeat)."""
    xs, rates = _sorted(curve)
    out = []
    for i in range(1, xs.size):
        below = [j for j in range(i) if rates[j].size >= MIN_REPEATS_FOR_INTERVAL]
        if rates[i].size < MIN_REPEATS_FOR_INTERVAL or not below:
            continue
        j = max(below, key=lambda k: np.median(rates[k]))
        r = ratio_interval(rates[i], rates[j])
        if r.ratio < ratio and r.high < 1:
            failed = int((rates[i] == 0).sum())
            out.append(
                Collapse(float(xs[i]), float(xs[j]), r.ratio, r.low, r.high, r.level, failed)
            )
    return out


def delivered(transfers: pd.DataFrame) -> pd.DataFrame:
    """The rows a sweep is drawn from: ``ok`` repeats with their rate, and repeats that
    delivered nothing (failed, corrupt) as 0 MB/s with ``failed`` set; the rest (not yet
    verified) are left out. Tables without a tool column measured with rclone."""
    t = with_setting(transfers)
    if "tool" not in t:
        t = t.assign(tool="rclone")
    ok = (t["status"] == "ok") & t["mb_per_s"].notna()
    nothing = t["status"].isin(DELIVERED_NOTHING)
    out = t[ok | nothing].copy()
    out["failed"] = nothing[ok | nothing]
    out.loc[out["failed"], "mb_per_s"] = 0.0
    return out


def curves(transfers: pd.DataFrame) -> list[tuple[dict, str, float, dict[float, np.ndarray]]]:
    """Every sweep in a campaign's transfers: (curve keys, axis, value of the other knob
    held fixed, {value: rates, failed repeats as 0}); only curves with at least two values."""
    rows = delivered(transfers)
    if rows.empty or "clients" not in rows or "concurrency" not in rows:
        return []
    out = []
    for axis, col in AXES.items():
        other = "concurrency" if axis == "clients" else "clients"
        for key, g in rows.groupby([*CURVE_KEYS, other], sort=False):
            curve = {float(v): gg["mb_per_s"].to_numpy(float) for v, gg in g.groupby(col)}
            if len(curve) >= 2:
                out.append(
                    (dict(zip([*CURVE_KEYS, other], key, strict=True)), axis, key[-1], curve)
                )
    return out


def saturated(k: Knee, largest: float) -> bool:
    """Whether the sweep found where adding more stops paying: the knee lies below the
    largest value swept. A knee at the largest value means the rate still grew there."""
    return k.value < largest


def scaling_table(transfers: pd.DataFrame, n: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """One row per sweep: its knee with interval, its best value, and any collapse."""
    rows = []
    for keys, axis, held, curve in curves(transfers):
        k = knee(curve, n=n, seed=seed)
        flags = collapses(curve)
        rows.append({
            **{c: keys[c] for c in CURVE_KEYS}, "axis": axis, "held": held,
            "values": ",".join(_n(v) for v in sorted(curve)),
            "knee": k.value, "knee_low": k.low, "knee_high": k.high,
            "best": k.best, "best_median": k.best_median,
            "saturated": saturated(k, max(curve)),
            "failed": int(sum((r == 0).sum() for r in curve.values())),
            "collapse": "; ".join(collapse_text(c) for c in flags),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=SCALING_COLUMNS)


def collapse_text(c: Collapse) -> str:
    """``64 is x0.42 [0.30, 0.55] 90% of 16 (1 of 3 failed)``: the table's and the figure's
    words for a collapse (the figure reads the value back from the start)."""
    failed = f" ({c.failed} failed)" if c.failed else ""
    return (
        f"{_n(c.value)} is x{c.ratio:.2f} [{c.low:.2f}, {c.high:.2f}] "
        f"{level_text(c.level)} of {_n(c.than)}{failed}"
    )


def point_table(transfers: pd.DataFrame) -> pd.DataFrame:
    """Median rate with its interval, coverage, n and failed repeats (each counted as
    0 MB/s) at every clients x concurrency point of every tool."""
    rows = delivered(transfers)
    if rows.empty or "clients" not in rows:
        return pd.DataFrame(columns=POINT_COLUMNS)
    out = []
    for key, g in rows.groupby([*CURVE_KEYS, "clients", "concurrency"], sort=True):
        r = g["mb_per_s"].to_numpy(float)
        iv = median_interval(r)
        out.append(
            dict(zip([*CURVE_KEYS, "clients", "concurrency"], key, strict=True))
            | {"n": r.size, "failed": int(g["failed"].sum()), "median": float(np.median(r))}
            | {"low": iv.low, "high": iv.high, "level": iv.level}
        )
    return pd.DataFrame(out, columns=POINT_COLUMNS)


def knob(strategy: str) -> str:
    """What a client's concurrency is, in rclone's words, for a strategy."""
    return "streams" if strategy == "multithread" else "transfers"


def recommendations(
    transfers: pd.DataFrame,
    names: Mapping[str, str] | None = None,
    fraction: float = KNEE_FRACTION,
    capped: bool = False,
) -> list[str]:
    """One line per site, remote, direction and tool of a campaign that sweeps: the cheapest
    setting (fewest clients, then least concurrency) whose median reaches ``fraction`` of
    the best median that tool reached there, over every layout; it names the tool. ``names``:
    each remote's rclone name, said beside the campaign's key for it (:func:`_store`).
    ``capped``: rclone ran under a bandwidth cap, which binds each rclone process on its
    own, so its rate grows with clients whatever the store can do (a user was told to
    "sweep further" a curve that only multiplied ``RCLONE_BWLIMIT``)."""
    names = names or {}
    pts = point_table(transfers)
    if pts.empty:
        return []
    strategy = with_setting(transfers).drop_duplicates("layout").set_index("layout")["strategy"]
    out = []
    groups = pts.groupby(keys_through("tool"), sort=False)
    for (site, remote, direction, tool), g in groups:
        if g[["clients", "concurrency"]].drop_duplicates().shape[0] < 2:
            continue
        best = g.loc[g["median"].idxmax()]
        good = g[g["median"] >= fraction * best["median"]]
        pick = good.sort_values(["clients", "concurrency", "median"], ascending=[1, 1, 0]).iloc[0]
        store = _store(remote, names.get(remote))
        route = f"from {site} to {store}" if direction == "upload" else f"from {store} to {site}"
        # the cheapest setting that reaches the target is the largest swept: nothing larger
        # was tried, so it is no knee
        edge = [a for a in AXES if pick[a] == g[a].max() and g[a].nunique() > 1]
        fewest = int(g["n"].min())
        others = g[(g["clients"] != pick["clients"]) | (g["concurrency"] != pick["concurrency"])]
        # grows: its interval lies above every smaller setting's median; else the top of the
        # sweep may read highest by noise (a user read "sweep further" of 1 and 2 clients at
        # 93.1 [61.6, 143.5] and 128.1 [45.0, 193.8])
        clear = not math.isnan(pick["low"]) and (
            others.empty or pick["low"] > others["median"].max()
        )
        further = (
            f" The rate still grows at the largest {' and '.join(edge)} swept: no knee yet,"
            " sweep further."
            if edge and fewest >= MIN_REPEATS_FOR_INTERVAL and clear
            else f" The largest {' and '.join(edge)} swept reads highest, but not clearly (its "
            "interval reaches below a smaller setting's median): more repeats before sweeping "
            "further."
            if edge and fewest >= MIN_REPEATS_FOR_INTERVAL
            # medians of 1 or 2 repeats rank by noise as much as by the setting: that the
            # curve "still grows" is no finding until each point has an interval
            else f" It is the largest {' and '.join(edge)} swept, by medians of as few as "
            f"{fewest} repeat(s), too few for an interval: measure "
            f"{MIN_REPEATS_FOR_INTERVAL} or more before reading a knee or sweeping further."
            if edge
            else ""
        )
        if capped and capped_by_rclone_flags(tool) and "clients" in edge:
            further = (
                " The rate still grows at the largest clients swept because each rclone "
                "process has its own bandwidth cap: more clients add caps, so this curve "
                "shows the cap, not the store; lift the cap to find the store's knee."
            )
        ci = (
            f" [{rate_text(pick['low'])}, {rate_text(pick['high'])}] {level_text(pick['level'])}"
            if not math.isnan(pick["low"])
            else ""
        )
        setting = (
            f"{route} ({direction}) with {tool}: {_n(pick['clients'])} client(s) x "
            f"{_n(pick['concurrency'])} {knob(strategy.get(pick['layout'], ''))} "
            f"({pick['layout']})"
        )
        rate = f"{rate_text(pick['median'])} MB/s{ci}, n={int(pick['n'])}"
        if all(pick[k] == best[k] for k in ("clients", "concurrency", "layout")):
            # a user read this setting compared "against" itself
            out.append(
                f"{setting} reach the best observed, {rate}; nothing cheaper reaches "
                f"{fraction:.0%} of it.{further}"
            )
            continue
        out.append(
            f"{setting} reach {fraction:.0%} of the best observed: {rate}, against "
            f"{rate_text(best['median'])} MB/s with {_n(best['clients'])} x "
            f"{_n(best['concurrency'])} ({best['layout']}).{further}"
        )
    return out


def _store(remote: str, rclone_name: str | None) -> str:
    """A remote as the tables name it (the campaign's key, column ``remote``), with its
    rclone name beside it when that differs: a user read ``main`` in every table and ``uc9``
    only here, and could not tell they were one store."""
    name = (rclone_name or "").removesuffix(":")  # "uc7", not "from uc7: to"
    return remote if not name or name == remote else f"{remote} (rclone remote {name})"


def _n(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"
