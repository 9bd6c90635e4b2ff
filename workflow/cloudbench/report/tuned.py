"""The tuning mode's answer (campaign.tune): per site, remote, direction and tool, the best
setting its search found, with its rate and interval, what it was set against, the budget
spent, what was left out, and the command that moves data that way: ``tuned.tsv`` and the
block that opens the report's first screen.

The best setting is the knee, not always the fastest measured: the fewest connections whose
median is within the search's margin of the fastest (campaign.search.answer). Where the two
differ the block says both and why (the fastest's extra connections buy less than the
margin), so that it agrees with the "fastest" lines below it. A command shared by several
searches (two sites downloading from one store) is printed once, naming them."""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign import identity, paths
from cloudbench.campaign.identity import KEYS, ROUTE, keys_without
from cloudbench.report.labels import NA, factor, rate, setting_as_run, with_interval

# A search's answer: its best setting as the state names it (campaign.tune), then what it
# was set against, what it spent and the command
BEST = ("clients", "concurrency", "median_mb_per_s", "low_mb_per_s", "high_mb_per_s", "level")
COLUMNS = (
    *ROUTE, "tool", "status", *keys_without(*KEYS[: KEYS.index("layout")], "repeat"), *BEST,
    "runner_up_layout", "runner_up_setting", "runner_up_mb_per_s", "factor", "factor_low",
    "factor_high", "factor_level", "clearly_ahead", "measurements", "grid_measurements",
    "spent_bytes", "spent_s", "budget", "margin", "unexplored", "warning", "command",
)  # fmt: skip


def states(results: Path, sites: Iterable[str]) -> list[dict[str, Any]]:
    """Each site's final search state (measured here or pulled), where it has one."""
    out = []
    for site in sorted(set(sites)):
        path = Path(paths.tune_final(results, site))
        if path.exists():
            out.append(json.loads(path.read_text()))
    return out


