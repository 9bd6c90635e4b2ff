"""A series: the same campaign run again and again (``occurrence:``, each run measured afresh
under ``results/<campaign>@<occurrence>``), read as one story per route.

For every route (site, remote, direction; :mod:`cloudbench.report.routes`) the series follows
one setting: the route's best in the **baseline**, the first ``baseline`` occurrences pooled
(their repeats together: 3 occurrences of 3 repeats give 9 rates, against which a later
occurrence's 3 show a change more surely than 3 against 3). Each later occurrence's
rates of that setting are set against the baseline's as compare sets two campaigns
(:func:`cloudbench.report.compare.compare`): the factor with its interval, and a
verdict, ``slower`` only when the rate fell by more than the margin, with the false
discovery rate of each occurrence's verdicts held at 5% (Benjamini-Hochberg over its routes).

A route's state is its latest occurrence's: ``no data`` (nothing measured that worked and
no failure of the route's own: not run, or the store did not answer), with how many
occurrences in a row it has had none; ``failed``; ``regressed`` (slower than the baseline);
``below threshold``; ``ok``. An occurrence in which the store was down is therefore a gap in
the series, never a regression.

Outputs (``<results>/<campaign>.series/``): series.tsv (route x occurrence), series.html
(the grid of the latest occurrence coloured by its change against the baseline, the table
of every occurrence and the figure), series.png, status.json and status.prom (for
monitoring), and an exit code: 0 when every route is ok.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign.identity import ROUTE
from cloudbench.report import compare, html_page, routes

SEPARATOR = "@"  # <campaign>@<occurrence>: a campaign name never holds it
BASELINE = 3  # occurrences pooled into the baseline by default
COLUMNS = (
    *ROUTE, "occurrence", *routes.SETTING, "n", "median_mb_per_s", "low_mb_per_s",
    "high_mb_per_s", "level", "failed", "outages", "ratio", "ratio_low", "ratio_high",
    "ratio_level", "verdict", "state",
)  # fmt: skip


@dataclass(frozen=True)
class Occurrence:
    label: str
    results: Path
    transfers: pd.DataFrame  # empty when the run left none (the store was down, say)


def occurrences(root: Path, series: str) -> list[Occurrence]:
    """Every occurrence of a series under ``root`` (results/), oldest first: by label, so
    labels must sort as time does (``$(date -u +%Y%m%dT%H%M)``)."""
    found = []
    for d in sorted(root.glob(f"{series}{SEPARATOR}*")):
        if not d.is_dir():
            continue
        table = d / "transfers.tsv"
        t = compare.read_transfers(table) if table.exists() else pd.DataFrame()
        found.append(Occurrence(d.name.split(SEPARATOR, 1)[1], d, t))
    return found


def series_table(
    found: list[Occurrence],
    baseline: int = BASELINE,
    margin: float = compare.MARGIN,
    thresholds: tuple[float | None, float | None] = (None, None),
) -> pd.DataFrame:
    """One row per route and occurrence (``COLUMNS``): the route's followed setting, its
    rate and interval in that occurrence, its factor against the baseline with a verdict,
    and its state then (module doc)."""
    if not found:
        return pd.DataFrame(columns=list(COLUMNS))
    base_occ = found[:baseline]
    pooled = pd.concat([o.transfers for o in base_occ if not o.transfers.empty] or [pd.DataFrame()])
    chosen = routes.routes(pooled, thresholds) if not pooled.empty else pd.DataFrame()
    all_routes = sorted(
        {tuple(r) for o in found if not o.transfers.empty for r in o.transfers[ROUTE].values}
    )
    follow = {
        tuple(r[k] for k in ROUTE): {k: r[k] for k in routes.SETTING}
        for r in chosen.to_dict("records")
        if isinstance(r.get("setting"), str)
    }
    rows = []
    for i, occ in enumerate(found):
        t = occ.transfers
        verdicts = _verdicts(pooled, t, follow, margin) if i >= baseline else {}
        measured = {  # one routes() per occurrence, each route read from its own rows
            tuple(r[k] for k in ROUTE): r
            for r in routes.routes(_followed(t, follow, others=True), thresholds).to_dict("records")
        }
        for key in all_routes:
            route = dict(zip(ROUTE, key, strict=True))
            row = measured.get(key) or (
                route | {"n": 0, "median_mb_per_s": math.nan, "failed": 0, "outages": 0}
                | {"state": routes.NO_DATA}
            )  # fmt: skip
            v = verdicts.get(key, {})
            state = row["state"]
            if state == routes.OK and v.get("verdict") == "slower":
                state = routes.REGRESSED
            rows.append(row | {"occurrence": occ.label, "state": state} | v)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _followed(t: pd.DataFrame, follow: dict[tuple, dict], *, others: bool) -> pd.DataFrame:
    """An occurrence's rows of each route's followed setting, and (``others``) every row of
    a route that follows none. One pass over the rows: a series reads every occurrence's
    routes, and a pandas filter per route and occurrence was most of its time."""
    if t.empty:
        return t
    names = list(ROUTE) + sorted({k for s in follow.values() for k in s})
    keep = []
    for values in zip(*(t[k] for k in names), strict=True):
        row = dict(zip(names, values, strict=True))
        setting = follow.get(tuple(row[k] for k in ROUTE))
        keep.append(others if setting is None else all(row[k] == v for k, v in setting.items()))
    return t[keep]


def _verdicts(
    pooled: pd.DataFrame, t: pd.DataFrame, follow: dict[tuple, dict], margin: float
) -> dict[tuple, dict[str, Any]]:
    """Each followed route's factor against the baseline in one occurrence, and its verdict
    (the occurrence's routes are one family for the false discovery rate)."""
    if t.empty or pooled.empty or not follow:
        return {}

    table = compare.compare(
        _followed(pooled, follow, others=False), _followed(t, follow, others=False), margin
    )
    out = {}
    for r in table.to_dict("records"):
        if r["verdict"] in ("only in A", "only in B"):
            continue
        out[tuple(r[k] for k in ROUTE)] = {
            "ratio": r["ratio"],
            "ratio_low": r["low"],
            "ratio_high": r["high"],
            "ratio_level": r["level"],
            "verdict": r["verdict"],
        }
    return out


def latest(table: pd.DataFrame) -> pd.DataFrame:
    """Each route's latest occurrence, with ``no_data_for``: how many occurrences in a row,
    up to the latest, had no data for it."""
    if table.empty:
        return table.assign(no_data_for=[])
    rows = []
    for _, g in table.groupby(ROUTE, sort=True):
        gap = 0
        for state in reversed(list(g["state"])):
            if state != routes.NO_DATA:
                break
            gap += 1
        rows.append(g.iloc[-1].to_dict() | {"no_data_for": gap})
    return pd.DataFrame(rows)


def _cell(r: dict[str, Any]) -> str:
    if r["state"] in (routes.NO_DATA, routes.FAILED):
        return r["state"]
    text = f"{r['median_mb_per_s']:.3g}"
    if isinstance(r.get("ratio"), float) and not math.isnan(r["ratio"]):
        text += f" ({r['ratio']:.2f}x)"
    return text


def series_html(table: pd.DataFrame, name: str, baseline: int, margin: float, png: str) -> str:
    """The series page: the latest state of every route as a grid, the route x occurrence
    table (each cell the median MB/s and its factor against the baseline, coloured by the
    verdict) and the figure."""
    last = latest(table)
    occ = list(dict.fromkeys(table["occurrence"]))
    bad = last[last["state"] != routes.OK]
    lines = [
        f"<li><b>{html.escape(' '.join(str(r[k]) for k in ROUTE))}</b>: {html.escape(r['state'])}"
        + (
            f" ({r['ratio']:.2f}x the baseline, [{r['ratio_low']:.2f}, {r['ratio_high']:.2f}])"
            if r["state"] == routes.REGRESSED
            else f" for {r['no_data_for']} occurrence(s)"
            if r["state"] == routes.NO_DATA
            else ""
        )
        + "</li>"
        for r in bad.to_dict("records")
    ]
    colour = {"slower": "bad", "faster": "good"}
    head = "".join(f"<th>{html.escape(o)}</th>" for o in occ)
    body = []
    for key, g in table.groupby(ROUTE, sort=True):
        cells = []
        for r in g.to_dict("records"):
            cls = (
                "none"
                if r["state"] in (routes.NO_DATA,)
                else "bad"
                if r["state"] == routes.FAILED
                else colour.get(r.get("verdict") if isinstance(r.get("verdict"), str) else "", "")
            )
            tip = f"{r.get('layout')} {r.get('setting')}, n={r['n']}"
            cells.append(
                f'<td class="{cls}" title="{html.escape(tip)}">{html.escape(_cell(r))}</td>'
            )
        label = html.escape(" ".join(str(k) for k in key))
        body.append(f"<tr><th>{label}</th>{''.join(cells)}</tr>")
    grid = routes.grid_html(last, (None, None))
    if len(occ) <= baseline:
        verdict = f"<p><b>{html.escape(baseline_only(len(occ), baseline))}</b>.</p>"
    else:
        verdict = "<p>Every route ok.</p>"
    if lines:
        verdict += f"<p><b>Not ok now</b>:</p><ul>{''.join(lines)}</ul>"
    body_html = (
        f"<p class='note'>{len(occ)} occurrences; baseline: the first {baseline} pooled; a change "
        f"is called only beyond {margin:.0%}, with at most 5% false discoveries per occurrence."
        "</p>"
        + verdict
        + grid
        + f'<div class="cb-grid"><table><thead><tr><th>route</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
        f'<p><img alt="rate over time per route" src="{html.escape(png)}"></p>'
    )
    return html_page.page(f"Series {name}", body_html)


def baseline_only(occurrences: int, baseline: int) -> str:
    """What a series whose every occurrence is in its baseline knows: the routes' rates,
    but no change (a later occurrence is compared with the pooled baseline; none is yet)."""
    return (
        f"baseline only ({occurrences} of {baseline} occurrences in the baseline): "
        "nothing compared yet"
    )


def series_png(table: pd.DataFrame, out: Path) -> None:
    """Each route's median over the occurrences with its interval; slower ones in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(table.groupby(ROUTE, sort=True).groups)
    fig, axes = plt.subplots(
        len(keys) or 1, 1, figsize=(8, 1.8 * max(len(keys), 1)), squeeze=False, sharex=True
    )
    occ = list(dict.fromkeys(table["occurrence"]))
    for ax, (key, g) in zip(axes[:, 0], table.groupby(ROUTE, sort=True), strict=False):
        x = [occ.index(o) for o in g["occurrence"]]
        y = g["median_mb_per_s"].astype(float)
        lo = (y - g["low_mb_per_s"].astype(float)).clip(lower=0).fillna(0)
        hi = (g["high_mb_per_s"].astype(float) - y).clip(lower=0).fillna(0)
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o-", color="#333", ms=3, lw=1)
        slow = g["verdict"] == "slower"
        ax.plot([xi for xi, s in zip(x, slow, strict=True) if s], y[slow], "o", color="red")
        ax.set_ylim(bottom=0)  # a change reads at its true size (98.6 -> 120 is not 5x)
        ax.set_ylabel("MB/s", fontsize=7)
        ax.set_title(" ".join(str(k) for k in key), fontsize=8, loc="left")
    axes[-1, 0].set_xticks(range(len(occ)), occ, rotation=45, fontsize=7, ha="right")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def write_series(
    root: Path, name: str, out: Path, baseline: int = BASELINE, margin: float = compare.MARGIN
) -> int:
    """Every output of a series (module doc); the exit code a cron job acts on."""
    found = occurrences(root, name)
    if not found:
        raise FileNotFoundError(
            f"no occurrence of series {name!r} under {root} (results/{name}{SEPARATOR}<occurrence>)"
        )
    out.mkdir(parents=True, exist_ok=True)
    table = series_table(found, baseline, margin)
    table.to_csv(out / "series.tsv", sep="\t", index=False)
    series_png(table, out / "series.png")
    (out / "series.html").write_text(series_html(table, name, baseline, margin, "series.png"))
    last = latest(table)
    labels = {"series": name, "occurrence": found[-1].label}
    # a monitor reading "ok" must also know whether anything was compared yet
    compared = {"baseline_only": len(found) <= baseline}
    (out / "status.json").write_text(routes.status_json(last, labels | compared))
    (out / "status.prom").write_text(routes.prometheus(last, labels))
    return routes.exit_code(last["state"])


def main(argv: list[str]) -> int:
    """``python -m cloudbench series <campaign>``: the series report and status (exit 0
    when every route is ok, 1 when one is not, 2 when there is no series to read)."""
    import argparse
    import sys

    p = argparse.ArgumentParser(
        prog="python -m cloudbench series",
        description="A series of campaigns (occurrence: ...): each route's rate over time, "
        "the real changes against the baseline, and a status for monitoring.",
    )
    p.add_argument("campaign", help="the campaign name the occurrences share")
    p.add_argument("--results", default="results", help="where the occurrences' results are")
    p.add_argument("--baseline", type=int, default=BASELINE, help="first occurrences pooled")
    p.add_argument("--margin", type=float, default=compare.MARGIN, help="smallest change called")
    p.add_argument("--out", help="default: <results>/<campaign>.series")
    a = p.parse_args(argv)
    root = Path(a.results)
    out = Path(a.out) if a.out else root / f"{a.campaign}.series"
    try:
        code = write_series(root, a.campaign, out, a.baseline, a.margin)
    except FileNotFoundError as err:
        print(f"cloudbench series: {err}", file=sys.stderr)
        return 2
    table = pd.read_csv(out / "series.tsv", sep="\t")
    for r in latest(table).to_dict("records"):
        if r["state"] != routes.OK:
            print(f"{' '.join(str(r[k]) for k in ROUTE)}: {r['state']}", file=sys.stderr)
    occ = table["occurrence"].nunique()
    said = "all ok" if code == 0 else "not all ok"
    if occ <= a.baseline:
        said = f"{said}; {baseline_only(occ, a.baseline)}"
    print(f"cloudbench series: {out / 'series.html'} ({said})")
    return code
