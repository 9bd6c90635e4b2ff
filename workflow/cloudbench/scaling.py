"""How the rate grows with clients and with each client's concurrency: the knee and collapses.

A sweep is a curve: the ok repeats' rates at each value of one knob (clients, or a client's
concurrency) with everything else held fixed. The knee is the smallest value whose median
reaches a stated fraction of the best median on the curve: where adding more stops paying.
Its uncertainty comes from the same bootstrap as every interval in the report: each value's
repeats are resampled, the knee is found again, and the 2.5th and 97.5th percentiles of
those knees bound it. A collapse is a value that is significantly slower than a smaller one
(incast, throttling, a store that falls over): it is flagged, never averaged away.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cloudbench.stats import (
    CI_LEVEL,
    MIN_REPEATS_FOR_INTERVAL,
    N_BOOT,
    SEED,
    bootstrap_ci,
    ok_rates,
    speedup,
    with_setting,
)

KNEE_FRACTION = 0.90  # the knee: the first value whose median reaches 90% of the best
COLLAPSE_RATIO = 0.90  # a collapse: at least 10% below a smaller value, and significant
AXES = {"clients": "clients", "concurrency": "concurrency"}  # knob -> column
CURVE_KEYS = ["site", "remote", "direction", "layout"]
SCALING_COLUMNS = [
    "site", "remote", "direction", "layout", "axis", "held", "values", "knee", "knee_low",
    "knee_high", "best", "best_median", "saturated", "collapse",
]  # fmt: skip


@dataclass(frozen=True)
class Knee:
    value: float  # the smallest swept value whose median reaches fraction x the best
    low: float  # bootstrap interval of that value (nan with fewer than 3 repeats somewhere)
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
        tail = (1 - CI_LEVEL) / 2
        low = float(np.quantile(knees, tail, method="lower"))
        high = float(np.quantile(knees, 1 - tail, method="higher"))
    return Knee(float(xs[at]), low, high, float(xs[best]), float(medians[best]), fraction)


def collapses(
    curve: Mapping[float, Sequence[float]],
    ratio: float = COLLAPSE_RATIO,
    n: int = N_BOOT,
    seed: int = SEED,
) -> list[Collapse]:
    """Values significantly slower than the best smaller value: the median ratio is below
    ``ratio`` and its bootstrap interval lies entirely below 1 (needs 3 repeats each)."""
    xs, rates = _sorted(curve)
    out = []
    for i in range(1, xs.size):
        below = [j for j in range(i) if rates[j].size >= MIN_REPEATS_FOR_INTERVAL]
        if rates[i].size < MIN_REPEATS_FOR_INTERVAL or not below:
            continue
        j = max(below, key=lambda k: np.median(rates[k]))
        r = speedup(rates[i], rates[j], n, seed)
        if r.ratio < ratio and r.high < 1:
            out.append(Collapse(float(xs[i]), float(xs[j]), r.ratio, r.low, r.high))
    return out


def curves(transfers: pd.DataFrame) -> list[tuple[dict, str, float, dict[float, np.ndarray]]]:
    """Every sweep in a campaign's transfers: (curve keys, axis, value of the other knob
    held fixed, {value: ok rates}); only curves with at least two values."""
    ok = ok_rates(with_setting(transfers))
    if ok.empty or "clients" not in ok or "concurrency" not in ok:
        return []
    out = []
    for axis, col in AXES.items():
        other = "concurrency" if axis == "clients" else "clients"
        for key, g in ok.groupby([*CURVE_KEYS, other], sort=False):
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
        flags = collapses(curve, n=n, seed=seed)
        rows.append({
            **{c: keys[c] for c in CURVE_KEYS}, "axis": axis, "held": held,
            "values": ",".join(_n(v) for v in sorted(curve)),
            "knee": k.value, "knee_low": k.low, "knee_high": k.high,
            "best": k.best, "best_median": k.best_median,
            "saturated": saturated(k, max(curve)),
            "collapse": "; ".join(
                f"{_n(c.value)} is x{c.ratio:.2f} [{c.low:.2f}, {c.high:.2f}] of {_n(c.than)}"
                for c in flags
            ),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=SCALING_COLUMNS)


def point_table(transfers: pd.DataFrame, n: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """Median rate with its interval and n at every clients x concurrency point."""
    ok = ok_rates(with_setting(transfers))
    rows = []
    if ok.empty or "clients" not in ok:
        return pd.DataFrame(
            columns=[*CURVE_KEYS, "clients", "concurrency", "n", "median", "low", "high"]
        )
    for key, g in ok.groupby([*CURVE_KEYS, "clients", "concurrency"], sort=True):
        r = g["mb_per_s"].to_numpy(float)
        lo, hi = bootstrap_ci(r, np.median, n, seed)
        rows.append(
            dict(zip([*CURVE_KEYS, "clients", "concurrency"], key, strict=True))
            | {"n": r.size, "median": float(np.median(r)), "low": lo, "high": hi}
        )
    return pd.DataFrame(rows)


def knob(strategy: str) -> str:
    """What a client's concurrency is, in rclone's words, for a strategy."""
    return "streams" if strategy == "multithread" else "transfers"


def recommendations(
    transfers: pd.DataFrame,
    names: Mapping[str, str] | None = None,
    fraction: float = KNEE_FRACTION,
    n: int = N_BOOT,
    seed: int = SEED,
) -> list[str]:
    """One line per site, remote and direction of a campaign that sweeps: the cheapest
    setting (fewest clients, then least concurrency) whose median reaches ``fraction`` of
    the best median observed there, over every layout. ``names``: how to call each remote
    (its rclone name) instead of the campaign's key for it."""
    names = names or {}
    pts = point_table(transfers, n, seed)
    if pts.empty:
        return []
    strategy = with_setting(transfers).drop_duplicates("layout").set_index("layout")["strategy"]
    out = []
    for (site, remote, direction), g in pts.groupby(["site", "remote", "direction"], sort=False):
        if g[["clients", "concurrency"]].drop_duplicates().shape[0] < 2:
            continue
        best = g.loc[g["median"].idxmax()]
        good = g[g["median"] >= fraction * best["median"]]
        pick = good.sort_values(["clients", "concurrency", "median"], ascending=[1, 1, 0]).iloc[0]
        store = names.get(remote) or remote
        route = f"from {site} to {store}" if direction == "upload" else f"from {store} to {site}"
        # the cheapest setting that reaches the target is the largest swept: nothing larger
        # was tried, so it is no knee
        edge = [a for a in AXES if pick[a] == g[a].max() and g[a].nunique() > 1]
        further = (
            f" The rate still grows at the largest {' and '.join(edge)} swept: no knee yet,"
            " sweep further."
            if edge
            else ""
        )
        ci = f" [{pick['low']:.3g}, {pick['high']:.3g}]" if not math.isnan(pick["low"]) else ""
        out.append(
            f"{route} ({direction}): {_n(pick['clients'])} client(s) x "
            f"{_n(pick['concurrency'])} {knob(strategy.get(pick['layout'], ''))} "
            f"({pick['layout']}) reach {fraction:.0%} of the best observed: "
            f"{pick['median']:.3g} MB/s{ci}, n={int(pick['n'])}, against "
            f"{best['median']:.3g} MB/s with {_n(best['clients'])} x {_n(best['concurrency'])} "
            f"({best['layout']}).{further}"
        )
    return out


def _n(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"