def tuned_table(found: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per search: its answer (module doc)."""
    rows = []
    for state in found:
        for s in state["searches"]:
            best, runner, ahead = s.get("best") or {}, s.get("runner_up") or {}, s.get("ahead")
            rows.append(
                {
                    **dict(zip(ROUTE, (state["site"], s["remote"], s["direction"]), strict=True)),
                    "tool": s["tool"],
                    "status": s["status"],
                    **{
                        k: best.get(k)
                        for k in COLUMNS[len(ROUTE) + 2 : COLUMNS.index(BEST[-1]) + 1]
                    },
                    "runner_up_layout": runner.get("layout"),
                    "runner_up_setting": runner.get("setting"),
                    "runner_up_mb_per_s": runner.get("median_mb_per_s"),
                    "factor": (ahead or {}).get("ratio"),
                    "factor_low": (ahead or {}).get("low"),
                    "factor_high": (ahead or {}).get("high"),
                    "factor_level": (ahead or {}).get("level"),
                    "clearly_ahead": (ahead or {}).get("clearly") if ahead else None,
                    "measurements": s["measurements"],
                    "grid_measurements": s["grid_measurements"],
                    "spent_bytes": s["spent_bytes"],
                    "spent_s": s["spent_s"],
                    "budget": s["budget"],
                    "margin": state.get("margin"),
                    "unexplored": "; ".join(s["unexplored"]),
                    "warning": s.get("warning", ""),
                    # one line of the table: the lines joined by a literal \n (a TSV cell
                    # with line breaks splits rows for cut and awk)
                    "command": LINE_BREAK.join(s.get("command") or []),
                }
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


LINE_BREAK = "\\n"  # how tuned.tsv writes the breaks between a command's lines


def _number(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _connections(setting: Any) -> int | None:
    """Clients x concurrency of a setting's label (rclone-1x8: 8); None for "auto"."""
    m = re.match(r"^[a-z0-9]+-(\d+)x(\d+)$", str(setting))
    return int(m.group(1)) * int(m.group(2)) if m else None


def _margin_text(r: Mapping[str, Any]) -> str:
    margin = _number(r.get("margin"))
    return "its margin" if math.isnan(margin) else f"{margin:.0%}"


def _rate(r: Mapping[str, Any]) -> str:
    return with_interval(
        _number(r["median_mb_per_s"]),
        _number(r["low_mb_per_s"]),
        _number(r["high_mb_per_s"]),
        _number(r["level"]),
    )


def _factor(r: Mapping[str, Any]) -> str:
    return with_interval(
        _number(r["factor"]),
        _number(r["factor_low"]),
        _number(r["factor_high"]),
        _number(r["factor_level"]),
        "×",
        fmt=factor,
    )


def against_fastest(r: Mapping[str, Any]) -> tuple[str, str]:
    """The search's other end, in two short cells (the table stays narrow): the fastest
    measured setting with its median MB/s, or, where the setting to use is the fastest, "this
    one" and the runner-up; then the factor of this setting's rate over the one named."""
    runner = r.get("runner_up_setting")
    if not isinstance(runner, str) or not runner:
        return "this one (the only one)", NA
    layout = "" if r["runner_up_layout"] == r["layout"] else f"{r['runner_up_layout']} "
    other = f"{layout}{runner} at {rate(_number(r['runner_up_mb_per_s']))}"
    if _number(r["runner_up_mb_per_s"]) > _number(r["median_mb_per_s"]):
        return other, _factor(r)
    return f"this one; runner-up {other}", _factor(r)


def _parts(text: str) -> str:
    """A wrapping cell's text as HTML that breaks only between its parts, after "; " or
    after an interval's coverage ("90% at rclone-1x4"), each part kept whole (an interval,
    "runner-up", a setting's name: a browser breaks at their spaces and hyphens)."""
    pieces = re.split(r"(?<=;) |(?<=%) (?=at )", text)
    return " ".join(f'<span class="nb">{html.escape(p)}</span>' for p in pieces)


def _spent(r: Mapping[str, Any]) -> str:
    return f"{r['measurements']} of the grid's {r['grid_measurements']}; {r['status']}"


def _row(r: Mapping[str, Any], gain: str, where: str, spent: bool) -> str:
    """One search as a row of the block's table (escaped); ``spent``: with its own count of
    measurements (where the searches' counts differ)."""
    if not r.get("setting") or pd.isna(r.get("setting")):
        cells = [where, f"no setting worked ({r['status']})", NA, NA, NA, NA]
    else:
        fastest, factor_cell = against_fastest(r)
        setting = f"{r['layout']} {setting_as_run(r['setting'], r.get('concurrency'))}"
        cells = [where, setting, _rate(r), gain or NA, fastest, factor_cell]
    cells += [_spent(r)] if spent else []
    tds = "".join(
        f'<td class="{CELL_CLASS.get(i, "")}">'
        f"{_parts(str(c)) if 'w' in CELL_CLASS.get(i, '') else html.escape(str(c))}</td>"
        for i, c in enumerate(cells)
    )
    return f"<tr>{tds}</tr>"


# per column: left-aligned text ("l"); "w" may wrap (the long cells of a search whose
# answer is the fastest, or whose plain ran at another setting, and the measurements each
# search spent, shown where their counts differ: a demo under load pushed the table to
# 1,519 px), so the table keeps to the
# width the headline's style gives it (.cb-tuned table) rather than widening the page
CELL_CLASS = {0: "l", 1: "l", 3: "w", 4: "l w", 6: "w"}


HEAD = (
    "route", "setting to use", "MB/s [interval]", "vs plain [interval]", "fastest measured",
    "÷ it [interval]", "measurements",
)  # fmt: skip


def tuned_html(
    table: pd.DataFrame,
    gains: Mapping[tuple[str, ...], str] | None = None,
    limited_by: Mapping[tuple[str, str, str], str] | None = None,
) -> str:
    """The first screen's block: a row per search (the setting to use, its rate, its speed-up
    over plain from ``gains``, per (site, remote, direction, tool), where the page has one,
    and the fastest measured), one sentence on why the setting to use can be another than
    the fastest, a note of what limits each searched route (``limited_by``, from limits.tsv:
    why its knee is where it is), then each distinct command once, naming the searches it
    serves."""
    if table.empty:
        return ""
    rows = table.to_dict("records")
    margins = " or ".join(sorted({_margin_text(r) for r in rows}))
    knee = any(
        _number(r.get("runner_up_mb_per_s")) > _number(r.get("median_mb_per_s")) for r in rows
    )
    budgets = " or ".join(sorted({str(r["budget"]) for r in rows}))
    spent = {_spent(r) for r in rows}
    each = f", {spent.pop()}" if len(spent) == 1 else ""
    head = HEAD if not each else HEAD[:-1]
    parts = [
        '<div class="cb-tuned"><p><b>The command to use</b> (tuning mode: '
        f"{html.escape(budgets)} per search{html.escape(each)}): each search's knee, the "
        f"fewest connections whose median is within {margins} of the fastest"
        + (" (a faster setting's extra connections bought less)" if knee else "")
        + "; ÷ it: this setting's rate over the one named beside it"
        + ":</p><table><thead><tr>"
        + "".join(
            f'<th class="{"l" if i < 2 or i == 4 else ""}">{h}</th>' for i, h in enumerate(head)
        )  # fmt: skip
        + "</tr></thead><tbody>"
    ]
    several = {k: len({str(r[k]) for r in rows}) > 1 for k in identity.ASIDE}
    notes, commands = [], {}
    held: dict[str, list[str]] = {}  # each limit, the searches it holds (one line for all)
    for r in rows:
        key = (str(r["site"]), str(r["remote"]), str(r["direction"]), str(r["tool"]))
        where = " ".join(
            [str(r["site"]), str(r["direction"])]
            + [str(r[k]) for k in identity.ASIDE if several[k]]
        )
        parts.append(_row(r, (gains or {}).get(key, ""), where, spent=not each))
        who = f"{r['site']} {r['direction']}"
        if isinstance(r.get("unexplored"), str) and r["unexplored"]:  # read back: NaN if none
            notes.append(f"<small>{html.escape(who)}, not explored: "
                         f"{html.escape(str(r['unexplored']))}</small>")  # fmt: skip
        if isinstance(r.get("warning"), str) and r["warning"]:
            notes.append(f"<b>Short copies</b> ({html.escape(who)}): {html.escape(r['warning'])}")
        limit = (limited_by or {}).get((str(r["site"]), str(r["remote"]), str(r["direction"])))
        if limit and limit != "undetermined":
            held.setdefault(limit, []).append(who)
        if isinstance(r.get("command"), str) and r["command"]:
            commands.setdefault(r["command"], []).append(who)
    parts.append("</tbody></table>")
    if held:  # why each knee is where it is: one line, however many searches
        notes.append(
            "<small>Limited by (What limits each route, above: why more connections do or do "
            "not help): "
            + "; ".join(f"{html.escape(k)} ({html.escape(', '.join(v))})" for k, v in held.items())
            + "</small>"
        )
    if notes:
        parts.append("<p>" + "<br>".join(notes) + "</p>")
    for command, used_by in commands.items():
        shown = html.escape("\n".join(command.split(LINE_BREAK)))
        parts.append(
            f'<p class="cb-for">For {html.escape(" and ".join(used_by))}:</p>'
            f'<pre class="cb-command">{shown}</pre>'
        )
    parts.append("</div>")
    return "\n".join(parts)
