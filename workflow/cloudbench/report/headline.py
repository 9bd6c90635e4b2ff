"""The campaign's answer, on the report's first screen: how fast, from where, is it intact.

The Snakemake report opens on its global description (``workflow/report/workflow.rst``),
which includes this fragment as raw HTML (figures/front_page.html: written by the
``figures`` rule, which puts the key figure in the place ``aggregate`` left for it). A
researcher sees, without a click: per site x remote x direction x layout the median rate
with its interval, that interval's real coverage and n (or why there is none), the best
layout and its speed-up over plain, failures and corruptions, and the key figure. Pure
formatting of numbers that ``cloudbench.report.stats`` computes; nothing new is measured.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cloudbench.campaign.clients import capped_by_rclone_flags
from cloudbench.campaign.identity import GROUP, ROUTE, keys_through, keys_without
from cloudbench.campaign.model import Setting
from cloudbench.intervals import (
    MIN_REPEATS_FOR_INTERVAL,
    TARGET_LEVEL,
    level_text,
    median_interval,
    ratio_interval,
)
from cloudbench.report import stats
from cloudbench.report.burst import burst_lines
from cloudbench.report.failures import scope_sentences
from cloudbench.report.labels import (
    NA,
    bwlimit_bytes,
    coverage_note,
    factor,
    flag_values,
    layout_order,
    num,
    rate,
    setting_as_run,
    with_interval,
)
from cloudbench.report.select import same_keys

STYLE = (
    "<style>"
    # Snakemake's front page puts the description in a narrow column beside the rule graph:
    # let the headline take the width it needs (the graph moves right).
    ".prose:has(.cb-headline){max-width:none}"
    # It also centres the page vertically: a headline taller than the window (a sweep has
    # many rows) would start above the top, out of reach. Start it at the top instead.
    ".items-center:has(.cb-headline){align-items:flex-start}"
    # and centres it across: a headline wider than the window (long setting names) would
    # overflow on both sides, its left edge under the menu and out of scroll's reach
    ".justify-center:has(.cb-headline){justify-content:safe center}"
    ".cb-headline table{border-collapse:collapse;margin:.4em 0 .8em 0;font-size:13px}"
    ".cb-headline th,.cb-headline td{border:1px solid #ccc;padding:2px 6px;text-align:right;"
    "white-space:nowrap}"
    ".cb-headline th{background:#f0f0f0}.cb-headline td.l,.cb-headline th.l{text-align:left}"
    ".cb-headline tr.best td{font-weight:600;background:#e8f4e8}"
    ".cb-headline tr.bad td{background:#fde2e1}"
    ".cb-headline p{margin:.3em 0;max-width:70em}"
    # the figure is two panels wide: at 640 px their 9 pt labels were 6 px tall
    ".cb-headline img{max-width:960px;width:100%;height:auto;border:1px solid #ddd}"
    # a command's long lines wrap inside the page's width instead of widening the headline
    # (at 1400 px they pushed the grid and the answer off the screen's right edge)
    ".cb-headline pre.cb-command{white-space:pre-wrap;overflow-wrap:anywhere;max-width:70em;"
    "background:#f7f7f7;color:#1a1a1a;padding:4px 6px;font-size:12px;line-height:1.35}"
    ".cb-headline .cb-tuned li{max-width:70em}"
    ".cb-headline p.cb-for{margin:.4em 0 0 0;font-size:13px}"
    ".cb-headline p.cb-legend{font-size:13px;margin-top:1em}"
    ".cb-headline tr.cb-route th{background:#fafafa;font-weight:600}"
    # tables at their own width, not the page's (the report's style makes every table 100%:
    # one wide line made every table as wide), and list lines wrapped like paragraphs
    ".cb-headline table{width:auto!important}.cb-headline li{max-width:70em}"
    # the tuning block's table within the window beside the menu and the rule graph: its
    # longer cells (class w) wrap instead (tuned.CELL_CLASS)
    ".cb-headline .cb-tuned table{max-width:920px}.cb-headline td.w{white-space:normal}"
    ".cb-headline span.nb{white-space:nowrap}"
    # the "What limits each route" block (report.limits) between the routes and the command:
    # a heading and a line per route as tall as the page's other blocks, so that the first
    # command stays on the first screen
    ".cb-headline .cb-limits h3{font-size:1em;margin:.4em 0 .1em 0}"
    ".cb-headline .cb-limits ul{margin:0 0 .3em 0}.cb-headline .cb-limits li{margin:0}"
    ".cb-headline pre.cb-command{margin:.1em 0 .3em 0}"
    ".cb-headline .cb-grid td,.cb-headline .cb-grid th{text-align:left}"
    "</style>"
)


# the rows one sentence compares: "tool" is "" unless the tools' rates are not comparable
GROUP_KEYS = keys_through("tool")
# a row: a measurement (its layout names its setting where there are several)
ROW_KEYS = keys_without("strategy", "setting", "repeat")
ROW_COLUMNS = [
    *ROW_KEYS, "base_layout", "setting", "n", "median", "low", "high", "level",
    "speedup", "speedup_low", "speedup_high", "speedup_level", "failed", "corrupt", "retries",
    "reruns", "resent", "request_retries", "stalls", "rates",
]  # fmt: skip


# "Best" needs a gain a person would act on, not only one the repeats can tell: the factor's
# whole interval above this (the demo's capped layouts differ by 0.1%, consistently, and a
# green "best ... ×1.00" helps nobody)
BEST_MARGIN = 1.05


def _clear(group: pd.DataFrame, best: Mapping[str, Any]) -> tuple[bool, float]:
    """Whether the fastest row of a group is clearly faster than every other row (layout and
    setting alike): the interval of its factor over each of them lies above ``BEST_MARGIN``.

    "Best" is one claim about all the others at once, so it is made at a joint level: with k
    rivals each interval aims at 1 - 5%/k (Bonferroni), and the level returned is what the k
    hold together at the least, 1 - the sum of their misses (three rivals at 90% each hold
    together at only 70%; at 98.3% each, at 95%). Without an interval against one of them
    (too few repeats) nothing is clear, however large the gap."""
    others = [
        rates
        for layout, rates in zip(group["layout"], group["rates"], strict=True)
        if layout != best["layout"]
    ]
    each = 1 - (1 - TARGET_LEVEL) / max(1, len(others))
    misses = 0.0
    for rates in others:
        r = ratio_interval(best["rates"], rates, target=each)
        if not r.low > BEST_MARGIN:
            return False, math.nan
        misses += 1 - r.level
    return bool(others), max(0.0, 1 - misses) if others else math.nan


def reruns(transfers: pd.DataFrame) -> int:
    """Attempts beyond the first, over the repeats: each is a measurement that failed (or was
    killed) and was measured again, which a repeat's own ``retries`` (rclone's, inside one
    attempt) does not show. 0 for records written before ``attempts`` was."""
    if "attempts" not in transfers:
        return 0
    extra = pd.to_numeric(transfers["attempts"], errors="coerce").fillna(1) - 1
    return int(extra.clip(lower=0).sum())


# What a client sent again inside one attempt: the S3 SDK's requests (rclone's, s5cmd's)
# and rclone's own low-level retries (a whole object's PUT); an outage the copy rode out
# shows here
SENT_AGAIN_COLUMNS = ("request_retries", "low_level_retries")


def _request_retries(transfers: pd.DataFrame) -> int:
    """Requests sent again inside the client, over the repeats (``SENT_AGAIN_COLUMNS``): an
    outage the copy rode out shows here, not in ``retries`` (a user's store was down 5 s
    of an 8 s upload, recorded ok with 6 of them; another's, down 8 s, with 12 whole
    PutObjects sent again, which the SDK's count alone missed)."""
    return int(
        sum(
            pd.to_numeric(transfers[c], errors="coerce").fillna(0).sum()
            for c in SENT_AGAIN_COLUMNS
            if c in transfers
        )
    )


def _concurrency(sel: pd.DataFrame) -> float:
    """Objects at once as run (an "auto" setting's number), or NaN where not recorded."""
    ran = pd.to_numeric(sel.get("concurrency", pd.Series(dtype=float)), errors="coerce")
    return float(ran.median()) if ran.notna().any() else math.nan


def rows(metrics: pd.DataFrame, summary: pd.DataFrame, by_tool: bool = False) -> pd.DataFrame:
    """One row per site x remote x direction x layout: median rate [CI] (n), speed-up over
    plain [CI], failed and corrupt counts, and whether it is the best layout of its group
    (of its tool's rows too, with ``by_tool``: where the tools' rates are not comparable)."""
    out = []
    several = summary["setting"].nunique() > 1 if not summary.empty else False
    for r in summary.itertuples(index=False):
        sel = metrics[same_keys(metrics, r._asdict(), GROUP)]
        rates = stats.ok_rates(sel)["mb_per_s"].to_numpy(float)
        iv = median_interval(rates)
        setting = setting_as_run(r.setting, _concurrency(sel))
        out.append(
            {
                **{k: getattr(r, k) for k in ROUTE},
                "tool": Setting.from_label(str(r.setting)).tool if by_tool else "",
                "layout": f"{r.layout} {setting}" if several else r.layout,
                "base_layout": r.layout,
                "setting": setting,
                "n": int(r.n),
                "median": float(r.p50),
                "low": iv.low,
                "high": iv.high,
                "level": iv.level,
                "speedup": float(r.speedup_vs_plain),
                "speedup_low": float(r.speedup_ci_low),
                "speedup_high": float(r.speedup_ci_high),
                "speedup_level": float(r.speedup_ci_level),
                "failed": int(r.failed),
                "corrupt": int(r.corrupt),
                "retries": r.retries,  # NaN: not counted (a tool that reports none)
                "reruns": reruns(sel),
                "resent": stats.resent_bytes(sel),
                "request_retries": _request_retries(sel),
                "stalls": stats.stalls(sel),
                "rates": rates,
            }
        )
    df = pd.DataFrame(out, columns=ROW_COLUMNS)
    if df.empty:
        return df.assign(best=pd.Series(dtype=bool))
    best = df.groupby(GROUP_KEYS)["median"].transform("max")
    df["best"] = (df["median"] == best) & df["median"].notna()
    df["clear"] = False
    df["clear_level"] = math.nan
    for _, g in df.groupby(GROUP_KEYS, sort=False):
        for i in g.index[g["best"]]:
            df.loc[i, ["clear", "clear_level"]] = _clear(g, df.loc[i])
    df["clear"] = df["clear"].astype(bool)
    return df


def _rate_cell(r: Mapping[str, Any], unit: str = "") -> str:
    return with_interval(r["median"], r["low"], r["high"], r["level"], n=r["n"], unit=unit)


def _speedup_cell(r: Mapping[str, Any]) -> str:
    if r["layout"].startswith("plain") or math.isnan(r["speedup"]):
        return NA
    return with_interval(
        r["speedup"], r["speedup_low"], r["speedup_high"], r["speedup_level"], "×", fmt=factor
    )


def _over_plain(group: pd.DataFrame, best: Mapping[str, Any]) -> str:
    """What the group's layouts gain over plain, in words, when ``best`` (the fastest) has
    no speed-up of its own because plain was not measured at its setting: the fastest row
    that has one (the demo: plain at 1x4 only, the fastest chunked at 1x8, so the speed-up
    is chunked's at 1x4). '' when no row has one."""
    has = group[group["speedup"].notna() & ~group["base_layout"].eq("plain")]
    if has.empty:
        return ""
    r = has.loc[has["median"].idxmax()]
    return (
        f"; {r['base_layout']} is {_speedup_cell(r)} over plain at {r['setting']}, where both ran"
    )


def _verdict(group: pd.DataFrame, best: Mapping[str, Any]) -> tuple[str, str]:
    """How sure the page may be that ``best`` is the fastest of ``group``, in words that give
    the real reason when it cannot say (not "too few repeats" when the repeats were enough)."""
    if best["clear"]:
        rivals = sum(o.layout != best["layout"] for o in group.itertuples(index=False))
        if rivals == 1:
            return "best ", f" ({level_text(best['clear_level'])} intervals)"
        return "best ", (
            f" (ahead of all {rivals} others at once, jointly at {level_text(best['clear_level'])})"
        )
    few = [
        str(o.layout)
        for o in group.itertuples(index=False)
        if o.layout != best["layout"] and min(o.n, best["n"]) < MIN_REPEATS_FOR_INTERVAL
    ]
    if few:
        # the sentence gives the point ratio; what the repeats cannot do is tell them apart
        # (a user read "x1.00 over plain; too few ok repeats to compare with plain")
        return "fastest ", (
            f"; too few ok repeats (under {MIN_REPEATS_FOR_INTERVAL}) to tell it apart from "
            f"{', '.join(few)}"
        )
    return "fastest ", f"; not clearly ×{BEST_MARGIN:.2f} ahead of the others"


def knee_note(tuned: pd.DataFrame | None, best: Mapping[str, Any], tool: str = "") -> str:
    """Why the tuning block above names another setting than ``best``, the fastest measured
    on its route (a row of :func:`rows`), in words: '' where there is no tuning answer for
    the route. Of several searches on the route (one per tool), that of ``tool`` where the
    tools' rates are not comparable, else the fastest answer."""
    if tuned is None or tuned.empty:
        return ""
    mine = tuned[
        (tuned["site"].astype(str) == str(best["site"]))
        & (tuned["remote"].astype(str) == str(best["remote"]))
        & (tuned["direction"].astype(str) == str(best["direction"]))
        & tuned["setting"].notna()
        & ((tuned["tool"].astype(str) == tool) if tool else True)
    ]
    if mine.empty:
        return ""
    t = mine.loc[pd.to_numeric(mine["median_mb_per_s"], errors="coerce").fillna(-1).idxmax()]
    setting = setting_as_run(t["setting"], t.get("concurrency"))
    if (t["layout"], setting) == (best["base_layout"], best["setting"]):
        return "; the command above uses it"
    margin = pd.to_numeric(pd.Series([t.get("margin")]), errors="coerce").iloc[0]
    within = f"within {margin:.0%}" if pd.notna(margin) else "within the search's margin"
    return (
        f"; the command above uses {t['layout']} {setting} instead, the knee: the fewest "
        f"connections {within} of the fastest"
    )


def sentences(table: pd.DataFrame, tuned: pd.DataFrame | None = None) -> list[str]:
    """One sentence per site, remote and direction: the fastest layout (setting) measured,
    how much it gains over plain, and, where the tuning block (``tuned``) names another
    setting for the route, why (:func:`knee_note`)."""
    out = []
    for (site, remote, direction, tool), g in table.groupby(GROUP_KEYS, sort=False):
        best = g[g["best"]]
        if tool:  # each tool apart: their rates are not comparable
            direction = f"{direction} with {tool}"
        if best.empty:
            out.append(f"{site} {direction}: no ok transfer yet.")
            continue
        b = best.iloc[0]
        where = f" ({remote})" if table["remote"].nunique() > 1 else ""
        is_plain = b["layout"].startswith("plain")
        has_speedup = not math.isnan(b["speedup"])
        gain = f", {_speedup_cell(b)} over plain" if has_speedup and not is_plain else ""
        lead, doubt = "", " (the only layout measured here)"
        if len(g) > 1:
            lead, doubt = _verdict(g, b)
            if not is_plain and not has_speedup:
                doubt += _over_plain(g, b) or (
                    "; plain was not measured at this setting, so no speed-up"
                )
        doubt += knee_note(tuned, b, str(tool))
        compared = g[g["best"] | g["layout"].str.startswith("plain")]
        retried = [f"{r.layout} {r.retries:g}" for r in compared.itertuples() if r.retries > 0]
        resent = [
            f"{r.layout} {rate(r.resent / 1e6)} MB" for r in compared.itertuples() if r.resent
        ]
        told = [f"rclone retried during these repeats: {', '.join(retried)}"] if retried else []
        sent_again = [r for r in g.itertuples() if r.request_retries]
        again = [f"{r.layout} {r.request_retries}" for r in sent_again]
        # like a stall, a silent outage: said for every layout of the group, naming the
        # clients whose SDK sent them (rclone's, s5cmd's)
        inside = ", ".join(dict.fromkeys(Setting.from_label(r.setting).tool for r in sent_again))
        told += (
            [
                f"requests sent again inside {inside} "
                f"(columns {', '.join(SENT_AGAIN_COLUMNS)}): {', '.join(again)}"
            ]
            if again
            else []
        )
        told += (
            [
                f"rclone counted bytes beyond the data (sent again after a failed "
                f"request): {', '.join(resent)}"
            ]
            if resent
            else []
        )
        stalled = [f"{r.layout} r{k} {t:.0f} s" for r in g.itertuples() for k, t in r.stalls]
        told += [f"the copy moved nothing for a while: {', '.join(stalled)}"] if stalled else []
        caveat = f" ({'; '.join(told)}; the rates include the time lost)" if told else ""
        out.append(
            f"{site} {direction}{where}: {lead}{b['layout']} at {rate(b['median'])} MB/s"
            f"{gain}{doubt}{caveat}."
        )
    return out


def _bwlimit_text(value: str) -> str:
    """rclone's --bwlimit value in words with its unit (labels.bwlimit_bytes); ``UP:DOWN``
    and timetables as given."""
    if ":" in value or "," in value or " " in value:
        return f"{value} (rclone's upload:download or timetable form)"
    nbytes = bwlimit_bytes(value)
    if nbytes is None:
        return value
    return f"{value} = {nbytes / 2**20:g} MiB/s = {rate(nbytes / 1e6)} MB/s"


def uncapped_tools(caps: Sequence[str], transfers: pd.DataFrame) -> list[str]:
    """The tools other than rclone in ``transfers`` when rclone ran under ``caps``: their
    rates and rclone's are not comparable, so each tool gets its own "fastest"."""
    tools = transfers["tool"] if caps and "tool" in transfers else pd.Series(dtype=str)
    return sorted(t for t in set(tools.dropna().astype(str)) if not capped_by_rclone_flags(t))


def rate_caps(info: Mapping[str, Any], transfers: pd.DataFrame) -> list[str]:
    """Every bandwidth cap the rates ran under, from any source, with its unit: the
    campaign's rclone.flags and rclone flags set in the environment. A capped rate read as a
    slow store is the mistake this prevents (the demo's 16 MiB/s cap once went unnamed)."""
    flags = [str(f) for f in ((info.get("rclone") or {}).get("flags")) or []]
    per_file, total = flag_values(flags, "--bwlimit-file"), flag_values(flags, "--bwlimit")
    caps = []
    if per_file and total:  # a link that limits each connection, and the whole link above it
        caps.append(
            f"each file (each transfer) at --bwlimit-file {_bwlimit_text(per_file[-1])}, and "
            f"--bwlimit {_bwlimit_text(total[-1])} in all per rclone process, from the "
            "campaign's rclone.flags"
        )
    else:
        caps += [
            f"--bwlimit-file {_bwlimit_text(v)} per file (each transfer), from the campaign's "
            "rclone.flags"
            for v in per_file
        ]
        caps += [
            f"--bwlimit {_bwlimit_text(v)} per rclone process, from the campaign's rclone.flags"
            for v in total
        ]
    whole, some = _environment_caps(transfers)
    caps += whole
    # rclone's caps bind rclone only: a user read "fastest: s5cmd" beside a capped rclone
    others = uncapped_tools(caps, transfers)
    if others:
        caps.append(
            f"{' and '.join(others)} not capped (these caps bind rclone only), so rates of "
            "different tools are not comparable here"
        )
    return caps + some


def _environment_caps(transfers: pd.DataFrame) -> tuple[list[str], list[str]]:
    """RCLONE_BWLIMIT set in the environment of rclone's transfers with a rate (a failed
    copy's cap shaped no rate): the caps every one of them ran under, and those only some
    did, with how many. A run stopped while capped, then rerun without the cap, keeps the
    capped repeats that finished: the report once said "Rates capped" of a campaign where 2
    of 16 rclone rates were, and called s5cmd's rates not comparable with the other 14."""
    if transfers.empty or "rclone_env" not in transfers:
        return [], []
    rated = transfers["status"] == "ok"
    if "tool" in transfers:  # the tools rclone's caps bind (records older than the column:
        # all rclone's)
        rated &= transfers["tool"].map(
            lambda t: not isinstance(t, str) or capped_by_rclone_flags(t)
        )
    if "mb_per_s" in transfers:
        rated &= transfers["mb_per_s"].notna()
    env = transfers.loc[rated, "rclone_env"].fillna("").astype(str)
    found = [m for v in env for m in set(v.split()) if m.startswith("RCLONE_BWLIMIT=")]
    whole, some = [], []
    for value in sorted(set(found)):
        name, limit = value.split("=", 1)
        text = f"{name}={_bwlimit_text(limit)} per rclone process, from the environment"
        n = found.count(value)
        if n == len(env):
            whole.append(text)
        else:
            some.append(
                f"{text}, in {n} of {len(env)} rclone transfers with a rate (column "
                "rclone_env): a median over those and uncapped repeats is neither rate"
            )
    return whole, some


def per_object_lines(metrics: pd.DataFrame) -> list[str]:
    """A small-files campaign's answer, per measurement (site, remote, direction, tool,
    layout and setting apart): files/s with the interval of its median and that interval's
    coverage, and seconds per object. With many small files the cost per object decides."""
    if metrics.empty or "files_per_s" not in metrics:
        return []
    ok = stats.ok_rates(metrics)
    ok = ok[pd.to_numeric(ok["files_per_s"], errors="coerce").notna()]
    keys = [k for k in GROUP if k in ok]
    out = []
    several = ok["remote"].nunique() > 1 if "remote" in ok else False
    for key, g in ok.groupby(keys, sort=False):
        k = dict(zip(keys, key, strict=True))
        fps = pd.to_numeric(g["files_per_s"]).to_numpy(float)
        iv = median_interval(fps)
        spo = float(pd.to_numeric(g["s_per_object"]).median())
        where = f" ({k['remote']})" if several else ""
        files = with_interval(float(np.median(fps)), iv.low, iv.high, iv.level, n=len(fps), fmt=num)
        out.append(
            f"{k['site']} {k['direction']}{where} {k['layout']} {k.get('setting', '')}: "
            f"{files} files/s, {spo:.3g} s per object (n={len(fps)})"
        )
    return out


def environment_flags(transfers: pd.DataFrame) -> str:
    """rclone settings that came from the environment (RCLONE_BWLIMIT=4M ...), with how many
    transfers ran under each: they shape the rates as much as the config's flags, but no
    campaign file shows them. '' when there were none."""
    if transfers.empty or "rclone_env" not in transfers:
        return ""
    env = transfers["rclone_env"].fillna("").astype(str).str.strip()
    counts = env[env != ""].value_counts()
    return "; ".join(f"{v} in {n} of {len(env)} transfers" for v, n in counts.items())


def _against(comparison: pd.DataFrame | None) -> str:
    """The comparison with ``compare_with`` in one sentence: how many measurements are
    slower, faster, not clearly changed (in red when one is slower: a regression)."""
    if comparison is None or comparison.empty:
        return ""
    from cloudbench.report.compare import counts_text

    name = html.escape(str(comparison.attrs.get("against", "the other campaign")))
    slower = int((comparison["verdict"] == "slower").sum())
    text = html.escape(counts_text(comparison))
    mark = ' style="color:#b00"' if slower else ""
    return f" <b{mark}>Against {name}</b>: {text} (Comparison)."


def _repeats_by_precision(decided: pd.DataFrame | None, info: Mapping[str, Any]) -> str:
    """With ``repeats: auto``: how the measurements' rounds ended, in one sentence (red when
    one stopped short of the target)."""
    from cloudbench.campaign.precision import MET, stops_text

    target = info.get("precision")
    if not target or decided is None or decided.empty:
        return ""
    short = bool((decided["decision"] != MET).any())
    mark = ' style="color:#b00"' if short else ""
    text = html.escape(stops_text(decided.to_dict("records"), target))
    return f" <b{mark}>Repeats</b>: {text} (Repeats)."


def _throttled(metrics: pd.DataFrame) -> str:
    """The store's 503 SlowDown / 429 answers, and its other 5xx, counted from the copies'
    logs, a sentence each (red: such a store's rates say more about its limits or its
    health than its speed)."""
    text = ""
    for column, flag, what in (
        ("throttled", "Throttled", "503 SlowDown or 429"),
        ("server_errors", "Server errors", "another 5xx"),
    ):
        if column not in metrics:
            continue
        counts = pd.to_numeric(metrics[column], errors="coerce")
        hit = counts[counts > 0]
        if hit.empty:
            continue
        text += (
            f' <b style="color:#b00">{flag}</b>: the store answered {int(hit.sum())} requests '
            f"with {what} in {len(hit)} of {int(counts.notna().sum())} counted transfers "
            f"(column {column})."
        )
    return text


def notation(table: pd.DataFrame) -> str:
    """How every number of the first screen reads, said once at its top: rates in MB/s with
    one decimal, and what the percentage after an interval is, with the levels the
    campaign's repeats give (a median's 75% beside a factor's 90% at 3 repeats: both named
    where shown, and why they differ said here)."""
    ns = table.loc[table["level"].notna(), "n"] if not table.empty else pd.Series(dtype=int)
    return f" Rates in MB/s (10⁶ B/s); {coverage_note(ns)}."


def _gains(table: pd.DataFrame, tuned: pd.DataFrame) -> dict[tuple[str, ...], str]:
    """Per search (site, remote, direction, tool) its answer's speed-up over plain, in words:
    at its own setting where plain ran there, else its layout's where both ran, naming that
    setting (``×3.88 [3.86, 3.92] 90% at rclone-1x4``)."""
    out = {}
    for t in tuned.to_dict("records"):
        if not isinstance(t.get("setting"), str) or t["layout"] == "plain":
            continue
        used = setting_as_run(t["setting"], t.get("concurrency"))
        key = (str(t["site"]), str(t["remote"]), str(t["direction"]), str(t["tool"]))
        mine = table[
            (table["site"].astype(str) == key[0])
            & (table["remote"].astype(str) == key[1])
            & (table["direction"].astype(str) == key[2])
            & (table["base_layout"] == t["layout"])
            & table["setting"].astype(str).str.startswith(f"{key[3]}-")
            & table["speedup"].notna()
        ]
        same = mine[mine["setting"] == used]
        if not same.empty:
            out[key] = _speedup_cell(same.iloc[0])
        elif not mine.empty:
            r = mine.loc[mine["median"].idxmax()]
            out[key] = f"{_speedup_cell(r)} at {r['setting']}"
    return out


def legend(table: pd.DataFrame) -> str:
    """What the table's columns and colours mean: only what this table shows (a reader of a
    one-setting campaign was told about connections and colours it did not have)."""
    text = "Every setting measured: median MB/s of the ok repeats (n) [interval] coverage"
    if table.empty:
        return text + "."
    if (table["layout"] != table["base_layout"]).any():
        text += (
            "; a layout's setting is tool-clients x objects at once, as run (rclone-4x32: 4 "
            "clients of 32 each)"
        )
    text += (
        "; retried: rclone's whole-copy retries inside the repeats; rerun: attempts beyond "
        "the first, over the repeats (failed, killed or forced; column attempts)"
    )
    if table["clear"].any():
        text += (
            f". Green: faster than every other layout (each factor's interval above "
            f"×{BEST_MARGIN:.2f})"
        )
    if (table["failed"] + table["corrupt"]).any():
        text += ". Red: a failed or corrupt repeat"
    return text + "."


def table_html(table: pd.DataFrame) -> str:
    """Every setting measured, a row each, under a heading row per route (site, remote where
    there are several, direction, and tool where the tools' rates are not comparable): the
    route's keys in their own row, not in three columns of every row, keep the table narrow
    (two remotes and two tools made it 1,180 px wide, past a 1400 px window's edge)."""
    show_remote = table["remote"].nunique() > 1
    route = [k for k in GROUP_KEYS if k != "tool"]
    head = ["layout", "median MB/s [interval]", "n", "vs plain [interval]", "failed", "corrupt"]
    head += ["retried", "rerun"]
    cells = "".join(f'<th class="{"l" if i == 0 else ""}">{h}</th>' for i, h in enumerate(head))
    body = [f"<table><thead><tr>{cells}</tr></thead><tbody>"]
    ordered = _in_order(table)
    for key, g in ordered.groupby([*route, "tool"], sort=False):
        k = dict(zip([*route, "tool"], key, strict=True))
        title = f"{k['site']} {k['direction']}" + (f" ({k['remote']})" if show_remote else "")
        title += f" with {k['tool']}" if k["tool"] else ""
        body.append(
            f'<tr class="cb-route"><th class="l" colspan="{len(head)}">{html.escape(title)}'
            "</th></tr>"
        )
        for r in g.to_dict("records"):
            cls = "bad" if r["failed"] or r["corrupt"] else "best" if r["clear"] else ""
            tds = f'<td class="l">{html.escape(str(r["layout"]))}</td>'
            tds += f"<td>{_rate_cell(r)}</td><td>{r['n']}</td><td>{_speedup_cell(r)}</td>"
            tds += (
                f"<td>{r['failed']}</td><td>{r['corrupt']}</td><td>{_count_cell(r['retries'])}</td>"
            )
            tds += f"<td>{r['reruns']}</td>"
            body.append(f'<tr class="{cls}">{tds}</tr>')
    body.append("</tbody></table>")
    return "".join(body)


def _in_order(table: pd.DataFrame) -> pd.DataFrame:
    """The table's rows as the page lists them: by site, remote, direction and tool, then
    layouts in the report's one order (plain, chunked by size, multithread; settings by
    clients and concurrency), not in the order the records came (the demo's table went
    tursa, tesseract, tursa again)."""
    rank = {label: i for i, label in enumerate(layout_order(table["layout"]))}
    keys = [k for k in GROUP_KEYS if k in table]
    return (
        table.assign(_rank=table["layout"].map(rank))
        .sort_values([*keys, "_rank"], kind="stable")
        .drop(columns="_rank")
    )


def _count_cell(v: float) -> str:
    """A count the repeats may not have counted: NA, not 0, where none did."""
    return NA if math.isnan(v) else f"{v:g}"


def _bursting(metrics: pd.DataFrame) -> int:
    """How many transfers started fast and then slowed (:mod:`cloudbench.report.burst`)."""
    return int(metrics["burst_s"].notna().sum()) if "burst_s" in metrics else 0


# Where the front page's figure goes: ``aggregate`` writes the headline with this line in its
# place, and the ``figures`` rule, which draws the figure, writes the front page with the
# figure there (front_page): a run that leaves the figures out draws no figure at all.
FIGURE_SLOT = "<!-- cloudbench: the front page's figure (figures/front_page.html) -->"


def figure_block(figure: Path) -> str:
    """The front page's figure, embedded (the report's front page is one HTML fragment), and
    its caption; nothing if the figure was not drawn."""
    if not figure.exists():
        return ""
    data = base64.b64encode(figure.read_bytes()).decode()
    return (
        f'<img alt="whole-transfer rate per strategy" src="data:image/png;base64,{data}">'
        "<p><small>The whole-transfer rate per strategy, the rate of the table above "
        "(every repeat a point, the median with its interval); the sustained rate after "
        "ramp-up has its own figure under Transfers.</small></p>"
    )


def front_page(headline: str, figure: Path) -> str:
    """The report's front page: the headline ``aggregate`` wrote, with ``figure`` in its
    slot (FIGURE_SLOT)."""
    if FIGURE_SLOT not in headline:
        raise ValueError("the headline has no place for its figure (FIGURE_SLOT)")
    return headline.replace(FIGURE_SLOT, figure_block(figure))


def headline_html(
    metrics: pd.DataFrame,
    summary: pd.DataFrame,
    info: Mapping[str, Any],
    figure: Path | None = None,
    drifts: Sequence[str] = (),
    comparison: pd.DataFrame | None = None,
    decided: pd.DataFrame | None = None,
    tuned: pd.DataFrame | None = None,
    route_table: pd.DataFrame | None = None,
    limits: str = "",
    estimate: str = "",
    limited_by: Mapping[tuple[str, str, str], str] | None = None,
) -> str:
    """The fragment the report's front page shows (HTML without <html>/<body>), with
    ``figure`` embedded, or without a figure: FIGURE_SLOT in its place; ``drifts``
    are the lines of :func:`cloudbench.report.drift.drift_sentences`, ``comparison`` the
    table of :func:`cloudbench.report.compare.compare` against ``compare_with``, ``decided``
    how ``repeats: auto`` ended (:mod:`cloudbench.campaign.precision`), ``limits`` the "What
    limits each route" block (HTML, :mod:`cloudbench.report.limits`), shown below the grid of
    routes and above the command to use, ``estimate`` the "How long your data takes" block
    (HTML, :mod:`cloudbench.report.estimate`), after that command, ``limited_by`` each
    route's limit (site, remote, direction: limits.tsv), said in the tuning block's note."""
    caps = rate_caps(info, metrics)
    table = rows(metrics, summary, by_tool=bool(uncapped_tools(caps, metrics)))
    total = len(metrics)
    bad = metrics[metrics["status"] != "ok"] if total else metrics
    status = (
        f"{total} transfers, all ok and verified"
        if total and bad.empty
        else f"{total} transfers, {len(bad)} not ok: "
        + ", ".join(f"{n} {s}" for s, n in bad["status"].value_counts().items())
        if total
        else "nothing measured yet"
    )
    parts = [
        STYLE,
        '<div class="cb-headline">',
        f"<p><b>Campaign {html.escape(str(info.get('campaign', '')))}</b>: {status}."
        + (f" <b>Rates capped</b>: {html.escape('; '.join(caps))}." if caps else "")
        + _against(comparison)
        + _repeats_by_precision(decided, info)
        + _throttled(metrics)
        + (
            f" <b>Burst, then slower</b> in {bursting} of {total} transfers (below the figure)."
            if (bursting := _bursting(metrics))
            else ""
        )
        + notation(table)
        + "</p>",
    ]
    if route_table is not None and (
        route_table["site"].nunique() > 1 or route_table["remote"].nunique() > 1
    ):  # several sites or remotes: the grid they are read from
        from cloudbench.report.routes import grid_html

        thresholds = tuple((info.get("thresholds") or {}).get(k) for k in ("good", "poor"))
        parts.append(grid_html(route_table, thresholds))
    parts += [limits] if limits else []
    if tuned is not None and not tuned.empty:  # the tuning mode's answer comes first
        from cloudbench.report.tuned import tuned_html

        parts.append(tuned_html(tuned, _gains(table, tuned) if not table.empty else {}, limited_by))
    parts += [estimate] if estimate else []  # after the command it times, if any
    if (info.get("dataset") or {}).get("small_files"):
        lines = per_object_lines(metrics)
        if lines:
            parts.append(
                "<p><b>Many small files</b>: the cost per object decides, so files/s comes "
                "first (median [interval] coverage), then seconds per object:<br>"
                + "<br>".join(html.escape(x) for x in lines)
                + "</p>"
            )
    parts += [f'<p class="failures">{html.escape(s)}</p>' for s in scope_sentences(metrics)]
    # the fastest setting measured per route, with its speed-up over plain: the answer of a
    # campaign that does not tune, and below the table of one that does (its tuning block
    # says the same per route, and these lines why the fastest is not the setting to use)
    fastest = [f"<p>{html.escape(s)}</p>" for s in sentences(table, tuned)]
    tuning = tuned is not None and not tuned.empty
    parts += [] if tuning else fastest
    # what qualifies the answer follows the table and its figure, so that the first screen
    # shows the answer whatever a campaign adds (drift, settings from the environment)
    after = [f'<p class="drift"><b>Drift</b>: {html.escape(s)}</p>' for s in drifts]
    after += [
        f'<p class="burst"><b>Burst, then slower</b>: {html.escape(s)}.</p>'
        for s in burst_lines(metrics)
    ]
    if env := environment_flags(metrics):
        after.append(
            f"<p>rclone flags set in the environment, not in the campaign file: "
            f"{html.escape(env)} (column rclone_env).</p>"
        )
    from cloudbench.report.scaling import recommendations  # only campaigns that sweep have any

    names = {k: (r or {}).get("label") for k, r in (info.get("remotes") or {}).items()}
    after += [
        f"<p><b>Scaling</b>: {html.escape(s)}</p>"
        for s in recommendations(metrics, names, capped=bool(caps))
    ]
    if not table.empty:
        parts.append(f'<p class="cb-legend">{legend(table)}</p>' + table_html(table))
    if tuning:
        parts += fastest
    parts.append(figure_block(figure) if figure is not None else FIGURE_SLOT)
    parts += after
    parts.append("</div>")
    return "\n".join(parts) + "\n"
