"""Two campaigns side by side: for every measurement both made, is the second faster, slower,
or not clearly different?

A centre measures a store before and after an upgrade, or one store against another. For each
measurement identity (site, remote, direction, tool, layout, setting) present in both, the
factor between the campaigns is the ratio of their geometric-mean rates, with an interval and
the level it holds at.

A verdict is a claim a centre acts on, so it is held to two things (docs/method.md):
a practical margin (``MARGIN``, the campaign's ``compare_margin``): ``slower`` means the rate
fell by more than the margin, not merely below 1, since a store moves a few percent from week
to week; and many comparisons at once: when nothing moved by more than the margin, at most
``FALSE_DISCOVERY_RATE`` of comparisons flag anything, slower or faster, however many
measurements they hold (Benjamini-Hochberg, 4 parts of it spent on slower, 1 on faster: a
regression is what a centre acts on).

Why a moderated t-test (:mod:`cloudbench.report.moderated`) and not a test per measurement:
the exact rank test of each measurement on its own, which this module used before, has a
smallest p of 1/924 at 6 repeats against 6, and a correction over 24 measurements rarely
lets that through: one route's 25% drop (10% noise) was found in 24% of campaign pairs, and
a row could read an interval excluding 1 beside "no clear change". The measurements of one
store share their noise; the moderated t borrows it (a prior for each measurement's variance
from all of them, as limma does for genes), so the same drop is found in about 85% of pairs,
while pairs that differ only by noise flag anything in about 1% (up to 4% when routes' noise
differs, 5% on some and 20% on others; a route whose noise is far from the others' keeps its
own), and a stalled repeat is set aside rather than read as a regression
(tests/test_compare_levels.py holds these figures).

Each row's interval is at the level its verdict used (Benjamini-Hochberg's, adjusted for the
measurements compared), so ``slower`` is exactly an interval wholly below ``1 - margin``;
"no clear change" beside an interval excluding 1 is a change smaller than the margin. Below
3 ok repeats on either side there is no verdict (``too few repeats``). Regressions come
first. Identities measured in one campaign only are listed, never dropped.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
import pandas as pd

from cloudbench.campaign.identity import keys_without
from cloudbench.intervals import level_text
from cloudbench.report import moderated
from cloudbench.report.html_page import html_table, page

# a measurement's identity less its repeat (campaign.identity) and the strategy, which the
# layout already names
IDENTITY = keys_without("strategy", "repeat")
COLUMNS = [
    *IDENTITY, "n_a", "n_b", "set_aside", "median_a", "median_b", "ratio", "low", "high", "level",
    "p_slower", "p_faster", "own_noise", "verdict",
]  # fmt: skip
MARGIN = 0.05  # a change smaller than this is no verdict: compare_margin's default (schema)
FALSE_DISCOVERY_RATE = 0.05  # of the slower and faster verdicts of one comparison, together
DIGITS = 4  # significant digits of a rate, a factor or a p in compare.tsv
FEW_REPEATS = 6  # below this, the page says a lone change needs a large one to be found
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


def _significant(x: float) -> float:
    return float(f"{x:.{DIGITS}g}") if isinstance(x, float) and math.isfinite(x) else x


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame,
    margin: float = MARGIN,
    rate: float = FALSE_DISCOVERY_RATE,
) -> pd.DataFrame:
    """One row per identity in either campaign (``COLUMNS``): the factor of B over A with
    its interval and the level it holds at, the repeats set aside, the p-values of "slower
    by more than ``margin``" and "faster by more than ``margin``", and the verdict; an
    identity in one campaign only has verdict ``only in A`` or ``only in B``. ``attrs``
    keeps the margin, the rate and the shared noise for the page."""
    keys = [k for k in IDENTITY if k in a.columns and k in b.columns]

    def ok(t: pd.DataFrame) -> dict[tuple, list[float]]:
        good = t[(t["status"] == "ok") & t["mb_per_s"].notna()]
        rates = {k: list(g["mb_per_s"]) for k, g in good.groupby(keys, sort=False)}
        return rates | {k: [] for k in t.groupby(keys, sort=False).groups if k not in rates}

    in_a, in_b = ok(a), ok(b)
    rows, both = [], []
    for key in [*in_a, *(k for k in in_b if k not in in_a)]:
        ident = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        ra, rb = in_a.get(key), in_b.get(key)
        if ra is None or rb is None:
            rows.append(ident | {"verdict": "only in B" if ra is None else "only in A"})
            continue
        both.append((len(rows), ra, rb))
        rows.append(
            ident
            | {"n_a": len(ra), "n_b": len(rb)}
            | {"median_a": pd.Series(ra).median() if ra else math.nan}
            | {"median_b": pd.Series(rb).median() if rb else math.nan}
        )
    result = None
    if both:
        result = moderated.moderated(
            moderated.padded([ra for _, ra, _ in both]),
            moderated.padded([rb for _, _, rb in both]),
            margin,
            rate,
        )
        for j, (i, _, _) in enumerate(both):
            rows[i] |= _row(result, j)
    out = pd.DataFrame(rows, columns=[*keys, *COLUMNS[len(IDENTITY) :]])
    out["verdict"] = out["verdict"].astype(object)
    for col in ("median_a", "median_b", "ratio", "low", "high", "level", "p_slower", "p_faster"):
        out[col] = out[col].map(_significant)
    out = out.astype({"n_a": "Int64", "n_b": "Int64", "set_aside": "Int64"})
    rank = out["verdict"].map(ORDER).fillna(len(ORDER))
    out = (
        out.assign(_rank=rank)
        .sort_values(["_rank", "ratio"], kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )
    out.attrs.update(margin=margin, rate=rate)
    if result is not None:  # the shared noise, for the page
        out.attrs.update(
            prior_df=float(result.prior_df),
            prior_sd=float(result.prior_sd),
            own_noise=int(result.own_noise.sum()),
        )
    return out


def _row(m: moderated.Moderated, j: int) -> dict:
    """Measurement ``j``'s columns of a moderated comparison, with its verdict."""
    if np.isnan(m.p_slower[j]):
        return {
            "set_aside": int(m.set_aside[j]),
            "ratio": float(m.ratio[j]),
            "verdict": "too few repeats",
        }
    verdict = "slower" if m.slower[j] else "faster" if m.faster[j] else "no clear change"
    return {
        "set_aside": int(m.set_aside[j]),
        "ratio": float(m.ratio[j]),
        "low": float(m.low[j]),
        "high": float(m.high[j]),
        "level": float(m.level),
        "p_slower": float(m.p_slower[j]),
        "p_faster": float(m.p_faster[j]),
        "own_noise": bool(m.own_noise[j]),
        "verdict": verdict,
    }


