"""A circuit breaker per site and remote: a store that has stopped answering is not tried
again and again.

Every step that talks to the store at a site (upload, download, latency probe, publish)
says how its call went: a failure that names a network cause (rclonelog.network_cause:
refused, reset, timed out, no route...) adds one to the site's count for that remote, and
any answer clears it. The count lives in one small JSON file in the site's scratch
(``paths.store_down``), so every job of the site, batch jobs on other nodes included, and
the Snakemake process that submits them, read the same state.

Once ``after_failures`` failures in a row are counted the breaker is *open*:

* a measurement of that remote at that site records "not measured: store ... down" at
  once, without a request, unless its last check is older than ``probe_every_s`` (a new
  run, or a store back after a pause), when it spends one cheap listing on finding out;
* no further measurement of that remote at that site is started in this run (``on_open:
  stop``, the default), through Snakemake's own rule for a failed job (keep-going runs
  what does not depend on it): before each measurement a local job of the ``store_open``
  rule, never submitted to a scheduler, fails at once naming the breaker (:func:`main`),
  so the transfer that needs it is never submitted; a transfer that finds the breaker open
  fails at once too, without a request (:func:`refused`). The other remotes and sites go
  on; the run ends non-zero, naming the store. With ``on_open: wait`` a job instead checks
  the store with growing pauses for at most ``wait_s`` since the outage began, then
  measures, or records that it did not.

Why a count and not the first failure: a single refused connection is what a store's
restart or a load balancer's hiccup looks like, and the next measurement should find out.
Why a file and not memory: the jobs of a site are separate processes, often separate
batch jobs, and an outage outlives any one of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.campaign import paths
from cloudbench.records import utc_now, write_json

# A measurement's `outage` column: it failed because the store was down, or it is the first
# that reached the store again after an outage (its rate may carry the store's recovery).
DURING, AFTER = "during", "after"
PROBE_BACKOFF_S = (10.0, 20.0, 40.0, 80.0, 160.0, 300.0)  # wait mode: pauses between checks
WATCH_INTERVAL_S = 2.0


@dataclass(frozen=True)
class Policy:
    """What a site does about a store that stopped answering (the campaign's ``store_down``)."""

    after_failures: int = 3
    stall_s: float = 60.0  # a copy that moves nothing this long while failing is ended
    wait_s: float = 0.0  # 0: stop (end the run); > 0: wait this long for the store, then go on
    probe_every_s: float = 60.0
    run_started_epoch: float = 0.0  # a breaker not checked since this run began is asked again

    @property
    def waits(self) -> bool:
        return self.wait_s > 0


@dataclass(frozen=True)
class State:
    """The count kept for one site and remote (the JSON file, read)."""

    remote: str
    failures: int
    since: str  # the first failure of this run of failures (UTC)
    last: str  # the newest failure (UTC)
    cause: str
    by: str  # which step met it
    checked_epoch: float  # the last time a job asked the store (wall clock)
    since_epoch: float = 0.0
    url: str = ""  # the remote as rclone names it (``ucs3:``), beside the campaign's key

    def is_open(self, policy: Policy) -> bool:
        return self.failures >= policy.after_failures

    def describe(self) -> str:
        name = (
            f"{self.remote!r} ({self.url})"
            if self.url and self.url != self.remote
            else repr(self.remote)
        )
        return (
            f"store {name} has not answered since {self.since} "
            f"({self.failures} failure(s) in a row; the last, {self.cause}, met by {self.by})"
        )


def read(scratch: str | Path, site: str, remote: str) -> State | None:
    """The site's count for ``remote``; None while the store is answering."""
    try:
        d = json.loads(paths.store_down(scratch, site, remote).read_text())
        return State(
            remote=remote,
            failures=int(d.get("failures", 1)),
            since=str(d.get("since", "?")),
            last=str(d.get("last", d.get("since", "?"))),
            cause=str(d.get("cause", "?")),
            by=str(d.get("by", "?")),
            checked_epoch=float(d.get("checked_epoch", 0.0)),
            since_epoch=float(d.get("since_epoch", 0.0)),
            url=str(d.get("url", "")),
        )
    except (OSError, ValueError, TypeError):
        return None


def failed(
    scratch: str | Path,
    site: str,
    remote: str,
    cause: str,
    by: str,
    began_epoch: float | None = None,
    url: str = "",
) -> State:
    """Count one failure for a network cause; returns the new state. ``began_epoch``: when
    the failure began, where the step knows better than now (a stalled copy last moved
    bytes a minute before it was ended): the first failure's is the outage's ``since``."""
    old = read(scratch, site, remote)
    now, epoch = utc_now(), time.time()
    first = epoch if began_epoch is None else min(began_epoch, epoch)
    state = State(
        remote=remote,
        failures=(old.failures if old else 0) + 1,
        since=old.since if old else utc_now(first),
        last=now,
        cause=cause,
        by=by,
        checked_epoch=epoch,
        since_epoch=old.since_epoch if old else first,
        url=url,
    )
    write_json(
        paths.store_down(scratch, site, remote),
        {
            "remote": remote,
            "failures": state.failures,
            "since": state.since,
            "last": state.last,
            "cause": cause,
            "by": by,
            "checked_epoch": state.checked_epoch,
            "since_epoch": state.since_epoch,
            "url": url,
        },
    )
    return state


def answered(scratch: str | Path, site: str, remote: str) -> State | None:
    """The store answered: the count goes. Returns the outage that ended, if there was one,
    so the measurement that follows can be marked as next to it."""
    old = read(scratch, site, remote)
    paths.store_down(scratch, site, remote).unlink(missing_ok=True)
    return old


def after_outage(ended: State | None) -> dict[str, Any]:
    """The columns of the first measurement after an outage (none if there was none)."""
    if ended is None:
        return {}
    return {"outage": AFTER, "outage_since": ended.since}


def during_outage(state: State) -> dict[str, Any]:
    return {"outage": DURING, "outage_since": state.since}


def not_measured_reason(state: State, policy: Policy) -> str:
    """The error of a measurement the breaker kept from starting: what, since when, and what
    to do."""
    how = (
        f"waited {policy.wait_s:g} s for it (store_down.wait)"
        if policy.waits
        else "not tried again this run (store_down)"
    )
    return (
        f"not measured: {state.describe()}; {how}; rerun once it is back "
        "(finished measurements are kept)"
    )


def gate(
    scratch: str | Path,
    site: str,
    remote: str,
    policy: Policy,
    check: Callable[[], str | None],
    by: str,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.time,
    url: str = "",
) -> tuple[str | None, dict[str, Any]]:
    """Before a step talks to the store: whether it may, and the outage columns for its row.

    ``check()`` asks the store once (a listing) and returns the network cause of a failure,
    or None when it answered. No count: go, nothing asked. A count below the limit, or an
    open breaker not checked in this run or for ``probe_every_s``: ask once. An open breaker
    checked lately: do not ask (stop), or ask again with growing pauses until ``wait_s``
    since the outage began is spent (wait). Returns (why not, columns)."""
    state = read(scratch, site, remote)
    if state is None:
        return None, {}
    pauses = iter(PROBE_BACKOFF_S)
    while True:
        fresh = (
            state.checked_epoch >= policy.run_started_epoch
            and now() - state.checked_epoch < policy.probe_every_s
        )
        if not (state.is_open(policy) and fresh and not policy.waits):
            cause = check()
            if cause is None:
                return None, after_outage(answered(scratch, site, remote))
            state = failed(scratch, site, remote, cause, by, url=url)
        if not (policy.waits and state.is_open(policy)):
            break
        pause = next(pauses, PROBE_BACKOFF_S[-1])
        if now() - state.since_epoch + pause > policy.wait_s:
            break
        sleep(pause)
    if state.is_open(policy) or policy.waits:
        return not_measured_reason(state, policy), during_outage(state)
    return (
        f"not measured: {state.describe()}; it still did not answer one listing; "
        "rerun once it is back",
        during_outage(state),
    )


def note(
    scratch: str | Path,
    site: str,
    remote: str,
    cause: str | None,
    by: str,
    began_epoch: float | None = None,
    url: str = "",
) -> dict[str, Any]:
    """After a step's call: count a network failure, or clear the count on any answer (a
    failure for another cause, say a missing object, is an answer too). Returns the outage
    columns for a row: ``during`` for a network failure."""
    if cause:
        return during_outage(failed(scratch, site, remote, cause, by, began_epoch, url))
    answered(scratch, site, remote)
    return {}


# --- the submitting side -----------------------------------------------------------------


def opened_since(
    places: Iterable[tuple[str | Path, str, str]], policy: Policy, run_started_epoch: float
) -> State | None:
    """The first breaker of these (scratch, remote) places that opened during this run (a
    breaker left open by an earlier run is not this run's news: its first job checks the
    store again)."""
    for scratch, site, remote in places:
        state = read(scratch, site, remote)
        if state is not None and state.is_open(policy):
            if state.checked_epoch >= run_started_epoch:
                return state
    return None


def refused(scratch: str | Path, site: str, remote: str, policy: Policy) -> State | None:
    """The breaker that keeps a measurement of ``remote`` at ``site`` from starting: open,
    opened (or found still open) during this run, and ``store_down`` says stop. None: go
    (then :func:`gate` decides whether to ask the store once). Outside a run (no run spec:
    ``run_started_epoch`` 0) nothing is refused here: a job run by hand asks the store."""
    if policy.waits or not policy.run_started_epoch:
        return None
    return opened_since([(scratch, site, remote)], policy, policy.run_started_epoch)


def refusal(state: State) -> str:
    """The one line of a measurement the open breaker kept from starting."""
    return (
        f"not started: {state.describe()}; not tried again this run (store_down); "
        "rerun once it is back (finished measurements are kept)"
    )


def open_token(record: str) -> str:
    """What the ``store_open`` job of a measurement leaves when the store may be asked:
    beside the measurement's record, an input of its transfer."""
    return record.removesuffix(".json") + ".store-open"


def policy_of_run(run: Any) -> Policy:
    """The campaign's store_down as the run's spec (campaign.jobs.RunSpec) says it."""
    sd = run.store_down
    return Policy(
        after_failures=sd.after_failures,
        stall_s=sd.stall_s or 0.0,
        wait_s=sd.wait_s,
        run_started_epoch=run.run_started_epoch,
    )


class StoreDown(RuntimeError):
    """A measurement the store's open breaker kept from starting (its message: the line)."""


def store_open(spec_json: str, run_spec: str | Path, out: str | Path, log: str | Path) -> None:
    """The ``store_open`` job, run in Snakemake's own process on the submitting host just
    before its measurement would be submitted (a ``run:`` job: no Python to start, once per
    measurement): leave the token (``out``) when the store may be asked, else write the
    breaker's one line to the job's log (the terminal's failure line reads it) and fail."""
    from cloudbench.campaign.jobspec import read_run
    from cloudbench.campaign.spec import TransferSpec

    spec = TransferSpec.from_json(spec_json)
    state = refused(spec.scratch, spec.site, spec.remote, policy_of_run(read_run(run_spec)))
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    if state is not None:
        line = f"cloudbench store_open: {refusal(state)}"
        Path(log).write_text(line + "\n")
        raise StoreDown(line)
    Path(log).write_text("")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).touch()


def summary(places: Iterable[tuple[str | Path, str, str]], policy: Policy) -> list[str]:
    """One line per open breaker, for the run's last lines, each naming its site (a user
    read two alike lines ending 'at this site' and could not tell which site each was)."""
    lines = []
    for scratch, site, remote in places:
        state = read(scratch, site, remote)
        if state is not None and state.is_open(policy):
            lines.append(f"at {site}: {state.describe()}")
    return lines
