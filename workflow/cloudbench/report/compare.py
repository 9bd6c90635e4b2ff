"""Two campaigns side by side: for every measurement both made, is the second faster, slower,
or not clearly different?

A centre measures a store before and after an upgrade, or one store against another. For each
measurement identity (site, remote, direction, tool, layout, setting) present in both, the
factor between the campaigns is the ratio of their median rates, with the exact Mann-Whitney
interval of the factor (:func:`cloudbench.intervals.ratio_interval`) and its coverage.

A verdict is a claim a centre acts on, so it is held to two things (docs/method.md):
a practical margin (``MARGIN``, the campaign's ``compare_margin``): ``slower`` means the rate
fell by more than the margin, not merely below 1, since a store moves a few percent from week
to week; and many comparisons at once: the ``slower`` verdicts of one comparison are
discoveries with the false discovery rate held at ``FALSE_DISCOVERY_RATE`` (Benjamini-Hochberg
on exact one-sided Mann-Whitney tests, :func:`cloudbench.intervals.shifted_rank_p`), and the
``faster`` ones likewise. So when nothing changed by more than the margin, at most 5% of
comparisons show any regression, whatever their number of measurements. Below 3 repeats there
is no verdict (``too few repeats``); with few repeats and many measurements a change may be
unprovable (the smallest p of 3 against 3 repeats is 0.05), which the page says. Regressions
come first. Identities measured in one campaign only are listed, never dropped.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from cloudbench.campaign.identity import keys_without
from cloudbench.intervals import (
    benjamini_hochberg,
    level_text,
    ratio_interval,
    shifted_rank_p,
    smallest_p,
)
from cloudbench.report.html_page import html_table, page

# a measurement's identity less its repeat (campaign.identity) and the strategy, which the
# layout already names
IDENTITY = keys_without("strategy", "repeat")
COLUMNS = [
    *IDENTITY, "n_a", "n_b", "median_a", "median_b", "ratio", "low", "high", "level",
    "p_slower", "p_faster", "verdict",
]  # fmt: skip
MARGIN = 0.05  # a change smaller than this is no verdict: compare_margin's default (schema)
FALSE_DISCOVERY_RATE = 0.05  # of the slower (and of the faster) verdicts of one comparison
DIGITS = 4  # significant digits of a rate, a factor or a p in compare.tsv
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


def verdicts(p_slower: list[float], p_faster: list[float], rate: float) -> list[str]:
    """Each measurement's verdict from its two one-sided p-values, the slower and the faster
    ones each a family held at the false discovery rate ``rate``."""
    slower = benjamini_hochberg(p_slower, rate)
    faster = benjamini_hochberg(p_faster, rate)
    return [
        "too few repeats"
        if math.isnan(ps)
        else "slower"
        if down
        else "faster"
        if up
        else "no clear change"
        for ps, down, up in zip(p_slower, slower, faster, strict=True)
    ]


def _significant(x: float) -> float:
    return float(f"{x:.{DIGITS}g}") if isinstance(x, float) and math.isfinite(x) else x


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame,
    margin: float = MARGIN,
    rate: float = FALSE_DISCOVERY_RATE,
) -> pd.DataFrame:
    """One row per identity in either campaign (``COLUMNS``): the factor of B over A with
    its interval and coverage, the p-values of "slower by more than ``margin``" and "faster
    by more than ``margin``", and the verdict; an identity in one campaign only has verdict
    ``only in A`` or ``only in B``. ``attrs`` keeps the margin and the rate for the page."""
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
            | {"p_slower": shifted_rank_p(rb, ra, 1 - margin, below=True)}
            | {"p_faster": shifted_rank_p(rb, ra, 1 + margin, below=False)}
        )
    out = pd.DataFrame(rows, columns=[*keys, *COLUMNS[len(IDENTITY) :]])
    out["verdict"] = out["verdict"].astype(object)
    both = out["verdict"].isna()
    out.loc[both, "verdict"] = verdicts(
        list(out.loc[both, "p_slower"]), list(out.loc[both, "p_faster"]), rate
    )
    for col in ("median_a", "median_b", "ratio", "low", "high", "level", "p_slower", "p_faster"):
        out[col] = out[col].map(_significant)
    out = out.astype({"n_a": "Int64", "n_b": "Int64"})
    rank = out["verdict"].map(ORDER).fillna(len(ORDER))
    out = (
        out.assign(_rank=rank)
        .sort_values(["_rank", "ratio"], kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )
    out.attrs.update(margin=margin, rate=rate)
    return out


def meaning(table: pd.DataFrame) -> str:
    """What a verdict means, in one paragraph of the page: the margin, the control of many
    comparisons, and how many repeats a change needs to be shown at all."""
    margin = table.attrs.get("margin", MARGIN)
    rate = table.attrs.get("rate", FALSE_DISCOVERY_RATE)
    tested = table[table["p_slower"].notna()]
    if tested.empty:
        return (
            "no verdicts: no measurement has 3 ok repeats in both campaigns (slower or faster "
            f"would mean a change of more than {margin:.0%}, the margin)"
        )
    text = (
        f"slower (faster) means the median rate fell (rose) by more than {margin:.0%} (the "
        "margin: compare_margin in the campaign file, --margin of cloudbench compare): the "
        "exact Mann-Whitney test of a change beyond that "
        f"margin is a discovery with the false discovery rate held at {rate:.0%} over the "
        f"{len(tested)} measurements compared (Benjamini-Hochberg), so when nothing changed "
        f"by more than the margin, a comparison shows a regression at most {rate:.0%} of the "
        "time; the interval is the factor's, at its stated coverage."
    )
    if len(tested):
        n = int(min(tested["n_a"].min(), tested["n_b"].min()))
        if smallest_p(n, n) > rate / len(tested):
            text += (
                f" With {n} repeats against {n}, a change in a single measurement cannot be "
                f"shown among {len(tested)} (its smallest p is {smallest_p(n, n):.3g}); "
                "only one shared by many can: measure more repeats to see single changes."
            )
    return text


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
    return [*out, f"({meaning(table)})"]


def counts_text(table: pd.DataFrame) -> str:
    """How many measurements are slower, faster, not clearly changed (for the front page)."""
    counts = table["verdict"].value_counts()
    return ", ".join(f"{counts[v]} {v}" for v in [*ORDER, "only in A", "only in B"] if v in counts)


def write_outputs(table: pd.DataFrame, a: str, b: str, tsv: Path, page_path: Path) -> None:
    """compare.tsv and the Comparison page (regressions first, flagged)."""
    tsv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(tsv, sep="\t", index=False, na_rep="")
    head = html.escape(lines(table, a, b)[0])
    body = f"<p>{head} {html.escape(counts_text(table))}.</p><p>{html.escape(meaning(table))}</p>"
    flag = table["verdict"] == "slower"
    page_path.write_text(page("Comparison", body + html_table(table, flag=flag)))


def nothing_to_compare(tsv: Path, page_path: Path) -> None:
    """The Comparison outputs of a campaign that names no ``compare_with``."""
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
