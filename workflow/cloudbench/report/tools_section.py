"""The report's Tools and Latency sections.

Tools: the rate of every tool per strategy and direction with its interval, each tool's
failure rate, and what an object costs each tool (files/s, seconds per object): the
comparison SaladCloud published. Latency: rate against the round-trip time the probes
measured, with a fitted line, beside the existing rate against distance; the probes' time to
first byte per remote; and the window/RTT ceiling where the site's window is known.

Every number comes from :mod:`cloudbench.report.latency`; this module only draws and tabulates.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cloudbench.campaign.clients import NAMES
from cloudbench.campaign.identity import LABELS, LINK, ROUTE
from cloudbench.intervals import level_text
from cloudbench.report import latency
from cloudbench.report.html_page import html_table, page
from cloudbench.report.labels import DIRECTIONS, RATE_LABEL
from cloudbench.report.stats import TREND_MIN_PLACES

NO_ROWS = "no successful transfers yet"
ONE_TOOL = (
    "one tool measured ({tool}): its rates are under Transfers; list several under tools: "
    f"({', '.join(NAMES)}) to compare them here"
)
NO_PROBES = (
    "no latency probes with times: the probe measures S3 remotes only (other remotes get a "
    "record saying skipped)"
)
NO_PROBE_TIMES = "no probe times: the probe measures S3 remotes only"
QUANTILES = ("p50", "p90", "p99")
MS_PER_S = 1000.0


def with_tool(transfers: pd.DataFrame) -> pd.DataFrame:
    """Tables written before other tools existed measured with rclone (its setting label
    names the tool where there is one)."""
    if transfers.empty or "tool" in transfers.columns:
        return transfers
    if "setting" in transfers.columns:
        return transfers.assign(tool=transfers["setting"].astype(str).str.split("-").str[0])
    return transfers.assign(tool="rclone")


def _tool_colors(tools) -> dict[str, tuple]:
    import seaborn as sns

    names = sorted(set(tools))
    return dict(zip(names, sns.color_palette("colorblind", len(names) or 1), strict=False))


def _panels(rates: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """One panel per site, remote and direction (only the keys the table has)."""
    keys = [k for k in ROUTE if k in rates.columns]
    return list(rates.groupby(keys, sort=False)) if keys else [((), rates)]


def _x_label(row: Any, several: bool) -> str:
    """The bar's place: its strategy or layout, with clients x concurrency where a panel
    holds several (the tool is the bar's colour, so it is not repeated)."""
    base = str(getattr(row, "layout", None) or row.strategy)
    setting = str(getattr(row, "setting", "") or "")
    return f"{base} {setting.partition('-')[2]}" if several and setting else base


def tools_png(transfers: pd.DataFrame, path: Path) -> None:
    """One panel per site, remote and direction: the median rate of each tool per layout
    and setting, bars its order-statistic interval (none with fewer than 3 repeats); the
    failure rate in the title. Nothing is pooled across sites, layouts or settings."""
    from cloudbench.report.figures import grid, placeholder, save  # matplotlib: figures rule only

    transfers = with_tool(transfers)
    if transfers.empty:
        return placeholder(path, NO_ROWS)
    rates = latency.tool_strategy_rates(transfers)
    fails = latency.failure_rate_by_tool(transfers)
    rates = rates[rates["n"] > 0]
    if rates.empty:
        return placeholder(path, NO_ROWS)
    if rates["tool"].nunique() == 1:
        return placeholder(path, ONE_TOOL.format(tool=rates["tool"].iloc[0]))
    panels = _panels(rates)
    fig, axes = grid(len(panels), width=6.2, height=4.0)
    colors = _tool_colors(transfers["tool"])
    for ax, (key, sel) in zip(axes, panels, strict=False):
        several = "setting" in sel and sel["setting"].str.partition("-")[2].nunique() > 1
        places = list(dict.fromkeys(_x_label(r, several) for r in sel.itertuples()))
        tools = sorted(set(sel["tool"]))
        width = 0.8 / max(1, len(tools))
        for r in sel.itertuples(index=False):
            k, j = tools.index(r.tool), places.index(_x_label(r, several))
            x = j + (k - (len(tools) - 1) / 2) * width
            err = None
            if not (math.isnan(r.ci_low) or math.isnan(r.ci_high)):
                err = [[max(0, r.median - r.ci_low)], [max(0, r.ci_high - r.median)]]
            ax.bar(x, r.median, width * 0.9, color=colors[r.tool], yerr=err, capsize=3,
                   label=r.tool)  # fmt: skip
        ax.set_xticks(range(len(places)), places)
        ax.set_ylabel(RATE_LABEL)
        direction = key[-1] if isinstance(key, tuple) and key else str(key)
        f = fails[fails["direction"] == direction]
        note = ", ".join(f"{t.tool} {t.failure_rate:.0%}" for t in f.itertuples(index=False))
        where = " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
        ax.set_title(f"{where}: median rate per tool\nfailure rate: {note}", fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="best", framealpha=0.9)
    fig.tight_layout()
    save(fig, path)


def tools_html(transfers: pd.DataFrame, path: Path, info: Mapping[str, Any] | None = None) -> None:
    """The tool x strategy medians with intervals, failure rates, and per-object costs; every
    bandwidth cap the rates ran under is named above them, as on the front page (a capped
    rclone beside an uncapped s5cmd is no comparison of the tools)."""
    from cloudbench.report.headline import rate_caps

    transfers = with_tool(transfers)
    caps = rate_caps(info or {}, transfers)
    capped = (
        '<p style="color:#b00"><b>Capped rates</b>: ' + html.escape("; ".join(caps)) + ".</p>"
        if caps
        else ""
    )
    if transfers.empty:
        empty = pd.DataFrame(columns=latency.TOOL_COLUMNS)
        path.write_text(page("Tools", f'<p class="note">{NO_ROWS}</p>' + html_table(empty)))
        return
    rates = latency.tool_strategy_rates(transfers)
    body = [
        capped + "<h2>Rate per tool and strategy</h2>"
        '<p class="note">median MB/s of the ok transfers (n) of each measurement (site, '
        "remote, direction, tool, layout, clients and concurrency: nothing pooled), with "
        "the order-statistic interval of the median and its real coverage (75% for 3 "
        "repeats, 95% needs 6); not_ok: rows without a rate (failed, corrupt, unverified). "
        "Every download of every tool was verified against the manifest.</p>",
        html_table(
            rates.assign(ci_level=[level_text(v) for v in rates["ci_level"]]),
            headers={"median": "median MB/s", "ci_low": "low", "ci_high": "high"}
            | {"ci_level": "coverage"},
        ),
        "<h2>Failure rate per tool</h2>"
        '<p class="note">failure_rate: rows not ok over all rows of the tool and direction, '
        "what the campaign ended with: failed (the tool exited non-zero or moved too few "
        "bytes) and corrupt (the data did not match the manifest). attempt_failure_rate: "
        "failed attempts over every attempt, the ones a rerun measured again and the killed "
        "ones included: how often a copy by this tool fails when it is tried.</p>",
    ]
    fails = latency.failure_rate_by_tool(transfers)
    body.append(html_table(fails, flag=fails["attempt_failure_rate"] > 0))
    per = latency.per_object_by_tool(transfers)
    body.append(
        "<h2>Per object</h2>"
        '<p class="note">median files/s (files / wall seconds) and seconds per object '
        "(wall seconds / objects) of the ok transfers of each measurement (concurrency "
        "values apart): with many small files the cost per object, not per byte, decides "
        "the rate.</p>"
    )
    body.append(html_table(per, digits={"s_per_object": 3}))
    path.write_text(page("Tools", "\n".join(body)))


def latency_png(transfers: pd.DataFrame, probes: pd.DataFrame, path: Path) -> None:
    """Rate against RTT per direction with the fitted line (where probes gave an RTT),
    each site-remote pair's time to first byte of the probe's small GETs and PUTs (P50,
    P90, P99), and the seconds per object of every tool (the per-object latency a
    transfer saw, which needs no probe)."""
    from cloudbench.report.figures import grid, placeholder, save  # matplotlib: figures rule only

    transfers = with_tool(transfers)
    times = probes.dropna(subset=["connect_p50_ms"]) if not probes.empty else probes
    per = latency.per_object_by_tool(transfers)
    joined, fits = (
        latency.rate_vs_rtt(transfers, probes)
        if not (transfers.empty or times.empty)
        else (pd.DataFrame(), {})
    )
    dirs = [d for d in DIRECTIONS if not joined.empty and (joined["direction"] == d).any()]
    n = len(dirs) + (not times.empty) + (not per.empty)
    if n == 0:
        return placeholder(path, NO_PROBES)
    fig, axes = grid(n, width=6.2, height=4.0)
    for ax, direction in zip(axes, dirs, strict=False):
        _rate_vs_rtt_panel(ax, joined[joined["direction"] == direction], fits.get(direction))
        ax.set_title(f"{direction}: rate vs RTT", fontsize=10)
    rest = axes[len(dirs) :]
    if not times.empty:
        _ttfb_panel(rest.pop(0), times)
    if not per.empty:
        _per_object_panel(rest.pop(0), per, "" if not times.empty else NO_PROBE_TIMES)
    fig.tight_layout()
    save(fig, path)


def _rate_vs_rtt_panel(ax, p: pd.DataFrame, fit) -> None:
    ax.scatter(p["rtt_ms"], p["mb_per_s"], alpha=0.6, s=28, color="#0072B2", zorder=3)
    right = p["rtt_ms"].max()
    for (site, remote), q in p.groupby(LINK):
        x = q["rtt_ms"].iloc[0]
        # a pair in the right half is named on its left, so its name stays inside the axes
        left = right > 0 and x > 0.5 * right
        ax.annotate(f"{site}→{remote}", (x, q["mb_per_s"].median()),
                    xytext=(-6 if left else 6, 4), textcoords="offset points", fontsize=8,
                    ha="right" if left else "left")  # fmt: skip
    if fit is not None:
        xs = np.linspace(0, p["rtt_ms"].max() * 1.05, 50)
        ax.plot(xs, fit.intercept + fit.slope * xs, color="black", lw=1.5)
        txt = f"slope {fit.slope:+.3g} MB/s per ms (OLS, n = {fit.n}, R² = {fit.r_squared:.2f})"
    else:
        n = latency.distinct_rtts(p)
        txt = (
            f"too few places for a trend ({n} distinct RTT{'s' if n != 1 else ''}; "
            f"{TREND_MIN_PLACES} needed: probe more sites or remotes)"
        )
    ax.text(0.02, 0.02, txt, transform=ax.transAxes, ha="left", va="bottom", fontsize=8,
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})  # fmt: skip
    ax.set_xlabel("round-trip time (ms, median P50 TCP connect)")
    ax.set_ylabel(RATE_LABEL)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)


