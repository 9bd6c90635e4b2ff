"""Two campaigns side by side: for every measurement both made, is the second faster, slower,
or not clearly different?

A centre measures a store before and after an upgrade, or one store against another. For each
measurement identity (site, remote, direction, tool, layout, setting) present in both, the
factor between the campaigns is the ratio of their median rates, with the exact Mann-Whitney
interval of the factor (:func:`cloudbench.intervals.ratio_interval`) and its coverage.
The verdict follows the interval alone: ``slower`` when it lies below 1, ``faster`` above 1,
``no clear change`` when it holds 1, and ``too few repeats`` without one. Regressions come
first. Identities measured in one campaign only are listed, never dropped.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from cloudbench.report import latency
from cloudbench.intervals import level_text, ratio_interval

# a measurement's identity as the report's tables have it (one list, in latency), less the
# strategy, which the layout already names
IDENTITY = [k for k in latency.IDENTITY if k != "strategy"]
COLUMNS = [
    *IDENTITY, "n_a", "n_b", "median_a", "median_b", "ratio", "low", "high", "level", "verdict",
]  # fmt: skip
ORDER = {"slower": 0, "faster": 1, "no clear change": 2, "too few repeats": 3}


def read_transfers(results: Path) -> pd.DataFrame:
    """A campaign's transfers.tsv (``results`` is its results directory or the file)."""
    path = results / "transfers.tsv" if results.is_dir() else results
    if not path.exists():
        raise FileNotFoundError(f"{path}: no transfers.tsv (run the campaign's report first)")
    t = pd.read_csv(path, sep="\t")
    if "tool" not in t:
        t = t.assign(tool="rclone")
    return t


def verdict(low: float, high: float) -> str:
    if math.isnan(low):
        return "too few repeats"
    if high < 1:
        return "slower"
    if low > 1:
        return "faster"
    return "no clear change"


def compare(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per identity in either campaign (``COLUMNS``): the factor of B over A with
    its interval, coverage and verdict; an identity in one campaign only has verdict
    ``only in A`` or ``only in B``."""
    keys = [k for k in IDENTITY if k in a.columns and k in b.columns]

    def ok(t: pd.DataFrame) -> dict[tuple, list[float]]:
        good = t[(t["status"] == "ok") & t["mb_per_s"].notna()]
        rates = {k: list(g["mb_per_s"]) for k, g in good.groupby(keys, sort=False)}
        return rates | {k: [] for k in t.groupby(keys, sort=False).groups if k not in rates}

    in_a, in_b = ok(a), ok(b)
    rows = []
    for key in [*in_a, *(k for k in in_b if k not in in_a)]:
        ident = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        ra, rb = in_a.get(key), in_b.get(key)
        if ra is None or rb is None:
            rows.append(ident | {"verdict": "only in B" if ra is None else "only in A"})
            continue
        r = ratio_interval(rb, ra)
        rows.append(
            ident
            | {"n_a": len(ra), "n_b": len(rb)}
            | {"median_a": pd.Series(ra).median() if ra else math.nan}
            | {"median_b": pd.Series(rb).median() if rb else math.nan}
            | {"ratio": r.ratio, "low": r.low, "high": r.high, "level": r.level}
            | {"verdict": verdict(r.low, r.high)}
        )
    out = pd.DataFrame(rows, columns=[*keys, *COLUMNS[len(IDENTITY) :]])
    rank = out["verdict"].map(ORDER).fillna(len(ORDER))
    return (
        out.assign(_rank=rank)
        .sort_values(["_rank", "ratio"], kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )


def lines(table: pd.DataFrame, a: str, b: str) -> list[str]:
    """The comparison as text, regressions first: one line per identity."""
    out = [f"{b} against {a} (factor = median rate of {b} / of {a}):"]
    for r in table.itertuples(index=False):
        ident = " ".join(str(getattr(r, k)) for k in IDENTITY if hasattr(r, k))
        if r.verdict.startswith("only in"):
            out.append(f"  {ident}: {r.verdict}")
            continue
        interval = (
            f" [{r.low:.2f}, {r.high:.2f}] {level_text(r.level)}" if not math.isnan(r.low) else ""
        )
        out.append(
            f"  {ident}: {r.verdict}, x{r.ratio:.2f}{interval} "
            f"({r.median_a:.3g} -> {r.median_b:.3g} MB/s, n={r.n_a}/{r.n_b})"
        )
    return out


def counts_text(table: pd.DataFrame) -> str:
    """How many measurements are slower, faster, not clearly changed (for the front page)."""
    counts = table["verdict"].value_counts()
    return ", ".join(f"{counts[v]} {v}" for v in [*ORDER, "only in A", "only in B"] if v in counts)


def write_outputs(table: pd.DataFrame, a: str, b: str, tsv: Path, page_path: Path) -> None:
    """compare.tsv and the Comparison page (regressions first, flagged)."""
    from cloudbench.report.tables import html_table, page

    tsv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(tsv, sep="\t", index=False, na_rep="")
    head = html.escape(lines(table, a, b)[0])
    body = f"<p>{head} {html.escape(counts_text(table))}.</p>"
    flag = table["verdict"] == "slower"
    page_path.write_text(page("Comparison", body + html_table(table, flag=flag)))


def nothing_to_compare(tsv: Path, page_path: Path) -> None:
    """The Comparison outputs of a campaign that names no ``compare_with``."""
    from cloudbench.report.tables import html_table, page

    empty = pd.DataFrame(columns=COLUMNS)
    empty.to_csv(tsv, sep="\t", index=False)
    page_path.write_text(
        page(
            "Comparison",
            "<p>No campaign to compare with: name one with <code>compare_with:</code> (its "
            "results directory, e.g. <code>results/&lt;earlier campaign&gt;</code>) in the "
            "campaign file, or run <code>python -m cloudbench compare A B</code>. For every "
            "measurement both campaigns made, the table would give the factor of this "
            "campaign's median rate over the other's with its exact interval and coverage, "
            "and a verdict (slower, faster, no clear change), regressions first:</p>"
            + html_table(empty),
        )
    )
