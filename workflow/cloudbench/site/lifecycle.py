"""What a run does when it starts and when it ends: the workflow's onstart, onerror and
onsuccess hooks (workflow/rules/common.smk) call one function each of this module.

Starting: refuse a run that cannot work (a scheduler variable unset, several clients with no
launcher, one allocation without its group setting) before anything is submitted. Ending:
name the transfers that finished while Snakemake stopped (kept: cloudbench.measure.ledger),
the stores whose breaker opened, what a stopped run leaves and what to do, one line each.
A store that stops answering needs nothing here: its jobs fail, and Snakemake's own rule
for a failed job keeps what needs them from being submitted (cloudbench.site.breaker).
Snakemake skips onerror when a run ends in an exception (Ctrl-C landing while it evaluates
a job's resources: an InputFunctionException), so :func:`started` also registers the end
at exit; whichever comes first says it, once.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudbench.campaign import jobs, paths, rounds
from cloudbench.campaign.model import Campaign, Measurement
from cloudbench.campaign.schema import stop
from cloudbench.site import breaker, jobenv


@dataclass(frozen=True)
class Run:
    """What the hooks know of the run: its campaign, where its results go, how a
    measurement's records are named (common.smk's path functions)."""

    campaign: Campaign
    results: str
    spec_path: str  # the run's spec (campaign.jobs.RunSpec; paths.run_spec)
    record: Callable[[Measurement], str]
    verify_record: Callable[[Measurement], str]
    # onerror, onsuccess or the exit said how the run ended: nothing is left to say
    ended: list[bool] = field(default_factory=list)


def store_down_policy(c: Campaign) -> breaker.Policy:
    """The campaign's store_down, as the jobs read it (cloudbench.site.breaker)."""
    sd = c.store_down
    return breaker.Policy(sd.after_failures, sd.stall_s, sd.wait_s)


def breaker_places(c: Campaign) -> list[tuple[str, str, str]]:
    """Every (scratch, site, remote) whose breaker this run's jobs keep."""
    return [(str(s.scratch), s.name, r.name) for s in c.active_sites for r in c.remotes]


def started(
    run: Run,
    workflow: Any,
    config: Mapping[str, Any],
    one_allocation: bool,
    transfer_group: str,
) -> None:
    """onstart: before any job runs or is submitted, but not on a dry run (-n needs no
    account)."""
    c = run.campaign
    # Checked where jobs are submitted; batch jobs themselves do not see the variables.
    most_clients = {
        s.name: max((m.setting.clients for m in c.measurements(s)), default=1)
        for s in c.active_sites
    }
    if no_launcher := jobenv.launcher_problem(
        config.get("launcher_required"), most_clients, os.environ
    ):
        stop(no_launcher)
    # the group components as the command line and its profiles declare them
    components = jobenv.declared_group_components(
        sys.argv[1:], os.environ, Path.cwd(), jobenv.snakemake_config_dirs(os.environ)
    )
    if components is not None and (
        problem := jobenv.group_problem(one_allocation, transfer_group, components)
    ):
        stop(problem)
    if missing := jobenv.missing_variables(config.get("required_env")):
        stop(
            f"this profile needs {', '.join(missing)} set in the environment "
            f"(e.g. export {missing[0]}=...): scheduler account/partition/queue never live in files"
        )
    jobs.write_run(run.spec_path, jobs.run(c, time.time()))
    jobenv.compile_package(Path(workflow.basedir) / "cloudbench")
    atexit.register(stopped, run)


def stopped(run: Run) -> None:
    """onerror (and the exit, see the module): name the transfers that finished while
    stopping (kept), and print the one line a stopped run ends with; done once."""
    if run.ended:
        return
    run.ended.append(True)
    say_kept_transfers(run)
    # "all measurements ok" was the word of a run that finished; this one did not
    Path(paths.status_file(run.results)).unlink(missing_ok=True)
    c = run.campaign
    for line in breaker.summary(breaker_places(c), store_down_policy(c)):
        say(f"cloudbench: {line}: its measurements there stopped")
    say_what_scratch_holds(c, finished=False)
    say(stopped_line(run))


def say(line: str, stream: Any = None) -> None:
    """One line of the run's end on the terminal (stderr), line and newline in one write:
    Snakemake's logger writes from another thread while a stopped run's hooks speak, and
    print's two writes let its line land between them ("...removes itfailed: rule upload",
    s57f's Ctrl-C)."""
    out = sys.stderr if stream is None else stream
    out.write(f"{line}\n")
    out.flush()


def succeeded(run: Run) -> None:
    """onsuccess: the run finished; the bulk data it left in scratch, if any, and why."""
    run.ended.append(True)
    say_what_scratch_holds(run.campaign, finished=True)


def say_kept_transfers(run: Run) -> None:
    """The transfers that finished while Snakemake stopped, one line each: Snakemake never
    registered them, and the next run publishes them again from the ledger rather than
    measuring them again (cloudbench.measure.ledger)."""
    from cloudbench.measure import ledger

    for m in owed(run):
        outputs = 2 if m.direction == "download" else 1  # the series, a manifest
        if ledger.unregistered(Path(run.record(m)), outputs) is not None:
            say(
                f"cloudbench: kept {run.record(m)}: it finished while Snakemake stopped; "
                "the next run publishes it, measuring nothing"
            )


def say_what_scratch_holds(c: Campaign, finished: bool) -> None:
    """The run's sites' bulk data still in scratch, one line each, and why (site.scratch)."""
    from cloudbench.site.scratch import bulk_left, describe

    places = [s.scratch for s in c.active_sites]
    for line in describe(bulk_left(places, c.name), finished):
        say(f"cloudbench: {line}")


def owed(run: Run) -> list[Measurement]:
    """Every transfer of the run's sites: their first rounds, then the later rounds their
    searches asked for in the states the run left on disk (campaign.rounds, as the input
    functions replay them from the checkpoints; a stopped run may not have measured them)."""
    c, out = run.campaign, []
    for s in c.active_sites:
        out += c.measurements(s)
        if search := rounds.of(c, s.name):
            out += rounds.later(search, rounds.on_disk(search, run.results))
    return out


def preflight_outputs_and_logs(run: Run) -> Iterator[tuple[str, str]]:
    """Every preflight of this run's sites (their own, and each remote-and-tool gate) with
    its job log: a missing output beside a log is a preflight that failed."""
    c, results = run.campaign, run.results
    for s in c.active_sites:
        yield paths.preflight(results, s.name), paths.job_log(results, s.name, "preflight")
        for r in c.remotes:
            for tool in r.tools:
                yield (
                    paths.preflight_gate(results, s.name, r.name, tool),
                    paths.job_log(results, s.name, "preflight", r.name, tool),
                )


def stopped_line(run: Run) -> str:
    """What a stopped run (Ctrl-C, a failed job) leaves, and what to do: one line."""
    from cloudbench.site.status import stopped_summary

    c = run.campaign
    return stopped_summary(
        [Path(run.record(m)) for m in owed(run)],
        [
            Path(log)
            for out, log in preflight_outputs_and_logs(run)
            if not Path(out).exists() and Path(log).exists()
        ],
        {
            Path(run.record(m)): Path(run.verify_record(m))
            for s in c.active_sites
            for m in c.measurements(s)
            if m.direction == "download"
        },
    )