def _ttfb_panel(ax, times: pd.DataFrame) -> None:
    labels, x = [], 0
    colors = ["#009E73", "#E69F00", "#D55E00"]
    for (site, remote), g in times.groupby(LINK, sort=True):
        for k, op in enumerate(("get", "put")):
            vals = [g[f"{op}_ttfb_{q}_ms"].median() for q in QUANTILES]
            for m, (q, v) in enumerate(zip(QUANTILES, vals, strict=True)):
                ax.bar(x + k * 0.4 + (m - 1) * 0.12, v, 0.11, color=colors[m],
                       label=q.upper() if x == 0 and k == 0 else None)  # fmt: skip
        labels += [f"{site}→{remote}\nGET", f"{site}→{remote}\nPUT"]
        x += 1
    ax.set_xticks([i // 2 + (i % 2) * 0.4 for i in range(len(labels))], labels, fontsize=8)
    ax.set_ylabel("time to first byte (ms)")
    ax.set_title("probe: small objects, time to first byte", fontsize=10)
    ax.legend(fontsize=8)


def per_object_labels(per: pd.DataFrame) -> list[str]:
    """Each bar's name: the labels of the identity (site, remote, direction, layout,
    setting) that differ between the bars, so that no two bars read alike (the demo's nine
    read "rclone download" six times); the one bar of a table names its direction."""
    keys = [k for k in LABELS if k != "repeat" and k in per.columns]
    varying = [k for k in keys if per[k].nunique() > 1] or ["direction"]
    return [" · ".join(str(v) for v in row) for row in per[varying].itertuples(index=False)]


def _per_object_panel(ax, per: pd.DataFrame, note: str) -> None:
    """Horizontal bars, one per measurement identity, named in full on the left, coloured
    by tool; the tools named in the title."""
    colors = _tool_colors(per["tool"])
    labels = per_object_labels(per)
    y = np.arange(len(per))[::-1]  # the table's first row on top
    ax.barh(y, per["s_per_object"] * MS_PER_S, 0.7, color=[colors[t] for t in per["tool"]])
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("median time per object (ms)")
    tools = ", ".join(dict.fromkeys(per["tool"]))
    title = f"per object: transfer seconds / objects ({tools})"
    ax.set_title(title + (f"\n({note})" if note else ""), fontsize=10)


def latency_html(transfers: pd.DataFrame, probes: pd.DataFrame, path: Path) -> None:
    """Each probe, each pair's RTT, and the window/RTT ceilings where the window is known."""
    if probes.empty or probes["connect_p50_ms"].isna().all():
        # no probe measured a time (none ran, or every remote was skipped): say so and list
        # which were skipped, rather than a table of dashes under headings without numbers
        note = f"<p><b>{html.escape(NO_PROBES)}.</b></p>"
        shown = [c for c in (*LINK, "when", "status", "reason") if c in probes.columns]
        listed = html_table(
            probes[shown]
            if shown and not probes.empty
            else pd.DataFrame(columns=latency.PROBE_COLUMNS),  # what a probe would give
            wrap={"reason"},
        )
        path.write_text(page("Latency", note + listed + _visibility_html(transfers, probes)))
        return
    body = [
        "<h2>Probes</h2>"
        '<p class="note">before and after each site\'s transfers, per remote: P50 TCP '
        "connect (one round trip), TLS handshake (https only), and P50/P90/P99 time to first "
        "byte of small signed GETs and PUTs, in ms, with the time of day (UTC).</p>",
        html_table(
            probes.drop(
                columns=["started_utc", "tcp_rmem_max_bytes", "tcp_wmem_max_bytes"], errors="ignore"
            ),
            flag=probes["status"] != "ok",
        ),
        "<h2>Round-trip time per site and remote</h2>"
        '<p class="note">RTT: the median over the pair\'s probes of their P50 TCP connect '
        "time.</p>",
        html_table(latency.pair_rtt(probes)),
    ]
    if not transfers.empty:
        joined, fits = latency.rate_vs_rtt(transfers, probes)
        lines = []
        for direction, fit in sorted(fits.items()):
            if fit is None:
                n = latency.distinct_rtts(joined[joined["direction"] == direction])
                lines.append(
                    f"{direction}: {n} distinct RTT(s), no trend ({TREND_MIN_PLACES} needed)"
                )
            else:
                lines.append(
                    f"{direction}: {fit.slope:+.3g} ± {fit.slope_se:.2g} MB/s per ms of RTT "
                    f"(OLS on n = {fit.n} transfers, R² = {fit.r_squared:.2f})"
                )
        body.append("<h2>Rate vs RTT</h2>" + "".join(f"<p>{html.escape(x)}</p>" for x in lines))
    ceilings = latency.window_ceilings(transfers, probes) if not transfers.empty else pd.DataFrame()
    body.append(
        "<h2>Window / RTT ceiling</h2>"
        '<p class="note">connections x window / RTT: the most the transfers could move if '
        "every connection's window reached the site's largest TCP buffer (tcp_rmem for "
        "downloads, tcp_wmem for uploads, as the probe read them). A rate near the ceiling "
        "is bounded by the path's latency; far below, by something else. Stated only where "
        "the window is known.</p>"
    )
    if ceilings.empty:
        body.append('<p class="note">window unknown: no ceiling stated</p>')
    else:
        body.append(html_table(ceilings, flag=ceilings["of_ceiling"] > 0.8))
    body.append(_visibility_html(transfers, probes))
    path.write_text(page("Latency", "\n".join(body)))


def _visibility_html(transfers: pd.DataFrame, probes: pd.DataFrame | None = None) -> str:
    """The cross-site half of visibility: publication at the upload site to first read at
    each download site (:func:`cloudbench.report.latency.copy_visibility`), on the store's
    one clock where the probes measured each site's offset from it."""
    return (
        "<h2>Cross-site visibility</h2>"
        '<p class="note">copy age: seconds from the upload site\'s publication of a copy (its '
        "manifest, on that site's clock) until a download site read it whole (on its own "
        "clock), per download site and remote. Two clocks: if the reader's is behind, the age "
        "reads short and bounds nothing. So each site's probe measures its clock against the "
        "store's (the Date header of its responses, whole seconds, narrowed by many "
        "responses: clock_ahead_low_s/high_s in probes.tsv), and the smallest age is given "
        "again on the store's one clock, as the interval it lies in "
        "(min_age_store_clock_low_s to high_s; empty where a site's offset is unknown). "
        "That smallest age bounds how long the store takes to show a new object elsewhere; "
        "the rest mostly says how long after the upload the site ran. The list- and "
        "read-after-write probe above measures the same delay at one site.</p>"
        + html_table(latency.copy_visibility(transfers, probes))
    )
