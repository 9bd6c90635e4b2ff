"""The report's figures and HTML tables, from the aggregated tables: :func:`build_report` for
the ``aggregate`` rule (HTML tables and the front page's text: no plotting library is
imported), :func:`draw_figures` for the ``figures`` rule (every figure, and the front page
with its figure).

The figures live in :mod:`cloudbench.report.figures` (matplotlib), the HTML tables in
:mod:`cloudbench.report.tables`; which file is whose is :mod:`cloudbench.report.outputs` (the one
list of the report's outputs).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign import paths
from cloudbench.report import (
    burst,
    compare,
    drift,
    estimate,
    latency,
    limits,
    routes,
    scaling,
    stats,
)
from cloudbench.report import scaling_section as scaling_report
from cloudbench.report import tables as html_tables
from cloudbench.report import tools_section as tools_report
from cloudbench.report.headline import front_page, headline_html


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, sep="\t")
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def by_variant(df: pd.DataFrame) -> pd.DataFrame:
    """For the figures that colour by layout: a campaign that sweeps settings shows each
    layout and setting as its own series (``plain rclone-4x32``), not one pooled column."""
    if df.empty or "setting" not in df or df["setting"].nunique() < 2:
        return df
    return df.assign(layout=df["layout"] + " " + df["setting"])


def write_tsv(table: pd.DataFrame, path: Path) -> None:
    """A table of the report as the page shows it, unrounded but for float noise, so users
    can post-process what they read."""
    out = table.copy()
    floats = out.select_dtypes("float").columns
    out[floats] = out[floats].round(4)
    for col in floats:  # whole numbers (a knee of 2 clients) without a ".0"
        values = out[col].dropna()
        if len(values) and (values == values.round()).all():
            out[col] = out[col].astype("Int64")
    out.to_csv(path, sep="\t", index=False, na_rep="")


class _InProcess(Executor):
    """``jobs=1``: every figure drawn here, in order, as submitted."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def drawing_processes(asked: int, cores: int, load: float) -> int:
    """How many processes draw the figures: up to ``asked`` (the job's threads), but no more
    than the ``cores`` the 1-minute ``load`` average leaves idle, and at least one.

    Forked drawers pay for themselves only on idle cores: on a busy machine (a login node's
    other users, the campaign's other jobs) they wait for the same cores as this process and
    cost about a fifth more CPU time than drawing here (fork, pool start, copied pages; 8.1
    against 6.9 CPU-seconds for a small campaign's nine figures)."""
    return max(1, min(asked, math.floor(cores - load)))


def spare_cores() -> tuple[int, float]:
    """(usable cores, 1-minute load average) of this machine, for drawing_processes; the
    load reads as 0 where the system does not say."""
    from cloudbench.processes import usable_cores

    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average here
        load = 0.0
    return usable_cores(), load


@contextmanager
def _drawers(jobs: int) -> Iterator[Executor]:
    """Where the figures are drawn: ``jobs`` forked processes (matplotlib already imported,
    so they start at once), or this process alone. Rendering is most of the report's time,
    and the figures do not depend on each other."""
    if jobs <= 1:
        yield _InProcess()
        return
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool


@dataclass(frozen=True)
class Measured:
    """What both report rules read from the campaign's tables: the transfers and their time
    series (each setting a variant of its own), the steps, the probes, and what the
    statistics make of them."""

    transfers: pd.DataFrame
    series: pd.DataFrame
    steps: pd.DataFrame
    probes: pd.DataFrame
    metrics: pd.DataFrame
    summary: pd.DataFrame
    trend: pd.DataFrame

    @classmethod
    def read(cls, tables: Path) -> Measured:
        """From ``tables`` (the directory of transfers.tsv, timeseries.tsv, steps.tsv and,
        if written, probes.tsv)."""
        transfers, series, steps = (
            _read(Path(paths.table(tables, name))) for name in ("transfers", "timeseries", "steps")
        )
        transfers, series = stats.with_setting(transfers), stats.with_setting(series)
        probes = _optional(tables, "probes")
        metrics = (
            stats.transfer_metrics(transfers, series)
            if not transfers.empty
            else transfers.assign(
                sustained_mb_per_s=[], sustained_method=[], group_median=[], outlier=[]
            ).assign(**{c: [] for c in burst.COLUMNS})
        )
        summary = stats.summarise(transfers, series, metrics)
        trend = drift.drift_table(transfers)
        return cls(transfers, series, steps, probes, metrics, summary, trend)


def _optional(tables: Path, name: str) -> pd.DataFrame:
    path = Path(paths.table(tables, name))
    return _read(path) if path.exists() else pd.DataFrame()


