"""The report's figures and HTML tables, drawn from the aggregated tables only.

Every number comes from :mod:`cloudbench.stats` (the definitions live there); this module only
draws. Each function takes DataFrames (and the report-info dict built by the workflow from the
config) and a path, so the report can be rebuilt from the TSVs alone. :func:`build_report`
writes every output of the ``plots`` rule.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import matplotlib

from cloudbench.records import REPORT_OUTPUTS

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from cloudbench import stats
from cloudbench.headline import headline_html  # noqa: E402
from cloudbench.sizes import SizeError, parse_size, size_label  # noqa: E402

DPI = 110
DIRECTIONS = ["upload", "download"]
RATE_LABEL = "rate (MB/s = 10$^6$ B/s)"
NA = "–"

sns.set_theme(style="whitegrid", context="notebook")


# --- shared helpers ---------------------------------------------------------------------------


def _layout_key(label: str) -> tuple[int, float, str]:
    if label == "plain":
        return (0, 0, label)
    if label.startswith("chunked-"):
        try:
            return (1, parse_size(label.removeprefix("chunked-")), label)
        except SizeError:
            return (1, math.inf, label)
    if label == "multithread":
        return (2, 0, label)
    return (3, 0, label)


def layout_order(labels: Any) -> list[str]:
    """plain, chunked by chunk size, multithread, then anything else."""
    return sorted({str(v) for v in labels}, key=_layout_key)


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


def _tick(label: str) -> str:
    """Layout labels on two lines (chunked-64MiB -> chunked / 64MiB) so that they fit."""
    return label.replace("chunked-", "chunked\n")


def num(v: float) -> str:
    """Three significant figures below 100, whole numbers above, never an exponent:
    0.0123, 1.23, 12.3, 123, 1,234."""
    if v is None or math.isnan(v):
        return NA
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:#.3g}".rstrip(".")


def _grid(n: int, width: float = 6.0, height: float = 3.6, ncols: int = 2):
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows + 0.8), squeeze=False
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def _empty(path: Path, message: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    _save(fig, path)


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
    keys = [*stats.GROUP, "repeat"]
    if series.empty or ok.empty:
        return _empty(path, "no per-second series of a successful transfer recorded")
    wanted = set(map(tuple, ok[keys].itertuples(index=False)))
    frames = []
    for key, s in series.groupby(keys):
        if key not in wanted:
            continue
        r = stats.interval_rates(s)
        for k, v in zip(keys, key, strict=True):
            r[k] = v
        frames.append(r)
    if not frames:
        return _empty(path, "no per-second series of a successful transfer recorded")
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
    fig, axes = _grid(len(cells))
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
        ax.set_ylim(0, max(1.0, float(d["mb_per_s"].max())) * 1.15)
        ax.set_xlim(left=0)
    _legend(
        fig,
        pal,
        [
            Line2D([], [], color="grey", lw=1, alpha=0.4, label="one repeat"),
            Line2D([], [], color="grey", lw=2.6, label="median of repeats"),
        ],
    )
    _save(fig, path)


# --- 2. sustained rate ------------------------------------------------------------------------


def sustained(
    metrics: pd.DataFrame, summary: pd.DataFrame, info: Mapping[str, Any], path: Path
) -> None:
    """Sustained rate per site x direction x layout: each repeat a point, the median a black
    bar, its bootstrap interval a black line; outliers ringed in red, fall-backs as crosses."""
    ok = metrics[(metrics["status"] == "ok") & metrics["sustained_mb_per_s"].notna()]
    if ok.empty:
        return _empty(path, "no successful transfers: no sustained rates")
    pal = palette(metrics["layout"])
    cells = panels(info, ok)
    fig, axes = _grid(len(cells), width=5.6)
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
        ax.set_xticks(range(len(order)), [_tick(o) for o in order])
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.set_ylim(0, max(1.0, float(d["sustained_mb_per_s"].max())) * 1.2)
        ax.set_title(cell.title)
        ax.set_xlabel("strategy (layout)")
        ax.set_ylabel("sustained " + RATE_LABEL)
    extra = [
        Line2D([], [], color="black", lw=2.2, label="median"),
        Line2D([], [], color="black", lw=1.4, marker="|", label=f"{stats.CI_LEVEL:.0%} bootstrap"),
        Line2D([], [], color="grey", marker="x", lw=0, label="whole-transfer rate (fall-back)"),
        Line2D([], [], color="red", marker="o", mfc="none", lw=0, ms=10, label="outlier"),
    ]
    _legend(fig, pal, extra)
    _save(fig, path)


# --- 3. speed-up ------------------------------------------------------------------------------


def speedups(
    metrics: pd.DataFrame, summary: pd.DataFrame, info: Mapping[str, Any], path: Path
) -> None:
    """Speed-up of each layout over plain (ratio of medians) with its bootstrap interval;
    faint points are each repeat's rate / the plain median."""
    s = summary[(summary["layout"] != "plain") & summary["speedup_vs_plain"].notna()]
    if s.empty:
        if (summary["n"] == 0).all():
            why = "no successful transfers yet"
        elif not ((summary["layout"] == "plain") & (summary["n"] > 0)).any():
            why = "no successful plain transfer to compare with"
        else:
            why = "no successful chunked or multithread transfer to compare with plain"
        return _empty(path, f"no speed-up to show: {why}")
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
    fig, axes = _grid(len(cells), width=5.2)
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
                    txt = f"×{num(r.speedup_vs_plain)}\n[{num(lo)}, {num(hi)}]"
                else:
                    txt = f"×{num(r.speedup_vs_plain)}\n(no interval)"
                ax.annotate(txt, (i + 0.32, r.speedup_vs_plain), fontsize=8, va="center")
        ax.set_xticks(range(len(order)), [_tick(o) for o in order])
        ax.set_xlim(-0.5, len(order) - 0.1)
        lo_all = min([0.9, *d["speedup_ci_low"].dropna(), *d["speedup_vs_plain"]])
        hi_all = max([1.1, *d["speedup_ci_high"].dropna(), *d["speedup_vs_plain"]])
        span = hi_all - lo_all
        ax.set_ylim(max(0, lo_all - 0.15 * span), hi_all + 0.15 * span)
        ax.set_title(cell.title)
        ax.set_xlabel("strategy (layout)")
        ax.set_ylabel("speed-up over plain (×)")
    extra = [
        Line2D([], [], color="grey", marker="D", mec="black", lw=0, label="ratio of medians"),
        Line2D([], [], color="black", lw=1.6, label=f"{stats.CI_LEVEL:.0%} bootstrap"),
        Line2D([], [], color="grey", ls="--", lw=1, label="= plain"),
    ]
    _legend(fig, {k: v for k, v in pal.items() if k != "plain"}, extra)
    _save(fig, path)


