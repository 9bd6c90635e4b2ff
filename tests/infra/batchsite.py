"""Helpers shared by the scheduler and batch-site tests (test_store_down, test_walltime,
test_profiles, test_status_failures, ...): waiting for an event, a campaign's Snakemake
started in the background, a site's environment on the test Slurm, and a campaign's
transfer records read back."""

from __future__ import annotations

import json
from pathlib import Path

from tests.infra.slurm import SlurmCluster


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
