"""The tuning mode (``tune:``): per site, remote, direction and tool, an adaptive search for
the fastest way to move the campaign's data, within a budget, instead of the full grid.

The grid a campaign file lists (its layouts, each strategy's concurrency values, the site's
client counts) is the search space. A *line* is one layout climbing its concurrency ladder at
the site's fewest clients:

1. **Round 1** measures every line at its lowest concurrency.
2. **After each round** each line's newest step is set against its step before:
   * it *failed* (a repeat failed while the store answered: not an outage) or its median
     *fell* by more than the margin: a **collapse**; the line stops and the failing or
     slower setting is avoided, not averaged in;
   * it gained no more than the margin: a **plateau**; the line stops (its knee is behind it);
   * its ladder has no higher value: the line stops at its **top**;
   * otherwise it climbs: the next round measures it at the next concurrency.
   Then a line still climbing whose median is more than the margin behind the fastest of
   the round is **dropped**: it is clearly behind at the same concurrency (successive
   halving's bet: a layout behind at every rung so far is not measured at the higher ones).
3. **Clients**: once no line climbs, the best setting so far climbs the site's client counts
   by the same rules, if it lists more than one.
4. **The answer**: the fastest median M among the settings that did not fail; the best is
   the one with the fewest connections (clients x concurrency) whose median is within the
   margin of M (the knee: more connections buy nothing there). It is set against the
   runner-up (the fastest other setting) with the factor's interval at its stated level.

Every step is an ordinary measurement (same records, repeats, verification, timeouts); the
search is a pure function of the records: :func:`search` replays it from the rates measured
so far and returns the candidates it needs next, so a rerun with the same records decides
the same (and measures nothing), and a search cut short resumes at the round it was in.

A round whose every failure was an outage (the store did not answer) is not a finding: the
search waits there, and the failed repeats are measured again on the next run, like any
failed transfer. A setting that failed while the store answered is a finding, *settled*:
not measured again (:func:`settled`).

**Budget**: bytes moved (``budget: 20GiB``: every repeat moves the dataset once) or seconds
of timed copies (``budget: 2h``). A bytes budget cuts a round to the candidates that fit
(the fastest lines first); a time budget is checked between rounds, so the round that
crosses it is the last one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# How a line's climb ended, as the decisions and the report name it
CLIMBING = "climbing"
PLATEAU = "plateau"
COLLAPSE = "collapse"
TOP = "top of the ladder"
DROPPED = "dropped"
BUDGET = "budget reached"
WAITING = "waiting: a failed repeat is measured again"


class Candidate(NamedTuple):
    """One setting the search may measure: a layout at a client count and concurrency."""

    layout: str
    clients: int
    concurrency: int

    @property
    def connections(self) -> int:
        return self.clients * self.concurrency

    def text(self) -> str:
        return f"{self.layout} {self.clients}x{self.concurrency}"


class Observed(NamedTuple):
    """A candidate's repeats as measured so far: the MB/s of those that worked, how many
    ran and failed (``outages``: failed while the store did not answer; ``external``: for a
    cause outside the setting, a signal, a timeout, clients that did not start together),
    and their timed seconds (for a time budget)."""

    rates: tuple[float, ...]
    repeats: int
    failed: int = 0
    outages: int = 0
    seconds: float = 0.0
    external: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else math.nan

    @property
    def collapsed(self) -> bool:
        """Most repeats failed by themselves while the store answered: the setting's own
        failure, a finding. One failure in three is no finding (it waits, module doc)."""
        return 2 * (self.failed - self.outages - self.external) > self.repeats

    @property
    def store_failed(self) -> bool:
        """A repeat failed and that is no finding: measured again on the next run."""
        return self.failed > 0 and not self.collapsed


@dataclass(frozen=True)
class Tune:
    """The campaign's ``tune:``: a budget in bytes or in seconds, and the margin below
    which a gain, a loss or a lead is no finding."""

    margin: float
    budget_bytes: int | None = None
    budget_s: float | None = None

    @property
    def budget_text(self) -> str:
        from cloudbench.sizes import size_label

        if self.budget_bytes is not None:
            return f"{size_label(self.budget_bytes)} moved"
        if self.budget_s is not None:
            return f"{self.budget_s:g} s of timed copies"
        return "none"


@dataclass(frozen=True)
class Space:
    """What one search may measure: its layouts (lines), each one's concurrency ladder
    (ascending), the site's client counts (ascending), and what one candidate costs
    (its repeats x the dataset's bytes)."""

    layouts: tuple[str, ...]
    ladders: Mapping[str, tuple[int, ...]]
    clients: tuple[int, ...]
    repeats: int
    candidate_bytes: int

    @property
    def grid(self) -> list[Candidate]:
        """The full grid: every candidate an exhaustive campaign would measure."""
        return [
            Candidate(layout, k, c)
            for layout in self.layouts
            for k in self.clients
            for c in self.ladders[layout]
        ]


@dataclass
class Outcome:
    """Where a search stands: what it measures next (empty: it is over, or waits for failed
    repeats to be measured again), what it decided on the way, and its answer so far."""

    next: list[Candidate]
    log: list[str]
    rounds: int
    status: str  # searching, done, budget reached, waiting: the store failed
    spent_bytes: int
    spent_s: float
    measured: list[Candidate]
    lines: dict[str, str]  # how each layout's climb ended
    best: Candidate | None = None
    runner_up: Candidate | None = None
    unexplored: list[str] = field(default_factory=list)


@dataclass
class _Replay:
    """One replay of a search: what it reads, and the state its rounds build up."""

    space: Space
    tune: Tune
    observed: Mapping[Candidate, Observed]
    history: dict[str, list[Candidate]]  # each line's steps (and "clients": the best's)
    lines: dict[str, str]  # how each line's climb stands
    log: list[str]


def search(space: Space, tune: Tune, observed: Mapping[Candidate, Observed]) -> Outcome:
    """Replay the search over ``space`` from what is ``observed`` (module doc)."""
    r = _Replay(
        space, tune, observed, {layout: [] for layout in space.layouts},
        dict.fromkeys(space.layouts, CLIMBING), [],
    )  # fmt: skip
    log, lines, history = r.log, r.lines, r.history
    measured: list[Candidate] = []
    k1 = space.clients[0]
    round_ = [Candidate(layout, k1, space.ladders[layout][0]) for layout in space.layouts]
    phase_clients = False
    spent_b, spent_s, rounds = 0, 0.0, 0

    def outcome(nxt: list[Candidate], status: str) -> Outcome:
        best, runner = answer(measured, observed, tune.margin)
        return Outcome(
            nxt, log, rounds, status, spent_b, spent_s, list(measured), dict(lines),
            best, runner, unexplored(space, measured, lines, phase_clients),
        )  # fmt: skip

    while round_:
        asked = round_
        round_ = _within_budget(r, round_, spent_b, spent_s)
        for cut in (c for c in asked if c not in round_):  # the budget ends its climb
            lines["clients" if phase_clients else cut.layout] = BUDGET
        if not round_:
            return outcome([], BUDGET)
        missing = [c for c in round_ if c not in observed or observed[c].repeats < space.repeats]
        if missing:
            return outcome(missing, "searching")
        if any(observed[c].store_failed for c in round_):
            log.append(
                f"round {rounds + 1}: a repeat failed for a cause that is no finding (an "
                "outage of the store, a killed client, a timeout, or one failure of three); the "
                "search waits, and the failed repeats are measured again on the next run"
            )
            return outcome([], WAITING)
        rounds += 1
        measured += round_
        spent_b += len(round_) * space.candidate_bytes
        spent_s += sum(observed[c].seconds for c in round_)
        if phase_clients:
            round_ = _climb_clients(r, round_[0])
            continue
        climbing = _step_lines(r, round_, rounds)
        if climbing:
            round_ = [_next_concurrency(c, space) for c in climbing]
            continue
        phase_clients = True
        best, _ = answer(measured, observed, tune.margin)
        if best is None or len(space.clients) < 2:
            break
        log.append(f"clients: {best.text()} climbs the client counts {list(space.clients)}")
        history["clients"] = [best]
        round_ = [best._replace(clients=space.clients[1])]
    return outcome([], "done")


def _step_lines(r: _Replay, round_: Sequence[Candidate], rounds: int) -> list[Candidate]:
    """One round of the concurrency climb: each line's verdict, then the drops; the
    candidates whose lines climb on."""
    space, tune, observed, history, lines, log = (
        r.space, r.tune, r.observed, r.history, r.lines, r.log
    )  # fmt: skip
    climbing = []
    for cand in round_:
        before = history[cand.layout][-1] if history[cand.layout] else None
        history[cand.layout].append(cand)
        verdict = _verdict(cand, before, observed, tune.margin)
        if verdict is None and cand.concurrency == space.ladders[cand.layout][-1]:
            verdict = TOP
        log.append(f"round {rounds}: {_said(cand, before, observed, verdict or CLIMBING)}")
        if verdict is None:
            climbing.append(cand)
        else:
            lines[cand.layout] = verdict
    working = [c for c in round_ if observed[c].rates and not observed[c].failed]
    lead = max(working, key=lambda c: observed[c].median, default=None)
    kept = []
    for cand in climbing:
        if lead is None or cand == lead:
            kept.append(cand)
            continue
        _, high = factor(observed[cand], observed[lead])
        if high < 1 - tune.margin:  # clearly behind: even its best case is
            lines[cand.layout] = DROPPED
            log.append(
                f"round {rounds}: {cand.layout} dropped: {observed[cand].median:.3g} MB/s is "
                f"clearly more than {tune.margin:.0%} behind the round's fastest, "
                f"{lead.text()} at {observed[lead].median:.3g} MB/s"
            )
        else:
            kept.append(cand)
    return kept


def _climb_clients(r: _Replay, cand: Candidate) -> list[Candidate]:
    """One step of the best setting's climb of the client counts."""
    space, tune, observed, history, lines, log = (
        r.space, r.tune, r.observed, r.history, r.lines, r.log
    )  # fmt: skip
    before = history["clients"][-1]
    history["clients"].append(cand)
    verdict = _verdict(cand, before, observed, tune.margin)
    if verdict is None and cand.clients == space.clients[-1]:
        verdict = TOP
    log.append(f"clients: {_said(cand, before, observed, verdict or CLIMBING)}")
    if verdict is not None:
        lines["clients"] = verdict
        return []
    return [cand._replace(clients=space.clients[space.clients.index(cand.clients) + 1])]


def factor(now: Observed, was: Observed) -> tuple[float, float]:
    """The bounds of the factor between two steps' rates: the exact Mann-Whitney interval
    (90% at 3 against 3 repeats, its level stated where it is shown); with fewer repeats,
    the ratio of the medians for both."""
    from cloudbench.intervals import ratio_interval

    r = ratio_interval(now.rates, was.rates)
    if math.isnan(r.low):
        return r.ratio, r.ratio
    return r.low, r.high


def _verdict(
    cand: Candidate, before: Candidate | None, observed: Mapping[Candidate, Observed], margin: float
) -> str | None:
    """How a step ends its climb (None: it climbs on), against the step before it: it
    climbs on only while the gain is clearly above the margin (the factor's interval above
    1 + margin) and collapses only when the loss clearly is (below 1 - margin)."""
    now = observed[cand]
    if now.collapsed or not now.rates:
        return COLLAPSE
    if before is None:
        return None
    low, high = factor(now, observed[before])
    if high < 1 - margin:
        return COLLAPSE
    if low <= 1 + margin:
        return PLATEAU
    return None


def _said(
    cand: Candidate, before: Candidate | None, observed: Mapping[Candidate, Observed], verdict: str
) -> str:
    now = observed[cand]
    text = f"{cand.text()}: "
    if now.collapsed:
        text += f"{now.failed} of {now.repeats} repeats failed while the store answered"
    else:
        text += f"{now.median:.3g} MB/s"
        if before is not None and observed[before].rates:
            gain = now.median / observed[before].median - 1
            text += f" ({gain:+.0%} against {before.text()})"
    return f"{text}: {verdict}"


def _next_concurrency(cand: Candidate, space: Space) -> Candidate:
    ladder = space.ladders[cand.layout]
    return cand._replace(concurrency=ladder[ladder.index(cand.concurrency) + 1])


def _within_budget(
    r: _Replay, round_: list[Candidate], spent_b: int, spent_s: float
) -> list[Candidate]:
    """The candidates of a round the budget still allows: a bytes budget takes the lines
    fastest so far first, as many as fit; a time budget allows a whole round or none."""
    space, tune, observed, history, log = r.space, r.tune, r.observed, r.history, r.log
    if tune.budget_s is not None and spent_s >= tune.budget_s:
        log.append(f"budget: {spent_s:.4g} s of {tune.budget_s:g} s spent; the search stops")
        return []
    if tune.budget_bytes is None:
        return round_
    room = (tune.budget_bytes - spent_b) // space.candidate_bytes
    if room >= len(round_):
        return round_

    def so_far(c: Candidate) -> float:
        steps = history.get(c.layout) or []
        return -max((observed[s].median for s in steps if observed[s].rates), default=0.0)

    kept = sorted(round_, key=so_far)[: max(room, 0)]
    left = [c.text() for c in round_ if c not in kept]
    log.append(f"budget: {len(left)} of the round's candidates do not fit ({', '.join(left)})")
    return [c for c in round_ if c in kept]


def answer(
    measured: Iterable[Candidate], observed: Mapping[Candidate, Observed], margin: float
) -> tuple[Candidate | None, Candidate | None]:
    """The best setting (the fewest connections within the margin of the fastest median,
    among those that did not fail) and the runner-up (the fastest other one)."""
    ok = [c for c in measured if observed[c].rates and not observed[c].failed]
    if not ok:
        return None, None
    fastest = max(observed[c].median for c in ok)
    near = [c for c in ok if observed[c].median >= fastest * (1 - margin)]
    best = min(near, key=lambda c: (c.connections, -observed[c].median))
    others = [c for c in ok if c != best]
    runner = max(others, key=lambda c: observed[c].median) if others else None
    return best, runner


def unexplored(
    space: Space, measured: Sequence[Candidate], lines: Mapping[str, str], clients_done: bool
) -> list[str]:
    """What the search left out, and why: per layout, the settings it never measured."""
    done = set(measured)
    out = []
    for layout in space.layouts:
        left = [c for c in space.grid if c.layout == layout and c not in done]
        if not left:
            continue
        why = lines.get(layout, "")
        out.append(
            f"{layout}: {len(left)} settings not measured "
            f"(its climb ended: {why}; more clients only for the best)"
        )
    if lines.get("clients") == BUDGET:
        out.append("clients: the best setting's climb of the client counts was cut by the budget")
    return out


def settled(outcome: Outcome, observed: Mapping[Candidate, Observed]) -> list[Candidate]:
    """The candidates whose failure is the search's finding: not measured again."""
    return [c for c in outcome.measured if observed[c].collapsed]


def observe(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, ...], Observed]:
    """Each measured setting's repeats, from its records, by (remote, direction, layout,
    setting): the rates of the repeats that worked, the failures and outages."""
    grouped: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for rec in records:
        key = (str(rec["remote"]), str(rec["direction"]), str(rec["layout"]), str(rec["setting"]))
        grouped.setdefault(key, []).append(rec)
    out = {}
    for key, recs in grouped.items():
        ok = [r for r in recs if r.get("status") == "ok" and r.get("mb_per_s") is not None]
        failed = [r for r in recs if r.get("status") != "ok"]
        outages = [r for r in failed if r.get("outage") == "during"]
        out[key] = Observed(
            rates=tuple(float(r["mb_per_s"]) for r in ok),
            repeats=len(recs),
            failed=len(failed),
            outages=len(outages),
            seconds=sum(float(r.get("seconds") or 0.0) for r in recs),
            external=sum(1 for r in failed if r not in outages and _external(r)),
        )
    return out