# --- 4. rate against distance -----------------------------------------------------------------


def _distances(info: Mapping[str, Any]) -> pd.DataFrame:
    return stats.site_remote_distances(info.get("sites") or {}, info.get("remotes") or {})


def rate_vs_distance(transfers: pd.DataFrame, info: Mapping[str, Any], path: Path) -> None:
    """Rate against great-circle distance site-remote, one panel per direction, with the OLS
    trend through the site medians (or a note that there are too few sites for one)."""
    ok = stats.ok_rates(transfers)
    dist = _distances(info)
    if dist.empty:
        return _empty(
            path,
            "no distances: set sites.<name>.location and remote_location "
            "(or remotes.<name>.location) as [latitude, longitude]",
        )
    if ok.empty:
        return _empty(path, "no successful transfers to place against distance")
    pal = palette(ok["layout"])
    dirs = [d for d in DIRECTIONS if (ok["direction"] == d).any()]
    fig, axes = _grid(len(dirs), width=6.2, height=4.0)
    pts_all = ok.merge(dist, on=["site", "remote"], how="inner")
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
                f"distance{'s' if trend.distinct_distances != 1 else ''}; 3 needed)"
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
    _save(fig, path)


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
        return _empty(path, "no steps recorded")
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
    ax1.set_xscale("log")
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
    _save(fig, path)


