"""Routes at a glance: between which site and which store, which way, and how fast.

A route is a site, a remote and a direction (``identity.ROUTE``). A campaign measures each
route with one or more settings (tool, layout, clients, concurrency); the route's rate is
that of its **best** setting, the one with the highest median whole-transfer rate among the
repeats that worked, with the order-statistic interval of that median and its coverage. Its
**state**, as a centre's monitoring reads it:

* ``ok``: a rate, at or above the campaign's ``thresholds.poor`` (if set);
* ``below threshold``: a rate below ``thresholds.poor``;
* ``failed``: measured, nothing worked, and the store answered (a fault of the route);
* ``no data``: nothing measured that worked and the store did not answer (an outage: the
  ``outage`` column), or nothing measured at all. Not a regression: nothing was learnt.

The first screen draws them as a grid (sites against remotes, per direction); a site whose
every route has no rate is labelled "site", a remote likewise "store". The same routes are
written for monitoring (:func:`status_json`, :func:`prometheus`), per campaign and per series.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from cloudbench.campaign.identity import LINK, ROUTE, keys_without
from cloudbench.intervals import level_text, median_interval
from cloudbench.report.labels import setting_as_run, with_interval

OK, BELOW, FAILED, NO_DATA, REGRESSED = "ok", "below threshold", "failed", "no data", "regressed"
STATES = (OK, BELOW, REGRESSED, FAILED, NO_DATA)  # the states a route can be in
# what tells the settings of one route apart (the tool is in the setting's label)
SETTING = keys_without(*ROUTE, "tool", "strategy", "repeat")
COLUMNS = (
    *ROUTE, *SETTING, "concurrency", "n", "median_mb_per_s", "low_mb_per_s", "high_mb_per_s",
    "level", "failed", "outages", "state",
)  # fmt: skip


def routes(
    transfers: pd.DataFrame, thresholds: tuple[float | None, float | None] = (None, None)
) -> pd.DataFrame:
    """One row per route of a campaign's transfers.tsv: its best setting, rate and state
    (module doc); ``thresholds``: (good, poor) in MB/s."""
    rows = []
    if transfers.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    for key, g in transfers.groupby(ROUTE, sort=True):
        route = dict(zip(ROUTE, key, strict=True))
        ok = g[(g["status"] == "ok") & g["mb_per_s"].notna()]
        bad = g[g["status"] != "ok"]
        outages = int((bad.get("outage", pd.Series(dtype=object)) == "during").sum())
        best: dict[str, Any] = dict.fromkeys(SETTING)
        stats: dict[str, Any] = {"n": 0, "median_mb_per_s": math.nan}
        if not ok.empty:
            medians = ok.groupby(SETTING, sort=True)["mb_per_s"].median()
            top = medians.idxmax()
            best = dict(zip(SETTING, top if isinstance(top, tuple) else (top,), strict=True))
            mine = ok[np.logical_and.reduce([ok[k] == v for k, v in best.items()])]
            rates = mine["mb_per_s"]
            iv = median_interval(rates)
            ran = pd.to_numeric(mine.get("concurrency", pd.Series(dtype=float)), errors="coerce")
            stats = {
                # objects at once as run (an "auto" setting's number), for its label
                "concurrency": int(ran.median()) if ran.notna().any() else math.nan,
                "n": int(rates.size),
                "median_mb_per_s": float(rates.median()),
                "low_mb_per_s": iv.low,
                "high_mb_per_s": iv.high,
                "level": iv.level,
            }
        rows.append(
            route | best | stats | {"failed": len(bad), "outages": outages}
            | {"state": state_of(stats["median_mb_per_s"], len(bad), outages, thresholds)}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))


def state_of(
    median: float, failed: int, outages: int, thresholds: tuple[float | None, float | None]
) -> str:
    """A route's state from its best median and its failures (module doc)."""
    if median is None or math.isnan(median):
        return FAILED if failed > outages else NO_DATA
    poor = thresholds[1]
    return BELOW if poor is not None and median < poor else OK


def _cell(r: Mapping[str, Any]) -> str:
    """A route's rate in the first screen's one form: ``15.7 [15.3, 15.8] 75%``."""
    if r["state"] in (FAILED, NO_DATA):
        return r["state"]
    return with_interval(
        r["median_mb_per_s"], r["low_mb_per_s"], r["high_mb_per_s"], r["level"], n=r["n"]
    )


def _colour(r: Mapping[str, Any], thresholds: tuple[float | None, float | None]) -> str:
    good, poor = thresholds
    if r["state"] in (FAILED, REGRESSED):
        return "bad"
    if r["state"] in (NO_DATA,):
        return "none"
    if r["state"] == BELOW:
        return "bad"
    if good is not None and r["median_mb_per_s"] >= good:
        return "good"
    return "mid" if good is not None or poor is not None else ""


def whole_failures(table: pd.DataFrame, direction: str) -> tuple[list[str], list[str]]:
    """The sites and the remotes whose every route of a direction has no rate: a failure
    of the site (a row) or of the store (a column), not of one route."""
    d = table[table["direction"] == direction]
    none = d["state"].isin([FAILED, NO_DATA])
    sites = [s for s, g in d.groupby("site") if none[g.index].all() and d["remote"].nunique() > 1]
    remotes = [r for r, g in d.groupby("remote") if none[g.index].all() and d["site"].nunique() > 1]
    return sites, remotes


