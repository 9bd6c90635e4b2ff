"""The tuning mode's searches at a site (``tune:``), from the campaign and its records: which
searches a site runs, each one's space, the transfers a round asks for, and the state a
round's checkpoint writes. The search itself is a pure function of the rates observed so far
(:mod:`cloudbench.campaign.search`, below the campaign model, which holds its ``Tune``)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cloudbench.campaign import clients
from cloudbench.campaign.model import DIRECTIONS, Layout, Measurement, Setting
from cloudbench.campaign.search import (
    Candidate,
    Observed,
    Space,
    Tune,
    observe,
    search,
    settled,
)
from cloudbench.intervals import level_text, median_interval, ratio_interval
from cloudbench.records import write_json


def searches(campaign: Any, site: Any) -> list[tuple[str, str, str]]:
    """The searches a site runs: (remote, direction, tool) for each of its directions."""
    return [
        (remote.name, direction, tool)
        for direction in DIRECTIONS
        if getattr(site, direction)
        for remote in campaign.remotes
        for tool in remote.tools
    ]


def space(campaign: Any, site: Any, tool: str) -> Space:
    """One search's space: the layouts the tool moves, each strategy's concurrency values as
    the tool honours them (1 only for s3cmd, from 2 for s5cmd: it climbs what the tool
    opens), the site's client counts."""
    layouts = [lay for lay in campaign.layouts if tool in campaign.tools_for(lay.strategy)]
    return Space(
        layouts=tuple(lay.label for lay in layouts),
        ladders={
            lay.label: tuple(
                sorted(clients.concurrency_values(tool, campaign.concurrency_of(lay.strategy)))
            )
            for lay in layouts
        },
        clients=tuple(sorted(site.clients)),
        repeats=campaign.repeats,
        candidate_bytes=campaign.repeats * campaign.dataset_bytes,
    )


def measurements_of(
    site: str, remote: str, direction: str, tool: str, cands: Iterable[Candidate], repeats: int
) -> list[Any]:
    """The transfers that measure candidates: each at every repeat."""
    return [
        Measurement(
            site,
            remote,
            direction,
            Layout.from_label(c.layout),
            r,
            Setting(tool, c.clients, c.concurrency),
        )  # fmt: skip
        for c in cands
        for r in range(1, repeats + 1)
    ]


def candidate_of(setting_label: str, layout: str) -> Candidate:
    s = Setting.from_label(setting_label)
    return Candidate(layout, s.clients, int(s.concurrency or 0))


def decide_site(
    campaign: Any,
    site_name: str,
    records: Iterable[Mapping[str, Any]],
    round_: int,
    command_for: Any = None,
) -> dict[str, Any]:
    """Every search of a site replayed from its records so far: the state a round's
    checkpoint writes (what each search measures next, what it decided, its answer).
    ``command_for(campaign, search, backend)``: the lines that move data the way of a
    finished search's best setting (measure.suggest.tuned_command; a stage above this)."""
    records = list(records)
    backends = {str(r["remote"]): r.get("backend") for r in records if r.get("backend")}

    site = campaign.site_named(site_name)
    by_label = observe(records)
    tune: Tune = campaign.tune
    out = []
    for remote, direction, tool in searches(campaign, site):
        sp = space(campaign, site, tool)
        observed = {
            candidate_of(setting, layout): obs
            for (r, d, layout, setting), obs in by_label.items()
            if r == remote and d == direction and setting.startswith(f"{tool}-")
        }
        res = search(sp, tune, observed)

        ahead = None
        if res.best is not None and res.runner_up is not None:
            f = ratio_interval(observed[res.best].rates, observed[res.runner_up].rates)
            ahead = {
                "ratio": _num(f.ratio),
                "low": _num(f.low),
                "high": _num(f.high),
                "level": _num(f.level),
                "clearly": bool(f.low > 1) if not math.isnan(f.low) else False,
                "level_text": level_text(f.level),
            }
        out.append(
            {
                "remote": remote,
                "direction": direction,
                "tool": tool,
                "status": res.status,
                "rounds": res.rounds,
                "next": [
                    {"layout": c.layout, "setting": f"{tool}-{c.clients}x{c.concurrency}"}
                    for c in res.next
                ],
                "measured": [_described(c, tool, observed) for c in res.measured],
                "settled": [
                    {"layout": c.layout, "setting": f"{tool}-{c.clients}x{c.concurrency}"}
                    for c in settled(res, observed)
                ],
                "best": _described(res.best, tool, observed),
                "runner_up": _described(res.runner_up, tool, observed),
                "ahead": ahead,
                "lines": res.lines,
                "log": res.log,
                "unexplored": res.unexplored,
                "spent_bytes": res.spent_bytes,
                "spent_s": round(res.spent_s, 3),
                "budget": tune.budget_text,
                "grid_measurements": len(sp.grid) * sp.repeats,
                "measurements": len(res.measured) * sp.repeats,
            }
        )
        if res.best is not None:
            out[-1]["warning"] = short_copies(observed[res.best])
        if command_for is not None and not res.next:
            out[-1]["command"] = command_for(campaign, out[-1], backends.get(remote))
    return {
        "site": site_name,
        "round": round_,
        "margin": tune.margin,
        "budget": tune.budget_text,
        "searches": out,
    }


