"""The report's figures (matplotlib and seaborn), drawn from the aggregated tables only.

Every number comes from :mod:`cloudbench.report.stats` (the definitions live there); this
module only draws. Each function takes DataFrames (and the report-info dict built by the
workflow from the config) and a path, so the figures can be redrawn from the TSVs alone.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

from cloudbench.campaign.identity import LABELS, LINK  # noqa: E402
from cloudbench.intervals import level_text  # noqa: E402
from cloudbench.report import stats
from cloudbench.report.labels import (  # noqa: E402
    DIRECTIONS,
    RATE_LABEL,
    RATE_UNIT,
    layout_order,
    num,
)

DPI = 110
# A transfer's rate over time needs a few of rclone's 1 s stats lines: shorter transfers are
# left out of that figure (one sample is rclone's own start-up-free rate, not a curve).
MIN_SERIES_SAMPLES = 3
# A panel whose rates span more than this factor is drawn on a log scale: a user's capped
# rclone at 8-16 MB/s lay flat on the axis beside s5cmd at 160-400 MB/s
WIDE_RANGE = 10.0

sns.set_theme(style="whitegrid", context="notebook")
# Titles at a fixed height (where Matplotlib's automatic placement puts them when no axis has
# tick labels on top, as none here has): the automatic one measures every axis's tick labels
# again on each draw (a tenth of the demo's aggregate CPU: 7.7 -> 6.8 s)
plt.rcParams["axes.titley"] = 1.0


# --- shared helpers ---------------------------------------------------------------------------


def palette(labels: Any) -> dict[str, Any]:
    """One colour per layout, the same in every figure: plain blue, multithread purple, the
    chunk sizes orange, green, brown, ... (colour-blind safe)."""
    cb = sns.color_palette("colorblind", 10)
    fixed = {"plain": cb[0], "multithread": cb[4]}
    spare = [cb[i] for i in (1, 2, 5, 8, 6, 9, 3, 7)]
    out = {}
    for label in layout_order(labels):
        out[label] = fixed.get(label) or spare[len([k for k in out if k not in fixed]) % len(spare)]
    return out


def _site_order(info: Mapping[str, Any], df: pd.DataFrame) -> list[str]:
    known = list((info.get("sites") or {}).keys())
    extra = sorted(set(df["site"]) - set(known)) if "site" in df else []
    return [s for s in known if "site" not in df or s in set(df["site"])] + extra


class Panel(NamedTuple):
    """One panel: a site, a direction and, when the campaign has several remotes, a remote."""

    site: str
    remote: str | None
    direction: str

    def select(self, df: pd.DataFrame) -> pd.DataFrame:
        mask = (df["site"] == self.site) & (df["direction"] == self.direction)
        if self.remote is not None:
            mask &= df["remote"] == self.remote
        return df[mask]

    @property
    def title(self) -> str:
        return f"{self.site} · {self.direction}" + (f" · {self.remote}" if self.remote else "")


def panels(info: Mapping[str, Any], df: pd.DataFrame) -> list[Panel]:
    """The site x direction panels present in ``df`` (x remote, if there are several): sites
    in config order, remotes in config order, upload before download."""
    remotes = [r for r in (info.get("remotes") or {}) if r in set(df["remote"])]
    remotes += sorted(set(df["remote"]) - set(remotes))
    split = len(remotes) > 1
    present = set(zip(df["site"], df["remote"], df["direction"], strict=True))
    out = []
    for s in _site_order(info, df):
        for r in remotes if split else [None]:
            for d in DIRECTIONS:
                if any(p[0] == s and p[2] == d and (r is None or p[1] == r) for p in present):
                    out.append(Panel(s, r, d))
    return out


def _ticks(labels: list[str]) -> list[str]:
    """Layout labels on two lines (chunked-64MiB -> chunked / 64MiB) so that they fit; a
    setting (campaigns that sweep) goes on a line of its own, without the tool when every
    one is rclone's (plain / 4x32); beside another tool's, each names its tool, as the
    legend does."""
    parts = [label.partition(" ")[::2] for label in labels]
    only_rclone = all(s.startswith("rclone-") for _, s in parts if s)
    return [
        layout.replace("chunked-", "chunked\n")
        + (f"\n{s.removeprefix('rclone-') if only_rclone else s}" if s else "")
        for layout, s in parts
    ]


# characters of tick labels, side by side, that a panel's width takes level (at 10 pt)
LEVEL_TICK_CHARS = 48


def _set_ticks(ax, order: list[str]) -> None:
    """One tick per layout (``_ticks``), slanted when side by side they would not fit: a
    sweep's many settings, or five labels such as ``rclone-1xauto`` beside ``s5cmd-1xauto``
    (a user read ``rclone-1xaus5cmd-1xauto``)."""
    ticks = _ticks(order)
    ax.set_xticks(range(len(order)), ticks)
    widest = max((len(line) for t in ticks for line in t.split("\n")), default=0)
    if len(order) > 5 or len(order) * widest > LEVEL_TICK_CHARS:
        ax.tick_params(axis="x", labelrotation=60, labelsize=8)


def grid(n: int, width: float = 6.0, height: float = 3.6, ncols: int = 2):
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows + 0.8), squeeze=False
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def placeholder(path: Path, message: str) -> None:
    """A figure that says why there is nothing to draw, in type large enough to read in
    the report's thumbnail."""
    fig, ax = plt.subplots(figsize=(8, 2.4))
    ax.axis("off")
    ax.text(0.5, 0.5, "\n".join(textwrap.wrap(message, 60)), ha="center", va="center",
            fontsize=16, fontweight="bold")  # fmt: skip
    save(fig, path)


