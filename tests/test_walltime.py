"""A transfer's time left, from its scheduler (cloudbench.site.walltime), on the real Slurm:
in one allocation the tenth transfer has less left than the rule's runtime says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.slurm import SlurmCluster
from tests.infra.workflow import ROOT
from tests.test_infra_slurm import wait_until

pytestmark = pytest.mark.scheduler

PRINT_LEFT = (
    "import os, sys; sys.path.insert(0, {workflow!r}); "
    "from cloudbench.site.walltime import time_left_s; print(time_left_s(os.environ))"
)


def test_a_batch_job_reads_the_time_it_has_left(slurm_cluster: SlurmCluster, tmp_path: Path):  # noqa: F811
    out = tmp_path / "left.out"
    code = PRINT_LEFT.format(workflow=str(ROOT / "workflow"))
    # 10 minutes asked, 10 s of them spent before the job asks: a job that read what it
    # asked for (600 s), not what it has left, fails the upper bound
    script = tmp_path / "job.sh"
    program = tmp_path / "left.py"
    program.write_text(code)
    script.write_text(f"#!/bin/sh\nsleep 10\n{sys.executable} {program}\n")
    slurm_cluster.run(
        ["sbatch", "--parsable", "--time=10", "-o", str(out), str(script)], timeout=30
    )
    wait_until(lambda: out.exists() and out.read_text().strip(), 180, "the job's answer")
    left = float(out.read_text().strip().splitlines()[-1])
    assert 600 - 10 - 30 <= left <= 600 - 10 + 1, left  # squeue's %L, to the second
