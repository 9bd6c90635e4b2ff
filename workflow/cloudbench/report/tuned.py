"""The tuning mode's answer (campaign.tune): per site, remote, direction and tool, the best
setting its search found, with its rate and interval, what it was set against, the budget
spent, what was left out, and the command that moves data that way: ``tuned.tsv`` and the
block that opens the report's first screen."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign import paths
from cloudbench.campaign.identity import KEYS, ROUTE, keys_without
from cloudbench.intervals import level_text

# A search's answer: its best setting as the state names it (campaign.tune), then what it
# was set against, what it spent and the command
BEST = ("clients", "concurrency", "median_mb_per_s", "low_mb_per_s", "high_mb_per_s", "level")
COLUMNS = (
    *ROUTE, "tool", "status", *keys_without(*KEYS[: KEYS.index("layout")], "repeat"), *BEST,
    "runner_up_layout", "runner_up_setting", "runner_up_mb_per_s", "factor", "factor_low",
    "factor_high", "factor_level", "clearly_ahead", "measurements", "grid_measurements",
    "spent_bytes", "spent_s", "budget", "unexplored", "warning", "command",
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
                    "unexplored": "; ".join(s["unexplored"]),
                    "warning": s.get("warning", ""),
                    # one line of the table: the lines joined by a literal \n (a TSV cell
                    # with line breaks splits rows for cut and awk)
                    "command": LINE_BREAK.join(s.get("command") or []),
                }
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


LINE_BREAK = "\\n"  # how tuned.tsv writes the breaks between a command's lines


def _f(v: Any, fmt: str = ".3g") -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "-"


def answer_sentence(r: dict[str, Any]) -> str:
    """One search's answer in words: the best, its rate, the runner-up, the budget."""
    where = f"{r['site']} {r['direction']} {r['remote']} with {r['tool']}"
    if not r.get("setting") or pd.isna(r.get("setting")):
        return f"{where}: no setting worked ({r['status']})."
    rate = (
        f"{_f(r['median_mb_per_s'])} MB/s [{_f(r['low_mb_per_s'])}, {_f(r['high_mb_per_s'])}]"
        f" ({level_text(float(r['level'])) if pd.notna(r['level']) else 'no interval'})"
    )
    text = f"{where}: {r['layout']} at {r['clients']} x {r['concurrency']}, {rate}"
    if isinstance(r.get("runner_up_setting"), str):
        factor = (
            f"{_f(r['factor'])}x [{_f(r['factor_low'])}, {_f(r['factor_high'])}] at "
            f"{level_text(float(r['factor_level']))}"
            if pd.notna(r.get("factor_level"))
            else f"{_f(r['factor'])}x (no interval)"
        )
        verdict = "clearly ahead of" if r["clearly_ahead"] is True else "not clearly ahead of"
        text += (
            f"; {verdict} the runner-up {r['runner_up_layout']} "
            f"{r['runner_up_setting']} ({_f(r['runner_up_mb_per_s'])} MB/s; {factor})"
        )
    text += (
        f". Spent {r['measurements']} of the grid's {r['grid_measurements']} measurements"
        f" (budget {r['budget']}; {r['status']})."
    )
    return text


def tuned_html(table: pd.DataFrame) -> str:
    """The first screen's block: each search's answer and the command to type."""
    if table.empty:
        return ""
    parts = [
        '<div class="cb-tuned"><p><b>The command to use</b> (tuning mode: each search\'s '
        "best setting, the fewest connections within its margin of the fastest):</p><ul>"
    ]
    for r in table.to_dict("records"):
        item = html.escape(answer_sentence(r))
        if isinstance(r.get("unexplored"), str) and r["unexplored"]:  # read back: NaN if none
            item += f"<br><small>Not explored: {html.escape(str(r['unexplored']))}</small>"
        if isinstance(r.get("warning"), str) and r["warning"]:
            item += f"<br><b>Short copies</b>: {html.escape(r['warning'])}"
        if isinstance(r.get("command"), str) and r["command"]:
            lines = r["command"].split(LINE_BREAK)
            shown = html.escape("\n".join(lines))
            item += f'<pre class="cb-command">{shown}</pre>'
        parts.append(f"<li>{item}</li>")
    parts.append("</ul></div>")
    return "\n".join(parts)