def _median_interval_label(summary: pd.DataFrame) -> str:
    """The legend's words for the medians' intervals, with the coverages they have (75% at 3
    repeats: a reader would otherwise assume 95%)."""
    levels = sorted({level_text(v) for v in summary["sustained_ci_level"].dropna()})
    return f"interval of the median ({', '.join(levels)} coverage)" if levels else "interval"


def _legend(fig, pal: Mapping[str, Any], extra: list[Line2D] | None = None) -> None:
    """Layout colours (and ``extra`` symbols) in one legend above the panels, then lay out
    the panels below it, leaving a fixed height for the legend whatever the figure's size."""
    handles = [Line2D([], [], color=c, lw=3, label=k) for k, c in pal.items()]
    handles += extra or []
    ncols = min(len(handles), 5)
    rows = math.ceil(len(handles) / ncols)
    fig.legend(
        handles=handles,
        loc="upper center",
        ncols=ncols,
        bbox_to_anchor=(0.5, 1.0),
        frameon=False,
        title=None,
        fontsize=10,
    )
    top = 1 - (0.12 + 0.3 * rows) / fig.get_figheight()
    fig.tight_layout(rect=(0, 0, 1, top))


# --- 1. rate against time ---------------------------------------------------------------------


def _running_median(d: pd.DataFrame) -> pd.DataFrame:
    """Per layout and whole second: the median rate of the repeats still running, kept only
    while at least half of the layout's repeats are (so one long straggler is not a median)."""
    n = d.groupby("layout")["transfer"].nunique()
    g = d.groupby(["layout", "second"], as_index=False).agg(
        mb_per_s=("mb_per_s", "median"), running=("transfer", "nunique")
    )
    return g[g["running"] >= np.ceil(g["layout"].map(n) / 2)]