# How a copy's error begins or reads when its cause lay outside the setting: a signal
# (someone's kill, the out-of-memory killer, a Ctrl-C that reached the client), the copy's
# time limit, clients that did not start together (measure.record, measure.group)
EXTERNAL_CAUSES = ("stopped by SIG", "killed by SIG", "timed out after", "did not run together")


def _external(record: Mapping[str, Any]) -> bool:
    error = str(record.get("error") or "")
    return any(cause in error for cause in EXTERNAL_CAUSES)


# --- a site's searches, from the campaign and its records ---------------------------------


def searches(campaign: Any, site: Any) -> list[tuple[str, str, str]]:
    """The searches a site runs: (remote, direction, tool) for each of its directions."""
    from cloudbench.campaign.model import DIRECTIONS

    return [
        (remote.name, direction, tool)
        for direction in DIRECTIONS
        if getattr(site, direction)
        for remote in campaign.remotes
        for tool in campaign.tools
    ]


def space(campaign: Any, site: Any, tool: str) -> Space:
    """One search's space: the layouts the tool moves, each strategy's concurrency values
    (1 only for a client that moves one object at a time), the site's client counts."""
    from cloudbench.campaign import clients

    layouts = [lay for lay in campaign.layouts if tool in campaign.tools_for(lay.strategy)]
    one_at_a_time = not clients.REGISTRY[tool].objects_at_once
    return Space(
        layouts=tuple(lay.label for lay in layouts),
        ladders={
            lay.label: (1,)
            if one_at_a_time
            else tuple(sorted(campaign.concurrency_of(lay.strategy)))
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
    from cloudbench.campaign.model import Layout, Measurement, Setting

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
    from cloudbench.campaign.model import Setting

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
    from cloudbench.intervals import level_text, ratio_interval

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
    from cloudbench.intervals import median_interval

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
    import json
    from pathlib import Path

    from cloudbench.records import write_json

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


def asked_so_far(campaign: Any, site_name: str, round_file: Any) -> list[Any]:
    """The later rounds a site's searches have asked for so far, read from their files
    (``round_file(k)``; no Snakemake involved): what a stopped run still owes."""
    import json

    asked: list[Any] = []
    k = 1
    while (path := round_file(k)).exists():
        asked += next_measurements(campaign, site_name, json.loads(path.read_text()))
        k += 1
    return asked
