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