def rate_vs_time(
    series: pd.DataFrame, transfers: pd.DataFrame, info: Mapping[str, Any], path: Path
) -> None:
    """One panel per site x direction; every ok transfer a faint line (colour = layout), the
    median over repeats of each layout, second by second, in bold."""
    ok = stats.ok_rates(transfers)
    keys = LABELS  # one transfer: its group and repeat
    if series.empty or ok.empty:
        return placeholder(path, "no per-second series of a successful transfer recorded")
    wanted = set(map(tuple, ok[keys].itertuples(index=False)))
    frames = []
    for key, s in series.groupby(keys):
        if key not in wanted or len(s) < MIN_SERIES_SAMPLES:
            continue
        r = stats.interval_rates(s)
        for k, v in zip(keys, key, strict=True):
            r[k] = v
        frames.append(r)
    if not frames:
        return placeholder(
            path,
            f"no transfer lasted {MIN_SERIES_SAMPLES} rclone stats intervals: too short for "
            "a rate over time (the tables have each transfer's rate)",
        )
    data = pd.concat(frames, ignore_index=True)
    data["transfer"] = (
        data["site"]
        + "/"
        + data["direction"]
        + "/"
        + data["remote"]
        + "/"
        + data["layout"]
        + "/r"
        + data["repeat"].astype(str)
    )
    data["second"] = data["elapsed_s"].round()
    # each rate holds over the interval that ends at its sample: draw steps from 0 s
    first = data.sort_values("elapsed_s").groupby("transfer", as_index=False).first()
    data = pd.concat([first.assign(elapsed_s=0.0, second=0.0), data], ignore_index=True)
    pal = palette(data["layout"])
    cells = panels(info, data)
    fig, axes = grid(len(cells))
    for ax, cell in zip(axes, cells, strict=True):
        d = cell.select(data)
        sns.lineplot(
            data=d,
            x="elapsed_s",
            y="mb_per_s",
            hue="layout",
            hue_order=list(pal),
            units="transfer",
            estimator=None,
            palette=pal,
            alpha=0.35,
            lw=1,
            ax=ax,
            legend=False,
            drawstyle="steps-pre",
            sort=True,
        )
        med = _running_median(d)
        sns.lineplot(
            data=med,
            x="second",
            y="mb_per_s",
            hue="layout",
            hue_order=list(pal),
            palette=pal,
            lw=2.6,
            ax=ax,
            legend=False,
            estimator=None,
            drawstyle="steps-pre",
            alpha=0.9,
        )
        ax.set_title(cell.title)
        ax.set_xlabel("seconds since the rclone run started")
        ax.set_ylabel(RATE_LABEL)
        # from 0, or below it where a byte count went down (the series keeps that anomaly)
        ax.set_ylim(
            min(0.0, float(d["mb_per_s"].min()) * 1.15), max(1.0, float(d["mb_per_s"].max())) * 1.15
        )
        ax.set_xlim(left=0)
    _legend(
        fig,
        pal,
        [
            Line2D([], [], color="grey", lw=1, alpha=0.4, label="one repeat"),
            Line2D([], [], color="grey", lw=2.6, label="median of repeats"),
        ],
    )
    save(fig, path)


# --- 2. sustained rate ------------------------------------------------------------------------


class _PlainLog(LogFormatter):
    """A log axis's tick labels as plain numbers (0.5, 20, 300, 1,500), where matplotlib
    writes 2×10¹ in mathtext, whose parsing took a tenth of a small campaign's figures.
    Which ticks get a label is LogFormatter's choice; only the words are ours."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not super().__call__(x, pos):
            return ""
        return f"{x:,.0f}" if x >= 100 else f"{x:g}"


def log_scale(ax, which: str) -> None:
    """``ax``'s ``which`` axis ("x" or "y") on a base-10 log scale, labelled as
    ``_PlainLog`` says where matplotlib's own formatters would put a label."""
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(_PlainLog())
    axis.set_minor_formatter(_PlainLog(labelOnlyBase=False))


def _rate_axis(ax, rates: pd.Series) -> str:
    """A rate axis from 0, or on a log scale where the rates span more than WIDE_RANGE
    (then the label says so, returned to be added to it)."""
    low, high = float(rates.min()), float(rates.max())
    if low > 0 and high / low > WIDE_RANGE:
        log_scale(ax, "y")
        ax.set_ylim(low / 1.5, high * 1.5)
        return ", log scale"
    ax.set_ylim(0, max(1.0, high) * 1.2)
    return ""