def draw_figures(
    tables: Path, info: Mapping[str, Any], out: Mapping[str, Path], headline: Path, jobs: int = 1
) -> None:
    """Every figure of the ``figures`` rule (outputs.FIGURES) from the campaign's tables, by
    ``jobs`` processes; the figures do not depend on each other. Then the front page:
    ``headline`` (aggregate's) with its figure (rate_whole)."""
    from cloudbench.report import figures  # matplotlib: only this rule draws

    m = Measured.read(tables)
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    with _drawers(jobs) as drawers:
        drawn = [  # slowest first, so the last one to start is a short one
            drawers.submit(
                figures.rate_vs_time,
                by_variant(m.series),
                by_variant(m.transfers),
                info,
                out["rate_vs_time"],
            ),
            drawers.submit(figures.step_breakdown, m.steps, m.transfers, out["steps"], info),
            drawers.submit(
                figures.sustained,
                by_variant(m.metrics),
                by_variant(m.summary),
                info,
                out["rate_by_strategy"],
            ),
            drawers.submit(figures.speedups, m.metrics, m.summary, info, out["speedup"]),
            drawers.submit(figures.rate_vs_distance, m.transfers, info, out["rate_vs_distance"]),
            drawers.submit(drift.rate_vs_start_png, m.transfers, m.trend, out["rate_vs_start"]),
            drawers.submit(scaling_report.scaling_png, m.transfers, out["scaling"]),
            drawers.submit(tools_report.tools_png, m.transfers, out["tools"]),
            drawers.submit(tools_report.latency_png, m.transfers, m.probes, out["latency"]),
            drawers.submit(figures.whole_rates, by_variant(m.metrics), info, out["rate_whole"]),
        ]
        for figure in drawn:
            figure.result()  # a figure that failed fails the job, with its traceback
    out["front_page"].write_text(front_page(headline.read_text(), out["rate_whole"]))


def build_report(tables: Path, info: Mapping[str, Any], out: Mapping[str, Path]) -> None:
    """Every output of the ``aggregate`` rule but its tables (outputs.AGGREGATE_OUTPUTS) from
    the campaign's tables (``tables`` holds transfers.tsv, timeseries.tsv, steps.tsv,
    missing.tsv and, if written, clients.tsv, probes.tsv and manifest.json): the HTML tables
    and the front page's text, with a place for its figure (drawn by draw_figures)."""
    m = Measured.read(tables)
    transfers, series, probes, metrics, summary, trend = (
        m.transfers, m.series, m.probes, m.metrics, m.summary, m.trend
    )  # fmt: skip
    missing = _read(Path(paths.table(tables, "missing")))
    clients, decided, tuned = (_optional(tables, n) for n in ("clients", "precision", "tuned"))
    man_path = Path(paths.campaign_manifest(tables))
    try:  # optional: the report does not wait for the campaign manifest
        manifest = json.loads(man_path.read_text())
    except (OSError, ValueError):
        manifest = None
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    html_tables.transfers_html(transfers, missing, out["table"])
    write_tsv(summary, out["summary_tsv"])
    html_tables.summary_html(summary, metrics, out["summary_html"])
    html_tables.cost_html(transfers, summary, info, out["cost"])
    html_tables.campaign_html(info, manifest, transfers, out["campaign"])
    scaling_report.scaling_html(transfers, clients, out["scaling_html"], info)
    tools_report.tools_html(transfers, out["tools_html"], info)
    tools_report.latency_html(transfers, probes, out["latency_html"])
    comparison = _comparison(transfers, info, out)
    html_tables.precision_html(decided, info, out["precision_html"], transfers)
    write_tsv(scaling.scaling_table(transfers), out["scaling_tsv"])
    write_tsv(trend, out["drift_tsv"])
    limit_table = limits.routes_table(transfers, limits.OwnCaps.of(info))
    write_tsv(limit_table, out["limits_tsv"])
    write_tsv(latency.tool_strategy_rates(tools_report.with_tool(transfers)), out["tools_tsv"])
    write_tsv(latency.pair_rtt(probes) if not probes.empty else pd.DataFrame(), out["latency_tsv"])
    thresholds = tuple((info.get("thresholds") or {}).get(k) for k in ("good", "poor"))
    route_table = routes.routes(transfers, thresholds)
    labels = {"campaign": info.get("campaign", "")}
    out["routes_json"].write_text(routes.status_json(route_table, labels))
    out["routes_prom"].write_text(routes.prometheus(route_table, labels))
    out["headline"].write_text(
        headline_html(
            metrics,
            summary,
            info,
            None,  # the figure: draw_figures puts it in (front_page)
            drift.drift_sentences(trend),
            comparison,
            decided,
            tuned,
            route_table,
            limits=limits.limits_block(transfers, limits.OwnCaps.of(info)),
            estimate=estimate.report_block(metrics, series, route_table, tuned, limit_table, info),
            limited_by={
                (str(r["site"]), str(r["remote"]), str(r["direction"])): str(r["limit"])
                for r in limit_table.to_dict("records")
            },
        )
    )


def _comparison(
    transfers: pd.DataFrame, info: Mapping[str, Any], out: Mapping[str, Path]
) -> pd.DataFrame | None:
    """The Comparison section against the campaign named by ``compare_with`` (its table, for
    the front page), or a page that says how to ask for one (None)."""
    other = info.get("compare_with")
    if not other:
        compare.nothing_to_compare(out["compare_tsv"], out["compare_html"])
        return None
    margin = other.get("margin", compare.MARGIN)  # a report info from before the key
    table = compare.compare(compare.read_transfers(Path(other["transfers"])), transfers, margin)
    here = str(info.get("campaign", "this campaign"))
    compare.write_outputs(table, other["name"], here, out["compare_tsv"], out["compare_html"])
    table.attrs["against"] = other["name"]
    return table
