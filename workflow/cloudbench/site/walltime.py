"""How long the batch job this process runs in has left, from its scheduler.

A transfer's copy is ended before the job's walltime (measure.copy.copy_timeout), and the
steps after it (the listing of what arrived, the manifest) must fit in what remains. The
rule's ``runtime`` is the job's own limit only when the transfer is the job: in one
allocation (``transfers_on: one_allocation``) every transfer is a step of one long job,
and the tenth transfer has far less left than the rule's runtime says. So the job asks
its scheduler: Slurm's ``squeue -o %L`` (time left), PBS's ``qstat -f`` (walltime limit
less walltime used). None where neither answers: the rule's runtime stands.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping

QUERY_TIMEOUT_S = 15.0


def parse_slurm_left(text: str) -> float | None:
    """Seconds in squeue's %L: ``[D-]HH:MM:SS``, ``MM:SS``; None for UNLIMITED/INVALID."""
    text = text.strip()
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text)
    if not m:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def _hms(value: str) -> float | None:
    parts = value.strip().split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    seconds = 0
    for p in parts:
        seconds = seconds * 60 + int(p)
    return float(seconds)


def parse_pbs_left(qstat_f: str) -> float | None:
    """Seconds left from ``qstat -f``'s Resource_List.walltime less resources_used.walltime
    (a job that has used none yet lists no resources_used)."""
    limit = used = None
    for line in qstat_f.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key == "Resource_List.walltime":
            limit = _hms(value)
        elif key == "resources_used.walltime":
            used = _hms(value)
    if limit is None:
        return None
    return max(0.0, limit - (used or 0.0))


def time_left_s(env: Mapping[str, str]) -> float | None:
    """Seconds the current batch job has left, or None (no batch job, or no answer)."""
    queries = (
        ("SLURM_JOB_ID", lambda j: ["squeue", "-h", "-j", j, "-o", "%L"], parse_slurm_left),
        ("PBS_JOBID", lambda j: ["qstat", "-f", j], parse_pbs_left),
    )
    for variable, command, parse in queries:
        job = env.get(variable)
        if not job:
            continue
        try:
            res = subprocess.run(
                command(job), capture_output=True, text=True, timeout=QUERY_TIMEOUT_S
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return parse(res.stdout) if res.returncode == 0 else None
    return None