def sustained(
    metrics: pd.DataFrame, summary: pd.DataFrame, info: Mapping[str, Any], path: Path
) -> None:
    """Sustained rate per site x direction x layout: each repeat a point, the median a black
    bar, its order-statistic interval a black line; outliers ringed in red, fall-backs as
    crosses."""
    ok = metrics[(metrics["status"] == "ok") & metrics["sustained_mb_per_s"].notna()]
    if ok.empty:
        return placeholder(path, "no successful transfers: no sustained rates")
    pal = palette(metrics["layout"])
    cells = panels(info, ok)
    fig, axes = grid(len(cells), width=5.6)
    rng = np.random.default_rng(0)  # jitter only
    for ax, cell in zip(axes, cells, strict=True):
        d = cell.select(ok)
        order = layout_order(d["layout"])
        sm = cell.select(summary)
        for i, lay in enumerate(order):
            g = d[d["layout"] == lay]
            x = i + rng.uniform(-0.12, 0.12, len(g))
            series_pts = g["sustained_method"] == "series"
            ax.scatter(
                x[series_pts.to_numpy()],
                g.loc[series_pts, "sustained_mb_per_s"],
                color=pal[lay],
                s=40,
                alpha=0.85,
                zorder=6,
                edgecolor="white",
                lw=0.5,
            )
            ax.scatter(
                x[~series_pts.to_numpy()],
                g.loc[~series_pts, "sustained_mb_per_s"],
                color=pal[lay],
                s=50,
                marker="x",
                zorder=6,
            )
            out = g["outlier"].astype(bool).to_numpy()
            if out.any():
                ax.scatter(
                    x[out],
                    g.loc[out, "sustained_mb_per_s"],
                    s=160,
                    facecolor="none",
                    edgecolor="red",
                    lw=1.5,
                    zorder=7,
                )
            for r in sm[sm["layout"] == lay].itertuples(index=False):
                ax.hlines(r.sustained_median, i - 0.3, i + 0.3, color="black", lw=2.2, zorder=5)
                if not math.isnan(r.sustained_ci_low):
                    ax.vlines(
                        i + 0.33,
                        r.sustained_ci_low,
                        r.sustained_ci_high,
                        color="black",
                        lw=1.4,
                        zorder=5,
                    )
                ax.annotate(
                    num(r.sustained_median),
                    (i - 0.3, r.sustained_median),
                    xytext=(0, 4),
                    textcoords="offset points",
                    fontsize=8,
                    va="bottom",
                    ha="left",
                )
        _set_ticks(ax, order)
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.set_title(cell.title)
        ax.set_xlabel("strategy (layout)")
        # on two lines: one ran into the legend and the panel below (a user's 3-panel sweep)
        ax.set_ylabel(f"sustained rate{_rate_axis(ax, d['sustained_mb_per_s'])}\n{RATE_UNIT}")
    extra = [
        Line2D([], [], color="black", lw=2.2, label="median"),
        Line2D([], [], color="black", lw=1.4, marker="|", label=_median_interval_label(sm)),
        Line2D([], [], color="grey", marker="x", lw=0, label="whole-transfer rate (fall-back)"),
        Line2D([], [], color="red", marker="o", mfc="none", lw=0, ms=10, label="outlier"),
    ]
    _legend(fig, pal, extra)
    save(fig, path)


def whole_rates(metrics: pd.DataFrame, info: Mapping[str, Any], path: Path) -> None:
    """The first screen's figure: the whole-transfer rate (``mb_per_s``, bytes / wall-clock
    seconds) per site x direction x layout, the same rate as the first screen's table, so
    the two can never rank tools or layouts differently (the sustained rate after ramp-up
    has its own figure). Each repeat a point, the median a black bar with its value, its
    order-statistic interval a black line."""
    from cloudbench.intervals import median_interval

    ok = metrics[(metrics["status"] == "ok") & metrics["mb_per_s"].notna()]
    if ok.empty:
        return placeholder(path, "no successful transfers: no rates")
    pal = palette(metrics["layout"])
    cells = panels(info, ok)
    fig, axes = grid(len(cells), width=5.6)
    rng = np.random.default_rng(0)  # jitter only
    levels = set()
    for ax, cell in zip(axes, cells, strict=True):
        d = cell.select(ok)
        order = layout_order(d["layout"])
        for i, lay in enumerate(order):
            rates = d.loc[d["layout"] == lay, "mb_per_s"]
            x = i + rng.uniform(-0.12, 0.12, len(rates))
            ax.scatter(x, rates, color=pal[lay], s=40, alpha=0.85, zorder=6,
                       edgecolor="white", lw=0.5)  # fmt: skip
            median = float(rates.median())
            ax.hlines(median, i - 0.3, i + 0.3, color="black", lw=2.2, zorder=5)
            low, high, level = median_interval(rates)
            if not math.isnan(low):
                ax.vlines(i + 0.33, low, high, color="black", lw=1.4, zorder=5)
                levels.add(level_text(level))
            ax.annotate(num(median), (i - 0.3, median), xytext=(0, 4),
                        textcoords="offset points", fontsize=8, va="bottom", ha="left")  # fmt: skip
        _set_ticks(ax, order)
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.set_title(cell.title)
        ax.set_xlabel("strategy (layout)")
        ax.set_ylabel(f"whole-transfer rate{_rate_axis(ax, d['mb_per_s'])}\n{RATE_UNIT}")
    interval = f"interval of the median ({', '.join(sorted(levels))} coverage)"
    extra = [
        Line2D([], [], color="black", lw=2.2, label="median (as in the table)"),
        Line2D([], [], color="black", lw=1.4, marker="|", label=interval if levels else "interval"),
    ]
    _legend(fig, pal, extra)
    save(fig, path)