GRID_STYLE = (
    "<style>.cb-grid td.good{background:#d9f2d9}.cb-grid td.mid{background:#fff3cd}"
    ".cb-grid td.bad{background:#f8d7da}.cb-grid td.none{background:#eee;color:#666}"
    ".cb-grid td,.cb-grid th{padding:1px 6px;border:1px solid #ccc;font-size:12px}"
    # one small table per direction, side by side: the grid stays a few lines tall
    ".cb-grid table{display:inline-table;width:auto!important;margin:0 1em .3em 0;"
    "vertical-align:top}"
    ".cb-grid caption{font-size:12px;text-align:left}.cb-grid p{margin:.2em 0}</style>"
)


def grid_html(table: pd.DataFrame, thresholds: tuple[float | None, float | None]) -> str:
    """Sites against remotes, one grid per direction: each cell its route's best median
    MB/s [interval] (the coverage and the setting on hover), coloured by ``thresholds``; a
    whole failed row says "site", a whole failed column "store"."""
    if table.empty:
        return ""
    auto = table["setting"].astype(str).str.endswith("xauto").any()
    parts = [GRID_STYLE, '<div class="cb-grid"><p><b>Routes</b> (the fastest setting '
             "measured per site, remote and direction: median MB/s [interval] coverage; "
             "a setting is tool-clients x objects at once, as run"
             + ("; 'auto' ran the transfer job's threads" if auto else "")
             + (f"; good from {thresholds[0]:g}, poor below {thresholds[1]:g} MB/s"
                if None not in thresholds else "")
             + ")</p>"]  # fmt: skip
    remotes = sorted(table["remote"].unique())
    for direction in sorted(table["direction"].unique()):
        d = table[table["direction"] == direction].set_index(LINK)
        bad_sites, bad_remotes = whole_failures(table, direction)
        head = "".join(
            f"<th>{html.escape(r)}{' (store)' if r in bad_remotes else ''}</th>" for r in remotes
        )
        body = []
        for site in sorted({s for s, _ in d.index}):
            tds = []
            for remote in remotes:
                if (site, remote) not in d.index:
                    tds.append("<td></td>")
                    continue
                r = d.loc[(site, remote)].to_dict() | {"site": site, "remote": remote}
                tip = (
                    f"{r['layout']} {r['setting']}, n={r['n']}, "
                    f"{level_text(r['level']) if isinstance(r['level'], float) else ''}"
                    if r["state"] not in (FAILED, NO_DATA)
                    else f"{r['failed']} failed, {r['outages']} in an outage of the store"
                )
                ran = setting_as_run(r["setting"], r.get("concurrency"))
                which = (
                    f" <small>{html.escape(str(r['layout']))} {html.escape(ran)}</small>"
                    if r["state"] not in (FAILED, NO_DATA)
                    else ""
                )
                tds.append(
                    f'<td class="{_colour(r, thresholds)}" title="{html.escape(tip)}">'
                    f"{html.escape(_cell(r))}{which}</td>"
                )
            label = html.escape(site) + (" (site)" if site in bad_sites else "")
            body.append(f"<tr><th>{label}</th>{''.join(tds)}</tr>")
        parts.append(
            f"<table><caption>{html.escape(direction)}</caption><thead><tr><th></th>{head}"
            f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )
    parts.append("</div>")
    return "\n".join(parts)


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else round(f, 6)


def status_json(table: pd.DataFrame, labels: Mapping[str, Any]) -> str:
    """The routes for monitoring: one object per route (state, rate, interval, setting)."""
    rows = []
    for r in table.to_dict("records"):
        rows.append(
            {k: r[k] for k in (*ROUTE, *SETTING) if k in r}
            | {k: _num(r.get(k)) for k in ("median_mb_per_s", "low_mb_per_s", "high_mb_per_s")}
            | {"state": r["state"]}
            | {k: r[k] for k in ("no_data_for", "ratio", "verdict") if k in r and r[k] == r[k]}
        )
    worst = [s for s in STATES if any(x["state"] == s for x in rows)]
    return json.dumps(
        dict(labels) | {"state": worst[-1] if worst else NO_DATA, "routes": rows}, indent=1
    )


def prometheus(table: pd.DataFrame, labels: Mapping[str, Any]) -> str:
    """The routes in Prometheus' text format (for node_exporter's textfile collector):
    each route's median rate, and a 1 for its state (one series per state)."""
    common = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    out = [
        "# HELP cloudbench_route_rate_mb_per_s Median rate of a route's best setting (MB/s).",
        "# TYPE cloudbench_route_rate_mb_per_s gauge",
    ]
    states = [
        "# HELP cloudbench_route_state 1 for the state a route is in (ok, below threshold, "
        "regressed, failed, no data).",
        "# TYPE cloudbench_route_state gauge",
    ]
    for r in table.to_dict("records"):
        route = ",".join(f'{k}="{_escape(r[k])}"' for k in ROUTE)
        sep = "," if common else ""
        rate = _num(r.get("median_mb_per_s"))
        if rate is not None:
            out.append(f"cloudbench_route_rate_mb_per_s{{{common}{sep}{route}}} {rate}")
        for s in STATES:
            states.append(
                f'cloudbench_route_state{{{common}{sep}{route},state="{s}"}} {int(r["state"] == s)}'
            )
    return "\n".join(out + states) + "\n"


def _escape(v: Any) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exit_code(states: Iterable[str]) -> int:
    """What a cron job acts on: 0 when every route is ok, 1 otherwise."""
    return 0 if all(s == OK for s in states) else 1
