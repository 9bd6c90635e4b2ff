"""The one place cloudbench touches Snakemake's private API, and the check that it still holds.

When Snakemake is stopped (Ctrl-C to it alone), it waits for its running jobs but leaves
their outputs marked incomplete, so the next run would measure a finished transfer again.
The ``onerror`` handler (workflow/rules/common.smk) clears those marks for transfers whose
record is complete and ok. That needs three things Snakemake does not promise: the job list
of the DAG, the persistence's ``incomplete`` coroutine and its ``cleanup_metadata``.
:func:`api_problems` names any that an upgrade changed; a test calls it, so an upgrade fails
loudly in CI instead of silently re-measuring.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
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


def api_problems() -> list[str]:
    """What of the private API above the installed Snakemake no longer has ([] if all)."""
    import snakemake.api  # noqa: F401  (imports the modules below in an order that works)
    from snakemake import dag, persistence, workflow

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
    for name in ("dag", "persistence", "async_run"):
        if not hasattr(workflow.Workflow, name):
            problems.append(f"Workflow.{name} is gone")
    return problems
