"""The report's plain HTML: one page shell and one table builder, shared by every HTML table
(tables, compare, tools, scaling), so that they all look and align alike and none of them
imports another section to get them."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from cloudbench.report.labels import NA

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


def page(title: str, body: str) -> str:
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


def html_table(
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
