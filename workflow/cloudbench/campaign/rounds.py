"""Rounds: how a site's transfers grow past its first rounds while a search decides as it
goes, for both such searches: repeats chosen by precision (``repeats: auto``,
:mod:`cloudbench.campaign.precision`) and the tuning mode (``tune:``,
:mod:`cloudbench.campaign.tune`). One protocol, one replay of it.

A site first measures its first rounds (``Campaign.measurements``). After round k a
checkpoint writes the site's *state* (a JSON file, :meth:`Search.state_path`); the state
says what round k + 1 measures (:meth:`Search.next`). The rounds end at the first state that
asks for nothing: it is final, and its file is copied to :meth:`Search.final_path`.

The replay (:func:`replay`, :func:`later`, :func:`last`, a search's ``rests_on``) is a pure
function of ``state_of(k)``, the state after round k. The workflow's input functions pass
one that asks Snakemake's checkpoint (a round not decided yet is decided first); the hooks
(:mod:`cloudbench.site.lifecycle`) pass :func:`on_disk`, what a run left (None: not
decided). Nothing is cached: each call replays the states it is given, so a checkpoint that
decides a round mid-run is seen by the next call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from cloudbench.campaign import jobs, paths, precision, tune
from cloudbench.campaign.model import Campaign, Measurement

State = Mapping[str, Any]
StateOf = Callable[[int], State | None]


class Search(Protocol):
    """What one site's rounds need to know of the search that decides them."""

    site: str

    @property
    def first(self) -> int:
        """The first round with a state: the rounds before it are measured undecided."""
        ...

    @property
    def checkpoint(self) -> str:
        """The name of the checkpoint rule that writes the state after each round."""
        ...

    def next(self, state: State, k: int) -> list[Measurement]:
        """The transfers round k + 1 measures, from the state after round k."""
        ...

    def rests_on(self, k: int, state_of: StateOf) -> list[Measurement]:
        """The transfers whose records the state after round k is decided from."""
        ...

    def previous(self, k: int) -> list[int]:
        """The rounds whose states the state after round k builds on (their files)."""
        ...

    def state_path(self, results: str, k: int) -> str: ...

    def final_path(self, results: str) -> str: ...


@dataclass(frozen=True)
class Repeats:
    """``repeats: auto``: the state after a round is every identity's decision; the next
    round measures again, at its next repeat, each identity the state leaves undecided
    (precision.continuing). A round's decisions rest on every repeat so far of the
    identities measured in it, and the round before's decisions keep the others."""

    campaign: Campaign
    site: str
    checkpoint = "precision"

    @property
    def first(self) -> int:
        return self.campaign.repeats

    def next(self, state: State, k: int) -> list[Measurement]:
        return [
            jobs.decided_measurement(self.site, d, k + 1)
            for d in precision.continuing(state["decisions"])
        ]

    def rests_on(self, k: int, state_of: StateOf) -> list[Measurement]:
        if k <= self.first:
            site = self.campaign.site_named(self.site)
            measured = [m for m in self.campaign.measurements(site) if m.repeat == 1]
        else:
            measured = self.next(_decided(state_of, k - 1), k - 1)
        return [replace(m, repeat=r) for m in measured for r in range(1, k + 1)]

    def previous(self, k: int) -> list[int]:
        return [k - 1] if k > self.first else []

    def state_path(self, results: str, k: int) -> str:
        return paths.precision_round(results, self.site, k)

    def final_path(self, results: str) -> str:
        return paths.precision_final(results, self.site)


@dataclass(frozen=True)
class Searches:
    """``tune:``: the state after a round is every search of the site replayed from all its
    records so far (tune.decide_site); the next round measures the candidates each search
    names next, at every repeat."""

    campaign: Campaign
    site: str
    checkpoint = "tune"

    @property
    def first(self) -> int:
        return 1

    def next(self, state: State, k: int) -> list[Measurement]:
        return tune.next_measurements(self.campaign, self.site, state)

    def rests_on(self, k: int, state_of: StateOf) -> list[Measurement]:
        ms = list(self.campaign.measurements(self.campaign.site_named(self.site)))
        for j in range(1, k):
            ms += self.next(_decided(state_of, j), j)
        return ms

    def previous(self, k: int) -> list[int]:
        return []  # each round replays the searches from every record

    def state_path(self, results: str, k: int) -> str:
        return paths.tune_round(results, self.site, k)

    def final_path(self, results: str) -> str:
        return paths.tune_final(results, self.site)


def of(campaign: Campaign, site: str) -> Search | None:
    """The search that decides a site's rounds, or None: a fixed number of repeats."""
    if campaign.tune is not None:
        return Searches(campaign, site)
    if campaign.precision is not None:
        return Repeats(campaign, site)
    return None


def _decided(state_of: StateOf, k: int) -> State:
    state = state_of(k)
    if state is None:
        raise LookupError(f"round {k} is not decided yet")
    return state


def replay(search: Search, state_of: StateOf) -> Iterator[tuple[int, State, list[Measurement]]]:
    """Each decided state in turn, from the first round's, with what it asks the next round
    to measure: up to the first that asks for nothing (included) or the first not decided
    (``state_of`` gives None)."""
    k = search.first
    while (state := state_of(k)) is not None:
        asked = search.next(state, k)
        yield k, state, asked
        if not asked:
            return
        k += 1


def later(search: Search, state_of: StateOf) -> list[Measurement]:
    """Every transfer the states so far asked for beyond the first rounds, round by round."""
    return [m for _, _, asked in replay(search, state_of) for m in asked]


def last(search: Search, state_of: StateOf) -> int:
    """The round whose state is final: it asks for nothing more."""
    return max((k for k, _, _ in replay(search, state_of)), default=search.first)


def newest(search: Search, results: str) -> State | None:
    """The newest state a run left on disk (None before the first): a finding of an earlier
    run, read from its files, never through the checkpoint (the records it is asked about
    are that checkpoint's own inputs: asking it would be a circle)."""
    k, found = search.first, None
    while (path := Path(search.state_path(results, k))).exists():
        found, k = path, k + 1
    return read_state(found) if found else None


def settled(campaign: Campaign, results: str, m: Measurement) -> bool:
    """Whether ``m``'s failure is a finding, not to be measured again: only a tuning search
    settles one (a setting that failed while the store answered, tune.is_settled), as its
    newest state says; ``repeats: auto`` measures a failed repeat again."""
    if campaign.tune is None:
        return False
    return tune.is_settled(newest(Searches(campaign, m.site), results), m)


def read_state(path: str | Path) -> State:
    """A state as its checkpoint wrote it."""
    return json.loads(Path(path).read_text())


def on_disk(search: Search, results: str) -> StateOf:
    """``state_of`` from the files a run left (the hooks): None for a round not decided."""

    def state_of(k: int) -> State | None:
        path = Path(search.state_path(results, k))
        return read_state(path) if path.exists() else None

    return state_of