# --- HTML tables --------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       font-size: 14px; margin: 1em; color: #222; }
h2 { font-size: 1.25em; margin-top: 1.4em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0 1.2em 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; white-space: nowrap; }
td.wrap { white-space: normal; min-width: 20em; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
td.text, th.text { text-align: left; }
tr.flag td { background: #fde2e1; }
p.note { color: #444; max-width: 60em; }
"""


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f'</title><style>{CSS}</style></head><body><h1 style="font-size:1.4em">'
        f"{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return NA
    if isinstance(v, bool | np.bool_):
        return "yes" if v else ""
    if isinstance(v, int | np.integer):
        return f"{int(v):,}"
    if isinstance(v, float | np.floating):
        return f"{float(v):.{digits}g}" if abs(v) < 10**digits else f"{float(v):,.0f}"
    return str(v)


def _numeric_column(col: pd.Series) -> bool:
    """Numbers, and strings that read as numbers (money, ``×1.2 [1.1, 1.3]``): right-aligned."""
    if pd.api.types.is_bool_dtype(col):
        return False
    if pd.api.types.is_numeric_dtype(col):
        return True
    values = [str(v) for v in col.dropna() if str(v) not in ("", NA)]
    return bool(values) and all(re.match(r"^[×\d-]", v) for v in values)


def _cell(v: Any, text: bool, digits: int) -> str:
    if text and (v is None or (isinstance(v, float) and math.isnan(v))):
        return ""
    return _fmt(v, digits)


def _table(
    df: pd.DataFrame,
    digits: Mapping[str, int] | None = None,
    flag: pd.Series | None = None,
    headers: Mapping[str, str] | None = None,
    wrap: set[str] | frozenset[str] = frozenset(),
) -> str:
    """A plain HTML table; numbers right-aligned, text left-aligned, HTML-escaped."""
    digits = digits or {}
    headers = headers or {}
    text_cols = {c for c in df.columns if not _numeric_column(df[c])}
    head = "".join(
        f'<th class="{"text" if c in text_cols else ""}">{html.escape(headers.get(c, c))}</th>'
        for c in df.columns
    )
    rows = []
    for i, (_, r) in enumerate(df.iterrows()):
        cls = ' class="flag"' if flag is not None and bool(flag.iloc[i]) else ""
        cells = "".join(
            f'<td class="{"text" if c in text_cols else ""}{" wrap" if c in wrap else ""}">'
            f"{html.escape(_cell(r[c], c in text_cols, digits.get(c, 3)))}</td>"
            for c in df.columns
        )
        rows.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def transfers_html(transfers: pd.DataFrame, missing: pd.DataFrame, path: Path) -> None:
    """Every transfer, one row each; rows that are not ``ok`` are highlighted."""
    cols = [
        "site",
        "remote",
        "direction",
        "layout",
        "repeat",
        "status",
        "mb_per_s",
        "seconds",
        "connections",
        "bytes_requested",
        "bytes_moved",
        "started_utc",
        "retries",
        "error",
        "host",
        "rclone_version",
    ]
    t = transfers.reindex(columns=cols)
    body = _table(t, {"seconds": 4, "mb_per_s": 4}, flag=t["status"] != "ok", wrap={"error"})
    if not missing.empty:
        body += "<h2>Not reported yet</h2>" + _table(missing)
    path.write_text(_page("Every transfer", body))


def _with_ci(v: float, lo: float, hi: float, prefix: str = "", n: int | None = None) -> str:
    """A value with its interval, or with the reason it has none (too few repeats)."""
    if math.isnan(v):
        return NA
    if math.isnan(lo):
        few = n is not None and n < stats.MIN_REPEATS_FOR_INTERVAL
        return (
            f"{prefix}{num(v)} (too few repeats for an interval, n={n})"
            if few
            else (f"{prefix}{num(v)}")
        )
    return f"{prefix}{num(v)} [{num(lo)}, {num(hi)}]"


def summary_html(summary: pd.DataFrame, metrics: pd.DataFrame, path: Path) -> None:
    """Rate statistics, failures and outliers per site x direction x layout, then the lists
    of outliers and of failed or corrupt transfers."""
    sm = summary
    t = pd.DataFrame({
        "site": sm["site"], "remote": sm["remote"], "direction": sm["direction"],
        "layout": sm["layout"], "n ok": sm["n"], "mean": sm["mean"], "P10": sm["p10"],
        "P50": sm["p50"], "P90": sm["p90"],
        "sustained median [95% CI]": [
            _with_ci(v, lo, hi, n=n) for v, lo, hi, n in
            zip(sm["sustained_median"], sm["sustained_ci_low"], sm["sustained_ci_high"],
                sm["n"], strict=True)],
        "speed-up vs plain [95% CI]": [
            _with_ci(v, lo, hi, "×", n=n) if layout != "plain" else NA
            for v, lo, hi, n, layout in
            zip(sm["speedup_vs_plain"], sm["speedup_ci_low"], sm["speedup_ci_high"],
                sm["n"], sm["layout"], strict=True)],
        "connections": sm["connections"],
        "failed": sm["failed"], "corrupt": sm["corrupt"], "unverified": sm["unverified"],
        "retries": sm["retries"],
        "outliers": sm["outliers"],
    })  # fmt: skip
    if t["remote"].nunique() <= 1:
        t = t.drop(columns=["remote"])
    flag = (summary["failed"] + summary["corrupt"] + summary["outliers"]) > 0
    body = (
        f'<p class="note">Rates in MB/s (10<sup>6</sup> B/s) over the <code>ok</code> '
        f"repeats; P10/P50/P90 by linear interpolation. Intervals: percentile bootstrap of "
        f"the median, {stats.N_BOOT:,} resamples, seed {stats.SEED}, "
        f"{stats.CI_LEVEL:.0%}; none with fewer than {stats.MIN_REPEATS_FOR_INTERVAL} ok "
        f"repeats. <b>What is equalised</b>: every strategy may open as many connections as "
        f"the transfer job has threads; <i>connections</i> (objects in flight × streams per "
        f"object) is what it actually used. Sustained: the rate after "
        f"the first {stats.RAMP_FRACTION:.0%} of the transfer (see the figure's caption). "
        f"Highlighted rows have a failed, corrupt or outlying repeat. All numbers, unrounded, "
        f"are in <code>summary.tsv</code>.</p>"
    )
    body += _table(t, flag=flag)
    out = metrics[metrics["outlier"].astype(bool)]
    body += (
        f'<h2>Outliers</h2><p class="note">A repeat whose rate is below '
        f"{stats.OUTLIER_FRACTION} × the median of its group (same site, remote, direction "
        f"and layout, the repeat included, at least {stats.OUTLIER_MIN_REPEATS} ok "
        f"repeats): a collapse, not noise.</p>"
    )
    if out.empty:
        body += "<p>No outliers.</p>"
    else:
        o = out[
            [
                "site",
                "remote",
                "direction",
                "layout",
                "repeat",
                "started_utc",
                "mb_per_s",
                "group_median",
            ]
        ].copy()
        o["× median"] = o["mb_per_s"] / o["group_median"]
        body += _table(o.rename(columns={"mb_per_s": "rate", "group_median": "group median"}))
    bad = metrics[metrics["status"] != "ok"]
    body += "<h2>Failed, corrupt and unverified transfers</h2>"
    if bad.empty:
        body += "<p>None: every transfer moved and verified every byte.</p>"
    else:
        body += _table(
            bad[["site", "remote", "direction", "layout", "repeat", "status", "retries", "error"]],
            wrap={"error"},
        )
    path.write_text(_page("Rate per site, direction and strategy", body))


def _prices(info: Mapping[str, Any]) -> dict[str, stats.Prices | None]:
    return {
        name: stats.Prices.from_config((r or {}).get("prices"))
        for name, r in (info.get("remotes") or {}).items()
    }


def _money(v: float, currency: str) -> str:
    return NA if math.isnan(v) else f"{v:,.2f} {currency}".strip()


def cost_html(
    transfers: pd.DataFrame, summary: pd.DataFrame, info: Mapping[str, Any], path: Path
) -> None:
    """What the campaign cost and what 1 TB would cost and take, at the configured prices."""
    prices = _prices(info)
    camp = stats.campaign_cost(transfers, prices)
    tb = stats.per_tb(summary, prices)
    no = "no prices configured"

    def money(values, currencies, notes) -> list[str]:
        return [
            _money(v, c) if not n else no for v, c, n in zip(values, currencies, notes, strict=True)
        ]

    price_rows = pd.DataFrame([{
        "remote": n,
        "egress per GB": f"{p.egress_per_gb:g} {p.currency}" if p else no,
        "storage per GB-month": f"{p.storage_per_gb_month:g} {p.currency}" if p else no,
        "storing 1 TB for one month": (_money(1000 * p.storage_per_gb_month, p.currency)
                                       if p else no),
    } for n, p in prices.items()])  # fmt: skip
    c = pd.DataFrame({
        "remote": camp["remote"],
        "downloaded (GB)": camp["downloaded_gb"], "stored (GB)": camp["stored_gb"],
        "egress": money(camp["egress_cost"], camp["currency"], camp["note"]),
        "storage, one month": money(camp["storage_cost_month"], camp["currency"], camp["note"]),
        "total": money(camp["total_cost"], camp["currency"], camp["note"]),
    })  # fmt: skip
    egress = money(tb["egress_cost_per_tb"], tb["currency"], tb["note"])
    t = pd.DataFrame({
        "site": tb["site"], "remote": tb["remote"], "direction": tb["direction"],
        "layout": tb["layout"], "median rate (MB/s)": tb["median_mb_per_s"],
        "hours per TB": tb["hours_per_tb"],
        "egress per TB": [e if d == "download" else "none (upload)"
                          for e, d in zip(egress, tb["direction"], strict=True)],
    })  # fmt: skip
    if t["remote"].nunique() <= 1:
        t = t.drop(columns=["remote"])
    body = (
        '<p class="note">Assumptions: GB = 10<sup>9</sup> bytes and TB = 10<sup>12</sup> '
        "bytes (a provider that bills per GiB charges about 7% more per unit); egress is "
        "charged on every byte downloaded, whatever the transfer's status; uploads (ingress) "
        "are free; every uploaded copy (each layout and repeat) stays on the remote for one "
        "whole month; requests (API calls), minimum storage durations, retrieval fees, taxes "
        "and discounts are <b>not</b> included. Prices are the config's <code>prices</code> "
        "(top level for the single <code>remote</code>, or <code>remotes.&lt;name&gt;.prices"
        "</code>); none are invented.</p>"
    )
    body += "<h2>Prices used</h2>" + (
        _table(price_rows) if not price_rows.empty else "<p>no remotes</p>"
    )
    body += "<h2>What this campaign cost</h2>" + _table(c)
    body += (
        '<h2>Moving one TB</h2><p class="note">Hours = 10<sup>12</sup> bytes / the '
        "median (P50) whole-transfer rate of the <code>ok</code> repeats of that site, "
        "direction and layout, assuming it holds for the whole TB; egress applies to "
        "downloads only (storage: see the prices table).</p>" + _table(t)
    )
    path.write_text(_page("Cost", body))


def _when(ts: Any) -> str:
    return NA if ts is None or pd.isna(ts) else ts.strftime("%Y-%m-%d %H:%M:%S")


def _dataset(ds: Mapping[str, Any]) -> str:
    files, size = int(ds.get("files", 0)), int(ds.get("file_bytes", 0))
    if not files or not size:
        return NA
    return (
        f"{ds.get('name', '')}: {files} files × {size_label(size)} ({size / 1e9:.3g} GB) = "
        f"{files * size:,} bytes"
    )


def campaign_html(
    info: Mapping[str, Any], manifest: Mapping[str, Any] | None, transfers: pd.DataFrame, path: Path
) -> None:
    """Campaign metadata: sites, hosts, cores, rclone versions and flags, dataset, dates."""
    ds = info.get("dataset") or {}
    rc = info.get("rclone") or {}
    t = transfers
    started = pd.to_datetime(t["started_utc"], utc=True, errors="coerce") if not t.empty else None
    rows = [
        ("campaign", info.get("campaign", "")),
        ("bucket", info.get("bucket", "")),
        ("dataset", _dataset(ds)),
        ("chunk sizes", ", ".join(size_label(int(c)) for c in ds.get("chunk_sizes", [])) or NA),
        ("strategies", ", ".join(info.get("strategies", []))),
        ("repeats", str(info.get("repeats", ""))),
        ("rclone flags", " ".join(rc.get("flags", [])) or "(none)"),
        (
            "multi-thread cutoff / part size",
            f"{size_label(int(rc['multi_thread_cutoff']))} / "
            f"{size_label(int(rc['multi_thread_chunk_size']))}"
            if rc.get("multi_thread_cutoff")
            else NA,
        ),
        (
            "rclone versions",
            ", ".join(sorted(map(str, t["rclone_version"].dropna().unique())))
            if not t.empty
            else NA,
        ),
        (
            "transfers recorded",
            f"{len(t)} ({int((t['status'] == 'ok').sum()) if not t.empty else 0} ok)",
        ),
        ("first transfer started (UTC)", _when(started.min() if started is not None else None)),
        ("last transfer started (UTC)", _when(started.max() if started is not None else None)),
    ]
    if manifest:
        rows.append(
            (
                "campaign manifest written (UTC)",
                _when(pd.to_datetime(manifest.get("written_utc"), utc=True, errors="coerce")),
            )
        )
        rows.append(
            (
                "manifest written on",
                f"{manifest.get('host', NA)} ({manifest.get('node_cores', NA)} cores)",
            )
        )
    body = _table(pd.DataFrame(rows, columns=["", "value"]))
    site_rows = []
    for name, s in (info.get("sites") or {}).items():
        st = t[t["site"] == name] if not t.empty else t
        loc = s.get("location")
        role = "+".join(r for r in ("upload", "download") if s.get(r)) or "none"
        site_rows.append({
            "site": name, "role": role,
            "location": f"{loc[0]:.2f}, {loc[1]:.2f}" if loc else NA,
            "hosts": ", ".join(sorted(map(str, st["host"].dropna().unique()))) or NA,
            "node cores": ", ".join(sorted({str(int(c)) for c in st["node_cores"].dropna()}))
            or NA,
            "rclone": ", ".join(sorted(map(str, st["rclone_version"].dropna().unique()))) or NA,
            "transfers": len(st),
            "first (UTC)": _when(pd.to_datetime(st["started_utc"], utc=True, errors="coerce").min()
                                 if len(st) else None),
            "last (UTC)": _when(pd.to_datetime(st["started_utc"], utc=True, errors="coerce").max()
                                if len(st) else None),
        })  # fmt: skip
    body += "<h2>Sites</h2>" + _table(pd.DataFrame(site_rows))
    dist = _distances(info)
    rem_rows = []
    for name, r in (info.get("remotes") or {}).items():
        loc = (r or {}).get("location")
        d = dist[dist["remote"] == name]
        rem_rows.append({
            "remote": name, "location": f"{loc[0]:.2f}, {loc[1]:.2f}" if loc else NA,
            "distance from sites (km)": ", ".join(
                f"{x.site} {x.distance_km:,.0f}" for x in d.itertuples()) or NA,
        })  # fmt: skip
    body += "<h2>Remotes</h2>" + _table(pd.DataFrame(rem_rows))
    if manifest and manifest.get("files"):
        files = pd.DataFrame(
            [
                {"file": f.get("name"), "bytes": f.get("bytes"), "XXH128": f.get("xxh128")}
                for f in manifest["files"]
            ]
        )
        body += "<h2>Dataset files (campaign manifest)</h2>" + _table(files)
    path.write_text(_page("Campaign", body))


# --- everything -------------------------------------------------------------------------------

OUTPUTS = REPORT_OUTPUTS  # every file the `plots` rule writes, by CLI option name


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, sep="\t")
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def write_summary_tsv(summary: pd.DataFrame, path: Path) -> None:
    out = summary.copy()
    floats = out.select_dtypes("float").columns
    out[floats] = out[floats].round(4)
    out.to_csv(path, sep="\t", index=False, na_rep="")


def build_report(tables: Path, info: Mapping[str, Any], out: Mapping[str, Path]) -> None:
    """Every output of the ``plots`` rule from the campaign's tables (``tables`` holds
    transfers.tsv, timeseries.tsv, steps.tsv, missing.tsv, clients.tsv and, if written,
    manifest.json)."""
    transfers = stats.with_setting(_read(tables / "transfers.tsv"))
    series = stats.with_setting(_read(tables / "timeseries.tsv"))
    steps = _read(tables / "steps.tsv")
    missing = _read(tables / "missing.tsv")
    clients = _read(tables / "clients.tsv") if (tables / "clients.tsv").exists() else None
    man_path = tables / "manifest.json"
    try:  # optional: the report does not wait for the campaign manifest
        manifest = json.loads(man_path.read_text())
    except (OSError, ValueError):
        manifest = None
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    summary = stats.summarise(transfers, series)
    metrics = (
        stats.transfer_metrics(transfers, series)
        if not transfers.empty
        else transfers.assign(
            sustained_mb_per_s=[], sustained_method=[], group_median=[], outlier=[]
        )
    )
    rate_vs_time(series, transfers, info, out["rate_vs_time"])
    sustained(metrics, summary, info, out["rate_by_strategy"])
    speedups(metrics, summary, info, out["speedup"])
    rate_vs_distance(transfers, info, out["rate_vs_distance"])
    step_breakdown(steps, transfers, out["steps"], info)
    transfers_html(transfers, missing, out["table"])
    write_summary_tsv(summary, out["summary_tsv"])
    summary_html(summary, metrics, out["summary_html"])
    cost_html(transfers, summary, info, out["cost"])
    campaign_html(info, manifest, transfers, out["campaign"])
    out["headline"].write_text(headline_html(metrics, summary, info, out["rate_by_strategy"]))
    from cloudbench.scaling_report import scaling_html, scaling_png  # it draws with ours

    scaling_png(transfers, out["scaling"])
    clients = pd.DataFrame() if clients is None else clients
    scaling_html(transfers, clients, out["scaling_html"], info)
    from cloudbench import tools_report

    probes = _read(tables / "probes.tsv") if (tables / "probes.tsv").exists() else pd.DataFrame()
    tools_report.tools_png(transfers, out["tools"])
    tools_report.tools_html(transfers, out["tools_html"])
    tools_report.latency_png(transfers, probes, out["latency"])
    tools_report.latency_html(transfers, probes, out["latency_html"])
