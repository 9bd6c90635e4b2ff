"""The ``plots`` rule: every figure and HTML table of the report, from the aggregated tables.

The figures live in :mod:`cloudbench.figures` (matplotlib), the HTML tables in
:mod:`cloudbench.html_tables`; :func:`build_report` writes every file named in
:data:`cloudbench.report_outputs.REPORT_OUTPUTS` (the one list of the report's outputs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench import figures, html_tables, stats
from cloudbench.headline import headline_html


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
    transfers.tsv, timeseries.tsv, steps.tsv, missing.tsv and, if written, manifest.json)."""
    transfers = _read(tables / "transfers.tsv")
    series = _read(tables / "timeseries.tsv")
    steps = _read(tables / "steps.tsv")
    missing = _read(tables / "missing.tsv")
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
    figures.rate_vs_time(series, transfers, info, out["rate_vs_time"])
    figures.sustained(metrics, summary, info, out["rate_by_strategy"])
    figures.speedups(metrics, summary, info, out["speedup"])
    figures.rate_vs_distance(transfers, info, out["rate_vs_distance"])
    figures.step_breakdown(steps, transfers, out["steps"], info)
    html_tables.transfers_html(transfers, missing, out["table"])
    write_summary_tsv(summary, out["summary_tsv"])
    html_tables.summary_html(summary, metrics, out["summary_html"])
    html_tables.cost_html(transfers, summary, info, out["cost"])
    html_tables.campaign_html(info, manifest, transfers, out["campaign"])
    out["headline"].write_text(headline_html(metrics, summary, info, out["rate_by_strategy"]))
