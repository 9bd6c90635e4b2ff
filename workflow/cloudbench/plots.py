"""The report's figures, drawn from the aggregated tables only (never from raw records).

Each function takes a DataFrame and a path, so the figures can be rebuilt from the TSVs
alone by anyone who has them.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

STRATEGY_ORDER = ["plain", "chunked", "multithread"]
DPI = 110


def _empty(path: Path, message: str) -> None:
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def rate_vs_time(series: pd.DataFrame, path: Path) -> None:
    """One panel per site x direction; each transfer a line, colour = layout."""
    if series.empty:
        return _empty(path, "no time series recorded")
    data = series.copy()
    data["panel"] = data["site"] + " / " + data["direction"]
    data["transfer"] = data["layout"] + " r" + data["repeat"].astype(str) + " " + data["remote"]
    g = sns.relplot(
        data=data, x="elapsed_s", y="mb_per_s", hue="layout", units="transfer", estimator=None,
        col="panel", col_wrap=2, kind="line", height=3.2, aspect=1.5, alpha=0.8,
        facet_kws={"sharey": False, "sharex": False},
    )
    g.set_axis_labels("seconds since start", "rate (MB/s, 10^6 B/s)")
    g.savefig(path, dpi=DPI)
    plt.close(g.figure)


def rate_by_strategy(transfers: pd.DataFrame, path: Path) -> None:
    """Bars = median rate; points = individual repeats (their spread is the repeatability)."""
    ok = transfers[transfers["status"] == "ok"].copy()
    if ok.empty:
        return _empty(path, "no successful transfers")
    ok["panel"] = ok["site"] + " / " + ok["direction"]
    order = [s for s in ok["layout"].drop_duplicates().sort_values()]
    g = sns.catplot(
        data=ok, x="layout", y="mb_per_s", col="panel", col_wrap=2, kind="bar",
        estimator="median", errorbar=None, order=order, height=3.2, aspect=1.4, alpha=0.6,
    )
    for ax, (_, sub) in zip(g.axes.flat, ok.groupby("panel", sort=True), strict=False):
        sns.stripplot(data=sub, x="layout", y="mb_per_s", order=order, ax=ax, color="black",
                      size=5, jitter=0.15)
    g.set_axis_labels("strategy (chunk size)", "rate (MB/s)")
    g.savefig(path, dpi=DPI)
    plt.close(g.figure)


def step_breakdown(steps: pd.DataFrame, transfers: pd.DataFrame, path: Path) -> None:
    """Total seconds per step and site, transfers included, so the I/O-heavy steps show up."""
    parts = []
    if not steps.empty:
        parts.append(steps.groupby(["site", "step"], as_index=False)["seconds"].sum())
    if not transfers.empty:
        t = transfers.groupby(["site", "direction"], as_index=False)["seconds"].sum()
        parts.append(t.rename(columns={"direction": "step"}))
    if not parts:
        return _empty(path, "no steps recorded")
    data = pd.concat(parts, ignore_index=True)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.barplot(data=data, x="step", y="seconds", hue="site", ax=ax)
    ax.set_ylabel("total seconds (all files / repeats)")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def transfers_html(transfers: pd.DataFrame, missing: pd.DataFrame, path: Path) -> None:
    cols = ["site", "remote", "direction", "layout", "repeat", "transfers", "streams", "bytes",
            "seconds", "mb_per_s", "status", "retries", "error", "host", "rclone_version"]
    html = transfers[cols].to_html(index=False, na_rep="", float_format=lambda v: f"{v:.2f}")
    if not missing.empty:
        html += "<h3>Not reported yet</h3>" + missing.to_html(index=False)
    path.write_text(f"<html><body>{html}</body></html>\n")
