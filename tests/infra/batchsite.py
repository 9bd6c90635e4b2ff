"""Helpers shared by the scheduler and batch-site tests (test_store_down, test_walltime,
test_profiles, test_status_failures, ...): waiting for an event, a campaign's Snakemake
started in the background, a site's environment on the test Slurm, and a campaign's
transfer records read back."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.infra.slurm import SlurmCluster
from tests.infra.workflow import default_sigint, snakemake_command, snakemake_env

#: long enough that only a hang reaches it, whatever the machine's speed that day
HANG_S = 600.0


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = HANG_S) -> Any:
    """Poll ``predicate`` until it returns something true (returned); fail naming ``what``
    once ``timeout`` seconds have passed (a deadline that only a hang reaches)."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def popen_snakemake(
    workdir: Path, cfg: Path, *args: str, env: dict | None = None, profile: str = "local"
) -> subprocess.Popen:
    """The campaign's ``snakemake --profile <profile>`` started in the background, its output
    (stdout and stderr together) on a pipe, in a session of its own, Ctrl-C-able."""
    return subprocess.Popen(
        snakemake_command(workdir, cfg, *args, profile=profile),
        cwd=workdir,
        env=snakemake_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )


def site_env(cluster: SlurmCluster) -> dict[str, str]:
    """What a user at a Slurm (tursa) or PBS (tesseract) site exports before running the
    site's profile: the cluster, an account and a partition."""
    return {
        **cluster.env,
        "SBATCH_ACCOUNT": "cloudbench",
        "SBATCH_PARTITION": cluster.partition,
        "PBS_ACCOUNT": "cloudbench",
    }


def transfer_records(workdir: Path, campaign: str) -> dict[Path, dict]:
    """Every measurement's record of the campaign (not its clients' own), by path."""
    root = workdir / "results" / campaign / "sites"
    return {
        p: json.loads(p.read_text())
        for p in root.glob("*/transfers/*/*/*/*/r*.json")
        if p.parent.name != "clients"
    }