# --- 3. speed-up ------------------------------------------------------------------------------


def speedups(
    metrics: pd.DataFrame, summary: pd.DataFrame, info: Mapping[str, Any], path: Path
) -> None:
    """Speed-up of each layout over plain (ratio of medians) with its exact interval;
    faint points are each repeat's rate / the plain median."""
    s = summary[(summary["layout"] != "plain") & summary["speedup_vs_plain"].notna()]
    if s.empty:
        if (summary["n"] == 0).all():
            why = "no successful transfers yet"
        elif not ((summary["layout"] == "plain") & (summary["n"] > 0)).any():
            why = "no successful plain transfer to compare with"
        elif not ((summary["layout"] != "plain") & (summary["n"] > 0)).any():
            why = "no successful chunked or multithread transfer to compare with plain"
        else:  # speed-ups are judged at equal connections: the same clients x concurrency
            why = (
                "no chunked or multithread setting (clients x concurrency) was also measured "
                "with plain; list a common value under concurrency: to compare them"
            )
        return placeholder(path, f"no speed-up to show: {why}")
    pal = palette(metrics["layout"])
    ok = stats.ok_rates(metrics)
    base = (
        ok[ok["layout"] == "plain"]
        .groupby(stats.PAIR)["mb_per_s"]
        .median()
        .rename("plain_median")
        .reset_index()
    )
    pts = ok[ok["layout"] != "plain"].merge(base, on=stats.PAIR)
    pts["ratio"] = pts["mb_per_s"] / pts["plain_median"]
    cells = panels(info, s)
    fig, axes = grid(len(cells), width=5.2)
    rng = np.random.default_rng(0)
    for ax, cell in zip(axes, cells, strict=True):
        d = cell.select(s)
        order = layout_order(d["layout"])
        ax.axhline(1.0, color="grey", ls="--", lw=1)
        cell_pts = cell.select(pts)
        for i, lay in enumerate(order):
            p = cell_pts[cell_pts["layout"] == lay]
            ax.scatter(
                i + rng.uniform(-0.1, 0.1, len(p)),
                p["ratio"],
                color=pal[lay],
                alpha=0.45,
                s=30,
                zorder=3,
            )
            for r in d[d["layout"] == lay].itertuples(index=False):
                lo, hi = r.speedup_ci_low, r.speedup_ci_high
                ax.scatter(
                    [i + 0.25],
                    [r.speedup_vs_plain],
                    color=pal[lay],
                    s=80,
                    marker="D",
                    edgecolor="black",
                    zorder=5,
                )
                if not math.isnan(lo):
                    ax.vlines(i + 0.25, lo, hi, color="black", lw=1.6, zorder=4)
                    level = level_text(r.speedup_ci_level)
                    txt = f"×{num(r.speedup_vs_plain)}\n[{num(lo)}, {num(hi)}] {level}"
                else:
                    txt = f"×{num(r.speedup_vs_plain)}\n(no interval)"
                ax.annotate(txt, (i + 0.32, r.speedup_vs_plain), fontsize=8, va="center")
        _set_ticks(ax, order)
        ax.set_xlim(-0.5, len(order) - 0.1)
        points = [*cell_pts["ratio"].dropna(), *d["speedup_vs_plain"].dropna()]  # every repeat
        lo_all = min([0.9, *d["speedup_ci_low"].dropna(), *points])
        hi_all = max([1.1, *d["speedup_ci_high"].dropna(), *points])
        span = hi_all - lo_all
        ax.set_ylim(max(0, lo_all - 0.15 * span), hi_all + 0.15 * span)
        ax.set_title(cell.title)
        ax.set_xlabel("strategy (layout)")
        ax.set_ylabel("speed-up over plain (×)")
    extra = [
        Line2D([], [], color="grey", marker="D", mec="black", lw=0, label="ratio of medians"),
        Line2D([], [], color="black", lw=1.6, label="interval of the factor"),
        Line2D([], [], color="grey", ls="--", lw=1, label="= plain"),
    ]
    _legend(fig, {k: v for k, v in pal.items() if k != "plain"}, extra)
    save(fig, path)