def _described(
    c: Candidate | None, tool: str, observed: Mapping[Candidate, Observed]
) -> dict[str, Any] | None:
    """A measured setting as the state file and tuned.tsv name it, with its median rate
    and the order-statistic interval of it."""
    if c is None:
        return None
    obs = observed[c]
    low, high, level = median_interval(obs.rates)
    return {
        "layout": c.layout,
        "setting": f"{tool}-{c.clients}x{c.concurrency}",
        "clients": c.clients,
        "concurrency": c.concurrency,
        "median_mb_per_s": _num(obs.median),
        "low_mb_per_s": _num(low),
        "high_mb_per_s": _num(high),
        "level": _num(level),
        "repeats": obs.repeats,
        "failed": obs.failed,
    }


# Below this many seconds a copy is mostly its client's start-up and the store's first
# answers, and a few percent of noise decides between settings: the answer says so
MIN_COPY_S = 2.0


def short_copies(best: Observed) -> str:
    """A warning when the best setting's copies were too short to rank settings ('' if not)."""
    each = best.seconds / best.repeats if best.repeats else 0.0
    if each >= MIN_COPY_S:
        return ""
    return (
        f"its copies took {each:.2g} s each: a client's start-up is a large share of so short "
        f"a copy, so settings were ranked partly by noise; a dataset that takes {MIN_COPY_S:g} s "
        "or more per copy ranks them"
    )


def _num(v: float) -> float | None:
    return None if v is None or math.isnan(v) else round(float(v), 6)


def next_measurements(campaign: Any, site_name: str, state: Mapping[str, Any]) -> list[Any]:
    """The transfers a round's state asks for next (every repeat of each candidate)."""
    out = []
    for s in state["searches"]:
        cands = [candidate_of(n["setting"], n["layout"]) for n in s["next"]]
        out += measurements_of(
            site_name, s["remote"], s["direction"], s["tool"], cands, campaign.repeats
        )
    return out


def measured_labels(state: Mapping[str, Any], repeats: int) -> list[dict[str, Any]]:
    """Every transfer a site's final state says its searches measured, as labels
    (identity.LABELS): what the report expects beyond the first round."""
    return [
        {
            "site": state["site"],
            "remote": s["remote"],
            "direction": s["direction"],
            "layout": m["layout"],
            "setting": m["setting"],
            "repeat": r,
        }
        for s in state["searches"]
        for m in s["measured"]
        for r in range(1, repeats + 1)
    ]


def is_settled(state: Mapping[str, Any] | None, m: Any) -> bool:
    """Whether a transfer's failure is a search's finding (module doc): not measured again."""
    if not state:
        return False
    for s in state["searches"]:
        if s["remote"] == m.remote and s["direction"] == m.direction:
            for c in s["settled"]:
                if c["layout"] == m.layout.label and c["setting"] == m.setting.label:
                    return True
    return False


def decide_files(
    campaign: Any,
    site_name: str,
    round_: int,
    records: Sequence[str],
    out: str,
    log: str,
    command_for: Any = None,
) -> None:
    """The tune checkpoint's work, from and to files (rules/tune.smk)."""
    state = decide_site(
        campaign,
        site_name,
        (json.loads(Path(p).read_text()) for p in records),
        round_,
        command_for,
    )
    write_json(Path(out), state)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    searching = [s for s in state["searches"] if s["next"]]
    Path(log).write_text(
        f"tune: after round {round_}, {len(searching)} of {len(state['searches'])} searches "
        "measure another round\n"
        + "".join(f"  {line}\n" for s in state["searches"] for line in s["log"])
    )