def method(table: pd.DataFrame) -> str:
    """The method in one sentence a reader understands (the page's and the command's)."""
    tested = int(table["p_slower"].notna().sum()) if "p_slower" in table else 0
    rate = table.attrs.get("rate", FALSE_DISCOVERY_RATE)
    noise = (
        f"borrows the noise all {tested} measurements share (a moderated t, as genomics uses "
        "for few repeats of many genes)"
        if tested >= moderated.MIN_FOR_PRIOR
        else "uses each measurement's own noise (too few measurements to share it)"
    )
    return (
        f"Method: each measurement's change is tested against the margin by a t-test that "
        f"{noise}, with stalled repeats set aside, and the verdicts are held so that a "
        f"comparison in which nothing changed flags anything at most {rate:.0%} of the time."
    )


def meaning(table: pd.DataFrame) -> str:
    """What a verdict means, in one paragraph of the page: the method, the margin, the control
    of many comparisons, and what the printed interval's level is."""
    margin = table.attrs.get("margin", MARGIN)
    rate = table.attrs.get("rate", FALSE_DISCOVERY_RATE)
    tested = table[table["p_slower"].notna()]
    if tested.empty:
        return (
            "no verdicts: no measurement has 3 ok repeats in both campaigns (slower or faster "
            f"would mean a change of more than {margin:.0%}, the margin)"
        )
    level = float(tested["level"].iloc[0])
    noise = table.attrs.get("prior_sd", math.nan)
    shared = table.attrs.get("prior_df", math.nan)
    weight = (
        "each measurement's own: too few measurements to share it"
        if len(tested) < moderated.MIN_FOR_PRIOR
        else "as if every measurement had many more repeats"
        if math.isinf(shared)
        else f"worth about {shared:.0f} extra repeats to each measurement"
        if shared >= 1
        else "little: their noise differs"
    )
    text = (
        f"{method(table)} slower (faster) means the rate fell (rose) by more than {margin:.0%} "
        "(the margin: compare_margin in the campaign file, --margin of cloudbench compare); "
        "the factor is B's geometric-mean rate over A's. The noise the measurements share is "
        f"{math.expm1(noise):.1%} of a rate ({weight}){_own(table)}; a repeat more than "
        f"{moderated.SET_ASIDE_SPREADS:g} such spreads and x{moderated.SET_ASIDE_FACTOR:g} from "
        "its measurement's median is set aside as a stall (set_aside). Over the "
        f"{len(tested)} measurements compared, the verdicts have their false discovery rate "
        f"held at {rate:.0%} (Benjamini-Hochberg; {moderated.SLOWER_SHARE:.0%} of it for "
        "slower, the rest for faster). Every interval is at the level the verdicts used, "
        f"{level_text(level)} "
        f"(adjusted for the {len(tested)} measurements), so a row is slower exactly when its "
        f"interval lies wholly below {1 - margin:.2f}, faster when wholly above "
        f"{1 + margin:.2f}; no clear change beside an interval excluding 1 is a change "
        "smaller than the margin."
    )
    n = int(min(tested["n_a"].min(), tested["n_b"].min()))
    if n < FEW_REPEATS and len(tested) > 1:
        text += (
            f" With {n} repeats only a large change of one measurement among {len(tested)} is "
            "found (a 25% drop at 10% noise: 4 times in 10 at 3 repeats, 8 in 10 at 6): "
            f"measure {FEW_REPEATS} repeats where a comparison matters."
        )
    return text