# --- 4. rate against distance -----------------------------------------------------------------


def _distances(info: Mapping[str, Any]) -> pd.DataFrame:
    return stats.site_remote_distances(info.get("sites") or {}, info.get("remotes") or {})


def rate_vs_distance(transfers: pd.DataFrame, info: Mapping[str, Any], path: Path) -> None:
    """Rate against great-circle distance site-remote, one panel per direction, with the OLS
    trend through the site medians (or a note that there are too few sites for one)."""
    ok = stats.ok_rates(transfers)
    dist = _distances(info)
    if dist.empty:
        return placeholder(
            path,
            "no distances: set sites.<name>.location and remote_location "
            "(or remotes.<name>.location) as [latitude, longitude]",
        )
    if ok.empty:
        return placeholder(path, "no successful transfers to place against distance")
    pal = palette(ok["layout"])
    dirs = [d for d in DIRECTIONS if (ok["direction"] == d).any()]
    fig, axes = grid(len(dirs), width=6.2, height=4.0)
    pts_all = ok.merge(dist, on=LINK, how="inner")
    for ax, direction in zip(axes, dirs, strict=True):
        trend = stats.distance_trend(ok, dist, direction)
        p = pts_all[pts_all["direction"] == direction]
        span = max(1.0, float(dist["distance_km"].max()))
        rng = np.random.default_rng(0)
        for lay in layout_order(p["layout"]):
            q = p[p["layout"] == lay]
            ax.scatter(
                q["distance_km"] + rng.uniform(-0.01, 0.01, len(q)) * span,
                q["mb_per_s"],
                color=pal[lay],
                alpha=0.5,
                s=28,
                zorder=3,
            )
        m = trend.points
        ax.scatter(
            m["distance_km"], m["median_mb_per_s"], color="black", marker="D", s=60, zorder=5
        )
        multi = m["remote"].nunique() > 1
        # labels alternately above and below, in order of distance, so neighbours do not collide
        for k, r in enumerate(
            m.sort_values(["distance_km", "median_mb_per_s"]).itertuples(index=False)
        ):
            ax.annotate(
                f"{r.site}" + (f"→{r.remote}" if multi else ""),
                (r.distance_km, r.median_mb_per_s),
                xytext=(7, 5 if k % 2 == 0 else -13),
                textcoords="offset points",
                fontsize=9,
                bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 0.5},
            )
        if trend.fit is not None:
            f = trend.fit
            xs = np.linspace(0, m["distance_km"].max() * 1.05, 50)
            ax.plot(xs, f.intercept + f.slope * xs, color="black", lw=1.5, zorder=4)
            txt = (
                f"slope {f.slope * 1000:+.3g} ± {f.slope_se * 1000:.2g} MB/s per 1000 km\n"
                f"(± = standard error; OLS on n = {f.n} site medians, R² = {f.r_squared:.2f})"
            )
        else:
            txt = (
                f"too few sites for a trend ({trend.distinct_distances} distinct "
                f"distance{'s' if trend.distinct_distances != 1 else ''}; "
                f"{stats.TREND_MIN_PLACES} needed)"
            )
        unplaced = sorted(set(ok.loc[ok["direction"] == direction, "site"]) - set(dist["site"]))
        if unplaced:
            txt += f"\nleft out, no location: {', '.join(unplaced)}"
        ax.text(
            0.98,
            0.97,
            txt,
            transform=ax.transAxes,
            fontsize=9,
            va="top",
            ha="right",
            bbox={"facecolor": "white", "alpha": 0.9, "edgecolor": "grey"},
        )
        ax.set_xlim(-0.03 * span, span * 1.18)
        ax.set_ylim(bottom=0, top=max(1.0, float(p["mb_per_s"].max())) * 1.35)
        ax.set_title(f"{direction}: rate against distance to the remote")
        ax.set_xlabel("great-circle distance site to remote (km)")
        ax.set_ylabel(RATE_LABEL)
    extra = [Line2D([], [], color="black", marker="D", lw=0, label="site median")]
    _legend(fig, pal, extra)
    save(fig, path)


