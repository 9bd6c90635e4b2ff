#!/usr/bin/env python3
"""Submit a Snakemake jobscript to PBS (cluster-generic ``submit-cmd``).

Calling convention (snakemake-executor-plugin-cluster-generic 1.0.9): the
plugin runs ``<submit-cmd> "<jobscript>"`` through a shell and takes the
*first line of stdout* as the external job id.  So nothing but the id may be
printed to stdout; everything else goes to stderr.

Why resources are read from the jobscript instead of ``{threads}``/
``{resources.mem_mb}`` placeholders in the profile: Snakemake only rewrites a
profile value to ``<profile dir>/<value>`` when the *whole* value is an
existing file, so a bare ``pbs-submit.py`` works from any cwd whereas
``pbs-submit.py -l ncpus={threads}`` would not; the jobscript's
``# properties = {...}`` line carries threads/resources for single *and*
group jobs anyway.

What gets submitted is not the jobscript itself but a small bash wrapper that
runs a copy of it, notes its start (``<token>.start``: the epoch) and writes its exit
code to ``logs/pbs/jobs/<token>.exit``.
Reason: ``qstat`` forgets finished jobs (PBS Pro needs ``-x``, Slurm's torque
wrapper has no ``-x`` and never reports an exit status), and with a status
command configured the plugin writes no success markers of its own.
``pbs-status.py`` finds both through ``logs/pbs/jobs/<jobid>.json``, which also
records the submission time and the walltime asked for: while qstat fails, a job
is running until its exit file says otherwise or its walltime (from its start)
plus a margin has passed.

qsub arguments: ``-N``, ``-o``/``-e`` (absolute, under ``logs/pbs/``), ``-V``,
one combined ``-l select=1:ncpus=T:mem=Mmb,walltime=HH:MM:00`` (Slurm's qsub
wrapper keeps only the *last* ``-l``), ``-A $PBS_ACCOUNT`` / ``-q $PBS_QUEUE``
when set.  With ``PBS_ACCOUNT_REQUIRED=1`` a missing ``PBS_ACCOUNT`` is an
error.  ``PBS_SUBMIT_DRY_RUN=1`` prints the qsub command instead (to stderr)
and a fake id.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LOG_DIR = Path("logs/pbs")  # relative to Snakemake's working directory
QSUB_TIMEOUT_S = 120
MAX_NAME_LEN = 64  # PBS Pro allows 236; stay readable and portable


class SubmitError(Exception):
    """Fatal, user-facing problem; reported as one line on stderr."""


def read_properties(jobscript_text: str) -> dict[str, Any]:
    """The JSON from Snakemake's ``# properties = {...}`` line ({} if none)."""
    for line in jobscript_text.splitlines()[:20]:
        m = re.match(r"#\s*properties\s*=\s*(\{.*\})\s*$", line)
        if m:
            try:
                props = json.loads(m.group(1))
            except ValueError:
                return {}
            return props if isinstance(props, dict) else {}
    return {}


def job_name(props: Mapping[str, Any]) -> str:
    """``smk.<rule>.<jobid>`` (``smk.group.<groupid>``), PBS-safe characters."""
    if props.get("type") == "group":
        raw = f"smk.group.{props.get('groupid', props.get('jobid', 'job'))}"
    else:
        raw = f"smk.{props.get('rule', 'job')}.{props.get('jobid', '')}".rstrip(".")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", raw)
    return name[:MAX_NAME_LEN]


def _positive_int(value: Any) -> int | None:
    try:
        n = int(float(value))
    except (TypeError, ValueError):
        return None  # e.g. unevaluated resource strings
    return n if n > 0 else None


def resource_list(props: Mapping[str, Any]) -> str:
    """One ``-l`` value: select chunks (+ walltime) from tasks/threads/mem_mb/runtime.

    A job of several clients (``tasks``) asks for one chunk of ``threads`` cores per client,
    placed on distinct nodes (``place=scatter``), so each client gets a node of its own; its
    clients are started inside the job by PBS's ``pbsdsh`` (one task per chunk), or by the
    launcher in ``$CLOUDBENCH_LAUNCHER`` (e.g. ``mpiexec -n {n} --ppn 1 {command}``).
    """
    resources = props.get("resources") or {}
    ncpus = _positive_int(props.get("threads")) or 1
    tasks = _positive_int(resources.get("tasks")) or 1
    chunk = f"select={tasks}:ncpus={ncpus}"
    mem_mb = _positive_int(resources.get("mem_mb"))
    if mem_mb:
        chunk += f":mem={mem_mb}mb"
    if tasks > 1:
        chunk += ",place=scatter"
    runtime = _positive_int(resources.get("runtime"))  # minutes
    if runtime:
        chunk += f",walltime={runtime // 60:02d}:{runtime % 60:02d}:00"
    return chunk


def account_from_env(env: Mapping[str, str]) -> str:
    """``$PBS_ACCOUNT`` ('' if unset); SubmitError if required but missing."""
    account = env.get("PBS_ACCOUNT", "").strip()
    if env.get("PBS_ACCOUNT_REQUIRED", "") == "1" and not account:
        raise SubmitError(
            "PBS_ACCOUNT_REQUIRED=1 but PBS_ACCOUNT is not set: "
            "export PBS_ACCOUNT=<budget code> before running snakemake"
        )
    return account