def _own(table: pd.DataFrame) -> str:
    """How many measurements kept their own noise, the pool's being unlike theirs."""
    own = int(table.attrs.get("own_noise", 0))
    if not own:
        return ""
    return (
        f"; {own} {'measurement keeps its' if own == 1 else 'measurements keep their'} own, "
        "far from it (own_noise: a quiet route among noisy ones, or a noisy one among quiet "
        "ones)"
    )


def lines(table: pd.DataFrame, a: str, b: str) -> list[str]:
    """The comparison as text, regressions first: one line per identity."""
    out = [f"{b} against {a} (factor = geometric-mean rate of {b} / of {a}):"]
    for r in table.itertuples(index=False):
        ident = " ".join(str(getattr(r, k)) for k in IDENTITY if hasattr(r, k))
        if r.verdict.startswith("only in"):
            out.append(f"  {ident}: {r.verdict}")
            continue
        interval = (
            f" [{r.low:.2f}, {r.high:.2f}] {level_text(r.level)}" if not math.isnan(r.low) else ""
        )
        aside = f", {r.set_aside} set aside" if r.set_aside else ""
        out.append(
            f"  {ident}: {r.verdict}, x{r.ratio:.2f}{interval} "
            f"(medians {r.median_a:.3g} -> {r.median_b:.3g} MB/s, n={r.n_a}/{r.n_b}{aside})"
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
            "campaign's geometric-mean rate over the other's with its interval and level, "
            "and a verdict (slower, faster, no clear change), regressions first:</p>"
            + html_table(empty),
        )
    )
