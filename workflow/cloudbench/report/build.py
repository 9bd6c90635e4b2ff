"""The ``plots`` rule: every figure and HTML table of the report, from the aggregated tables.

The figures live in :mod:`cloudbench.report.figures` (matplotlib), the HTML tables in
:mod:`cloudbench.report.tables`; :func:`build_report` writes every file named in
:data:`cloudbench.report.outputs.REPORT_OUTPUTS` (the one list of the report's outputs).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign import paths
from cloudbench.report import (
    burst,
    compare,
    drift,
    estimate,
    figures,
    latency,
    limits,
    routes,
    scaling,
    stats,
)
from cloudbench.report import scaling_section as scaling_report
from cloudbench.report import tables as html_tables
from cloudbench.report import tools_section as tools_report
from cloudbench.report.headline import headline_html


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


def build_report(
    tables: Path, info: Mapping[str, Any], out: Mapping[str, Path], jobs: int = 1
) -> None:
    """Every output of the ``plots`` rule from the campaign's tables (``tables`` holds
    transfers.tsv, timeseries.tsv, steps.tsv, missing.tsv and, if written, clients.tsv,
    probes.tsv and manifest.json); the figures are drawn by ``jobs`` processes while this one
    writes the HTML tables."""
    transfers, series, steps, missing = (
        _read(Path(paths.table(tables, name)))
        for name in ("transfers", "timeseries", "steps", "missing")
    )
    transfers, series = stats.with_setting(transfers), stats.with_setting(series)
    clients, probes, decided, tuned = (
        _read(Path(paths.table(tables, name)))
        if Path(paths.table(tables, name)).exists()
        else pd.DataFrame()
        for name in ("clients", "probes", "precision", "tuned")
    )
    man_path = Path(paths.campaign_manifest(tables))
    try:  # optional: the report does not wait for the campaign manifest
        manifest = json.loads(man_path.read_text())
    except (OSError, ValueError):
        manifest = None
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    metrics = (
        stats.transfer_metrics(transfers, series)
        if not transfers.empty
        else transfers.assign(
            sustained_mb_per_s=[], sustained_method=[], group_median=[], outlier=[]
        ).assign(**{c: [] for c in burst.COLUMNS})
    )
    summary = stats.summarise(transfers, series, metrics)
    trend = drift.drift_table(transfers)
    with _drawers(jobs) as drawers:
        drawn = [  # slowest first, so the last one to start is a short one
            drawers.submit(
                figures.rate_vs_time,
                by_variant(series),
                by_variant(transfers),
                info,
                out["rate_vs_time"],
            ),
            drawers.submit(figures.step_breakdown, steps, transfers, out["steps"], info),
            drawers.submit(
                figures.sustained,
                by_variant(metrics),
                by_variant(summary),
                info,
                out["rate_by_strategy"],
            ),
            drawers.submit(figures.whole_rates, by_variant(metrics), info, out["rate_whole"]),
            drawers.submit(figures.speedups, metrics, summary, info, out["speedup"]),
            drawers.submit(figures.rate_vs_distance, transfers, info, out["rate_vs_distance"]),
            drawers.submit(drift.rate_vs_start_png, transfers, trend, out["rate_vs_start"]),
            drawers.submit(scaling_report.scaling_png, transfers, out["scaling"]),
            drawers.submit(tools_report.tools_png, transfers, out["tools"]),
            drawers.submit(tools_report.latency_png, transfers, probes, out["latency"]),
        ]
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
        write_tsv(
            latency.pair_rtt(probes) if not probes.empty else pd.DataFrame(), out["latency_tsv"]
        )
        for figure in drawn:
            figure.result()  # a figure that failed fails the report, with its traceback
    thresholds = tuple((info.get("thresholds") or {}).get(k) for k in ("good", "poor"))
    route_table = routes.routes(transfers, thresholds)
    labels = {"campaign": info.get("campaign", "")}
    out["routes_json"].write_text(routes.status_json(route_table, labels))
    out["routes_prom"].write_text(routes.prometheus(route_table, labels))
    # the headline embeds the whole-transfer rate figure: written once that is drawn
    out["headline"].write_text(
        headline_html(
            metrics,
            summary,
            info,
            out["rate_whole"],
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