def build_qsub_args(
    props: Mapping[str, Any],
    script: Path,
    stdout_path: Path,
    stderr_path: Path,
    env: Mapping[str, str],
) -> list[str]:
    """Full qsub argv.  Raises SubmitError if a required account is missing."""
    account = account_from_env(env)
    args = [
        "qsub",
        "-N",
        job_name(props),
        "-o",
        str(stdout_path),
        "-e",
        str(stderr_path),
        "-V",  # jobs must see the submitting env (PATH to snakemake, conda...)
        "-l",
        resource_list(props),
    ]
    if account:
        args += ["-A", account]
    queue = env.get("PBS_QUEUE", "").strip()
    if queue:
        args += ["-q", queue]
    return args + [str(script)]


def walltime_s(props: Mapping[str, Any]) -> int | None:
    """The walltime asked for (``runtime`` minutes), in seconds: pbs-status.py's deadline."""
    runtime = _positive_int((props.get("resources") or {}).get("runtime"))
    return runtime * 60 if runtime else None


def start_file_of(exit_file: Path) -> Path:
    """Where the wrapper writes the epoch it started at, beside its exit file."""
    return exit_file.with_suffix(".start")


def wrapper_script(interpreter: list[str], jobscript: Path, exit_file: Path) -> str:
    """Bash script that notes its start, runs the jobscript and records its exit code."""
    q = shlex.quote
    tmp = exit_file.with_name(exit_file.name + ".tmp")
    start = start_file_of(exit_file)
    run = " ".join(q(a) for a in interpreter + [str(jobscript)])
    return (
        "#!/bin/bash\n"
        "# Generated by pbs-submit.py: note the start, run the Snakemake jobscript, then\n"
        "# record its exit code for pbs-status.py (qstat forgets finished jobs).\n"
        f"date +%s > {q(str(start))}\n"
        f"{run}\n"
        "rc=$?\n"
        f"printf '%s\\n' \"$rc\" > {q(str(tmp))} && mv -f {q(str(tmp))} {q(str(exit_file))}\n"
        'exit "$rc"\n'
    )


def interpreter_of(jobscript_text: str) -> list[str]:
    """The jobscript's ``#!`` interpreter (Snakemake uses ``#!/bin/sh``)."""
    first = jobscript_text.splitlines()[0] if jobscript_text else ""
    if first.startswith("#!") and first[2:].strip():
        return shlex.split(first[2:].strip())
    return ["/bin/sh"]


def record_path(jobs_dir: Path, jobid: str) -> Path:
    """Where pbs-status.py looks up what ``jobid`` was (shared with it)."""
    return jobs_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", jobid) + ".json")


def submit(jobscript: Path, env: Mapping[str, str]) -> str:
    """Prepare wrapper + logs, run qsub, write the id record; return the id."""
    account_from_env(env)  # fail before creating any file
    text = jobscript.read_text()
    props = read_properties(text)
    log_dir = (Path.cwd() / LOG_DIR).resolve()  # PBS jobs start in $HOME
    jobs_dir = log_dir / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    name = job_name(props)
    token = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    # a copy, so queued jobs survive Snakemake removing .snakemake/tmp.*
    script_copy = jobs_dir / f"{token}.jobscript"
    shutil.copyfile(jobscript, script_copy)
    exit_file = jobs_dir / f"{token}.exit"
    wrapper = jobs_dir / f"{token}.sh"
    wrapper.write_text(wrapper_script(interpreter_of(text), script_copy, exit_file))
    wrapper.chmod(0o755)
    out = log_dir / f"{name}.{token}.out"
    err = log_dir / f"{name}.{token}.err"
    args = build_qsub_args(props, wrapper, out, err, env)

    if env.get("PBS_SUBMIT_DRY_RUN") == "1":
        print(shlex.join(args), file=sys.stderr)
        jobid = f"dryrun-{token}"
    else:
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=QSUB_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SubmitError(f"qsub failed: {exc}") from None
        lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
        if proc.returncode != 0 or not lines:
            detail = " | ".join((proc.stdout + proc.stderr).split("\n")).strip()
            raise SubmitError(f"qsub exited {proc.returncode}: {detail}")
        jobid = lines[0]
    record = {
        "jobid": jobid,
        "token": token,
        "name": name,
        "exit_file": str(exit_file),
        "start_file": str(start_file_of(exit_file)),
        "walltime_s": walltime_s(props),
        "wrapper": str(wrapper),
        "jobscript": str(script_copy),
        "stdout": str(out),
        "stderr": str(err),
        "submitted": time.time(),
        "qsub": args,
    }
    record_path(jobs_dir, jobid).write_text(json.dumps(record, indent=1))
    return jobid


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: pbs-submit.py JOBSCRIPT", file=sys.stderr)
        return 2
    try:
        jobid = submit(Path(argv[-1]), os.environ)
    except (SubmitError, OSError) as exc:
        print(f"pbs-submit.py: error: {exc}", file=sys.stderr)
        return 1
    print(jobid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