# --- 5. where the time goes -------------------------------------------------------------------


def _share(f: float) -> str:
    return "<1%" if f < 0.005 else f"{f:.0%}"


def step_breakdown(
    steps: pd.DataFrame, transfers: pd.DataFrame, path: Path, info: Mapping[str, Any] | None = None
) -> None:
    """Left: wall-clock seconds per phase and site (log scale, share of the site's end-to-end
    wall clock written on each bar; parallel jobs counted once). Right: raw transfer
    throughput against effective end-to-end throughput."""
    budget = stats.time_budget(steps, transfers)
    if budget.empty:
        return placeholder(path, "no steps recorded")
    step_cols = list(stats.PHASES)
    long = budget.melt(
        id_vars=["site", "end_to_end_s"],
        value_vars=step_cols,
        var_name="step",
        value_name="seconds",
    )
    long = long[long["seconds"] > 0]
    sites = _site_order(info or {}, budget)
    site_pal = dict(zip(sites, sns.color_palette("muted", max(3, len(sites))), strict=False))
    order = [s for s in step_cols if s in set(long["step"])]
    fig, (ax1, ax2) = plt.subplots(
        1,
        2,
        figsize=(13, 0.3 * len(order) * len(sites) + 2.4),
        gridspec_kw={"width_ratios": [1.6, 1]},
    )
    sns.barplot(
        data=long,
        y="step",
        x="seconds",
        hue="site",
        order=order,
        hue_order=sites,
        palette=site_pal,
        ax=ax1,
        orient="h",
    )
    log_scale(ax1, "x")
    for cont, site in zip(ax1.containers, sites, strict=False):
        tot = float(budget.loc[budget["site"] == site, "end_to_end_s"].iloc[0])
        vals = [b.get_width() for b in cont]
        labels = [
            f"{num(v)} s ({_share(v / tot)})" if v > 0 and not math.isnan(v) else "" for v in vals
        ]
        ax1.bar_label(cont, labels=labels, fontsize=8, padding=3)
    lo = long["seconds"].min()
    ax1.set_xlim(lo / 3, long["seconds"].max() * 12)
    ax1.set_xlabel("wall-clock seconds per phase, parallel jobs once (log scale)")
    ax1.set_ylabel("")
    ax1.set_title("where the time goes")
    ax1.legend(title="site", loc="lower right", fontsize=8)

    tp = budget.melt(
        id_vars=["site"],
        value_vars=["raw_mb_per_s", "effective_mb_per_s"],
        var_name="kind",
        value_name="mb_per_s",
    )
    tp["kind"] = tp["kind"].map(
        {"raw_mb_per_s": "raw transfer", "effective_mb_per_s": "effective end-to-end"}
    )
    sns.barplot(
        data=tp,
        x="site",
        y="mb_per_s",
        hue="kind",
        order=sites,
        hue_order=["raw transfer", "effective end-to-end"],
        palette=["0.3", "0.7"],
        ax=ax2,
    )
    for cont in ax2.containers:
        ax2.bar_label(cont, labels=[num(b.get_height()) for b in cont], fontsize=8, padding=2)
    ax2.set_ylim(0, max(1.0, float(tp["mb_per_s"].max(skipna=True) or 1)) * 1.2)
    ax2.set_xlabel("")
    ax2.set_ylabel(RATE_LABEL)
    ax2.set_title("throughput: transfers only vs. everything")
    ax2.legend(title=None, loc="lower right", fontsize=8)
    fig.tight_layout()
    save(fig, path)
