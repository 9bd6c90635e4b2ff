"""The report's Scaling section: rate against clients and against concurrency, the knee and
its interval, collapses, each client's spread, and one recommendation per site and remote.

Every number comes from :mod:`cloudbench.report.scaling`; this module only draws and tabulates.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign.identity import GROUP, ROUTE
from cloudbench.intervals import level_text
from cloudbench.report import scaling
from cloudbench.report.headline import rate_caps
from cloudbench.report.html_page import html_table, page
from cloudbench.report.labels import RATE_LABEL
from cloudbench.report.select import same_keys

NO_SWEEP = (
    "This campaign sweeps neither clients nor concurrency: list several values under "
    "clients: (e.g. [1, 2, 4, 8]) or concurrency: (e.g. {chunked: [4, 8, 16, 32]}) to "
    "see where the rate stops growing."
)


def scaling_png(transfers: pd.DataFrame, path: Path) -> None:
    """One row of panels per site, remote and direction: median rate (bars: its
    order-statistic interval) against clients, and against each client's concurrency; one
    line per tool, layout and the other knob's value; the knee as a dashed line with its
    bootstrap range shaded, collapses as red crosses."""
    import seaborn as sns  # matplotlib and seaborn: only the figures rule draws (outputs.FIGURES)

    from cloudbench.report.figures import grid, placeholder, save

    shades = sns.color_palette("colorblind", 10)
    pts = scaling.point_table(transfers)
    table = scaling.scaling_table(transfers)
    if table.empty:
        return placeholder(path, NO_SWEEP)
    groups = list(table.groupby(ROUTE, sort=False).groups)
    axes_used = [a for a in scaling.AXES if (table["axis"] == a).any()]
    fig, axes = grid(len(groups) * len(axes_used), ncols=len(axes_used))
    styles = ["-", "--", ":", "-."]
    for i, key in enumerate(groups):
        route = dict(zip(ROUTE, key, strict=True))
        for j, axis in enumerate(axes_used):
            ax = axes[i * len(axes_used) + j]
            other = "concurrency" if axis == "clients" else "clients"
            sel = table[same_keys(table, route, ROUTE) & (table["axis"] == axis)]
            layouts = list(dict.fromkeys(zip(sel["tool"], sel["layout"], strict=True)))
            for k, row in enumerate(sel.itertuples(index=False)):
                # a colour per line (its legend names layout and the other knob), a line
                # style per layout
                colour = shades[k % len(shades)]
                curve = same_keys(pts, row._asdict(), scaling.CURVE_KEYS)
                p = pts[curve & (pts[other] == row.held)].sort_values(axis)
                err = [
                    (p["median"] - p["low"]).fillna(0).clip(lower=0),
                    (p["high"] - p["median"]).fillna(0).clip(lower=0),
                ]
                ax.errorbar(
                    p[axis], p["median"], yerr=err, color=colour, marker="o",
                    ls=styles[layouts.index((row.tool, row.layout)) % len(styles)], capsize=3,
                    label=f"{row.tool} {row.layout}, {other} {scaling._n(row.held)}",
                )  # fmt: skip
                ax.axvline(row.knee, color=colour, ls="--", lw=1)
                if not math.isnan(row.knee_low):
                    ax.axvspan(row.knee_low, row.knee_high, color=colour, alpha=0.08)
                for c in filter(None, row.collapse.split("; ")):
                    x = float(c.split(" is ")[0])
                    y = p.loc[p[axis] == x, "median"]
                    ax.plot([x] * len(y), y, "x", color="#c0392b", ms=12, mew=3)
            ax.set_xscale("log", base=2)
            ticks = sorted(pts.loc[pts["site"] == route["site"], axis].unique())
            ax.set_xticks(ticks, [scaling._n(t) for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel(axis if axis == "clients" else "concurrency per client")
            ax.set_ylabel(RATE_LABEL)
            ax.set_ylim(bottom=0)
            where = f"{route['site']} {route['direction']} ({route['remote']})"
            ax.set_title(f"{where} vs {axis}", fontsize=10)
            ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save(fig, path)


def scaling_html(
    transfers: pd.DataFrame,
    clients: pd.DataFrame,
    path: Path,
    info: Mapping[str, Any] | None = None,
) -> None:
    """Recommendations, the knee of every sweep, collapses, and each client's spread."""
    table = scaling.scaling_table(transfers)
    remotes = (info or {}).get("remotes") or {}
    names = {k: (r or {}).get("label") for k, r in remotes.items()}
    body = [f'<p class="note">{html.escape(NO_SWEEP)}</p>'] if table.empty else []
    capped = bool(rate_caps(info or {}, transfers))
    lines = scaling.recommendations(transfers, names, capped=capped)
    if lines:
        body.append("<h2>Recommendation</h2>")
        body += [f"<p>{html.escape(s)}</p>" for s in lines]
    if not table.empty:
        frac = f"{scaling.KNEE_FRACTION:.0%}"
        body.append(
            f'<h2>Knee of each sweep</h2><p class="note">knee: the smallest value whose median '
            f"reaches {frac} of the best median of its sweep (one sweep per tool and layout); "
            "knee_interval: the middle 95% of knees found again on resampled repeats, a "
            "bootstrap range with no coverage claimed. failed: repeats that delivered nothing, "
            "counted as 0 MB/s. collapse: a value whose median is at least 10% below the best "
            "smaller value's, with the exact (Mann-Whitney) interval of the factor, at the "
            "coverage written beside it, entirely below 1.</p>"
        )
        shown = table.assign(
            saturated=["yes" if v else "no: still growing" for v in table["saturated"]],
            knee_interval=[
                "" if math.isnan(lo) else f"[{scaling._n(lo)}, {scaling._n(hi)}]"
                for lo, hi in zip(table["knee_low"], table["knee_high"], strict=True)
            ]
        )[
            [
                *scaling.CURVE_KEYS, "axis", "held", "values", "knee", "knee_interval", "best",
                "best_median", "saturated", "failed", "collapse",
            ]
        ]  # fmt: skip
        body.append(
            html_table(
                shown,
                flag=shown["collapse"].astype(bool),
                headers={"held": "other knob held at", "best_median": "best median MB/s"},
                wrap={"collapse", "values"},  # a long sweep stays inside the window
            )
        )
    points = scaling.point_table(transfers)
    body.append(
        '<h2>Every clients × concurrency point</h2><p class="note">median MB/s of the '
        "repeats, failed ones counted as 0 MB/s (n = repeats, failed = of which failed), with "
        "the order-statistic interval of the median and its real coverage (75% for 3 "
        "repeats, 95% needs 6).</p>"
    )
    shown = points.assign(level=[level_text(v) for v in points["level"]])
    body.append(html_table(shown, flag=points["failed"] > 0, headers={"level": "coverage"}))
    if not clients.empty:
        spread = (
            clients.groupby(GROUP, sort=False, dropna=False)
            .agg(
                measurements=("repeat", "nunique"),
                clients=("client", "nunique"),
                client_min=("mb_per_s", "min"),
                client_median=("mb_per_s", "median"),
                client_max=("mb_per_s", "max"),
                max_start_offset_s=("start_offset_s", "max"),
            )
            .reset_index()
        )
        body.append(
            '<h2>Each client\'s rate</h2><p class="note">MB/s of each client over its own '
            "share, across the repeats of a setting: a wide spread means some nodes (or their "
            "links) were slower; max_start_offset_s is the largest start skew.</p>"
        )
        body.append(html_table(spread))
    path.write_text(page("Scaling", "\n".join(body)))
