"""The one place cloudbench touches Snakemake's private API, and the check that it still holds.

When Snakemake is stopped (Ctrl-C to it alone), it waits for its running jobs but leaves
their outputs marked incomplete, so the next run would measure a finished transfer again.
The end of a run (cloudbench.site.lifecycle.stopped) clears those marks for transfers whose
record is complete and ok. That needs three things Snakemake does not promise: the job list
of the DAG, the persistence's ``incomplete`` coroutine and its ``cleanup_metadata``. The
workflow also reads two of the run's settings Snakemake does not document for a Snakefile
(whether jobs run in conda envs, the group components) and puts its filter on Snakemake's
logger (cloudbench.site.terminal). A run whose store stopped answering is ended through the
scheduler's own graceful stop (cloudbench.site.breaker), not a signal to itself.
:func:`api_problems` names any that an upgrade changed; a test calls it, so an upgrade fails
loudly in CI instead of silently re-measuring.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

TRANSFER_RULES = ("upload", "download")


def transfer_jobs(workflow: Any) -> Iterator[Any]:
    """The upload and download jobs of the running workflow's DAG."""
    for job in workflow.dag.jobs:
        if job.rule.name in TRANSFER_RULES:
            yield job


def marked_incomplete(workflow: Any, job: Any) -> bool:
    """Whether Snakemake holds ``job``'s outputs as incomplete (they would be re-run)."""
    return bool(workflow.async_run(workflow.persistence.incomplete(job)))


def forget_incomplete(workflow: Any, path: str) -> None:
    """Clear ``path``'s incomplete mark (what ``--cleanup-metadata`` does for one file)."""
    workflow.persistence.cleanup_metadata(path)


def uses_conda(workflow: Any) -> bool:
    """Whether this run's jobs run in conda envs (--sdm conda)."""
    from snakemake.settings.types import DeploymentMethod

    return DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method


def group_components(workflow: Any) -> Mapping[str, int]:
    """The run's ``group-components`` (how many of a group's parts one group job holds)."""
    return workflow.group_settings.group_components


def stop_scheduling(workflow: Any) -> None:
    """What SIGTERM makes Snakemake do (no job is started any more, the running ones
    finish, then the run ends as failed), called from a thread of cloudbench's own.

    Not a SIGTERM to this process: Snakemake's handler takes the scheduler's lock in the
    main thread, and the main thread holds that lock while it registers a finished job,
    so a signal that arrives then waits for a lock its own thread holds, for ever. A
    breaker opens just as a transfer job ends, so it arrived then (a store_down test hung
    with no job running, 2026-11-26). From another thread the same call waits its turn."""
    workflow.scheduler.exit_gracefully()


def logger() -> logging.Logger:
    """Snakemake's logger, whose terminal handler cloudbench.site.terminal filters."""
    from snakemake.logging import logger as snakemake_logger

    return snakemake_logger


def api_problems() -> list[str]:
    """What of the private API above the installed Snakemake no longer has ([] if all)."""
    import snakemake.api  # noqa: F401  (imports the modules below in an order that works)
    from snakemake import dag, persistence, workflow
    from snakemake import logging as snakemake_logging

    problems = []
    base = getattr(persistence, "PersistenceBase", None)
    if base is None:
        return ["snakemake.persistence.PersistenceBase is gone"]
    if not inspect.iscoroutinefunction(getattr(base, "incomplete", None)):
        problems.append("PersistenceBase.incomplete is no longer a coroutine function")
    if list(inspect.signature(base.incomplete).parameters) != ["self", "job"]:
        problems.append("PersistenceBase.incomplete no longer takes (job)")
    if not callable(getattr(base, "cleanup_metadata", None)):
        problems.append("PersistenceBase.cleanup_metadata is gone")
    if not isinstance(dag.DAG.__dict__.get("jobs"), property):
        problems.append("DAG.jobs is no longer a property")
    for name in ("dag", "persistence", "async_run", "scheduler"):
        if not hasattr(workflow.Workflow, name):
            problems.append(f"Workflow.{name} is gone")
    problems += _scheduler_problems()
    problems += _settings_problems(workflow.Workflow)
    if not isinstance(getattr(snakemake_logging, "logger", None), logging.Logger):
        problems.append("snakemake.logging.logger is no longer a logging.Logger")
    return problems


def _scheduler_problems() -> list[str]:
    """What :func:`stop_scheduling` needs of the scheduler: a graceful stop that may be
    called from any thread (it takes the scheduler's lock and wakes the scheduling loop)."""
    from snakemake.scheduling import job_scheduler

    scheduler = getattr(job_scheduler, "JobScheduler", None)
    if scheduler is None:
        return ["snakemake.scheduling.job_scheduler.JobScheduler is gone"]
    stop = getattr(scheduler, "exit_gracefully", None)
    if not callable(stop):
        return ["JobScheduler.exit_gracefully is gone"]
    if list(inspect.signature(stop).parameters) != ["self", "args"]:
        return ["JobScheduler.exit_gracefully no longer takes (*args)"]
    return []


def _settings_problems(workflow_class: type) -> list[str]:
    """What of the run's settings read above the installed Snakemake no longer has."""
    from snakemake.settings import types

    def names(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()

    problems = []
    for attr, cls, field in (
        ("deployment_settings", types.DeploymentSettings, "deployment_method"),
        ("group_settings", types.GroupSettings, "group_components"),
    ):
        if attr not in names(workflow_class):
            problems.append(f"Workflow.{attr} is gone")
        if field not in names(cls):
            problems.append(f"{cls.__name__}.{field} is gone")
    if not hasattr(types.DeploymentMethod, "CONDA"):
        problems.append("DeploymentMethod.CONDA is gone")
    return problems
