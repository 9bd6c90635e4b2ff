"""A transfer's time left, from its scheduler (cloudbench.site.walltime), on the real Slurm:
in one allocation the tenth transfer has less left than the rule's runtime says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.slurm import SlurmCluster
from tests.infra.workflow import ROOT, wait_for

pytestmark = [pytest.mark.full, pytest.mark.scheduler]

LIMIT_S = 600  # --time=10
SPENT_S = 3  # what the job spends of its allocation before it asks

#: the job's start as Slurm recorded it, then the answer between two readings of the clock
PRINT_LEFT = """
import datetime, os, subprocess, sys, time
sys.path.insert(0, {workflow!r})
from cloudbench.site.walltime import time_left_s
job = os.environ["SLURM_JOB_ID"]
start = subprocess.run(["squeue", "-h", "-j", job, "-o", "%S"], capture_output=True,
                       text=True, check=True).stdout.strip()
start = datetime.datetime.fromisoformat(start).timestamp()
while time.time() < start + {spent} + 1:  # the job's work: {spent} s of its allocation
    time.sleep(0.1)
before = time.time()
left = time_left_s(os.environ)
print(start, before, time.time(), left)
"""


def test_a_batch_job_reads_the_time_it_has_left(slurm_cluster: SlurmCluster, tmp_path: Path):  # noqa: F811
    """A job of 10 minutes that has spent some seconds: the answer is what Slurm's clock
    says is left when it was asked (to its second), not the 600 s the job asked for."""
    out = tmp_path / "left.out"
    program = tmp_path / "left.py"
    program.write_text(PRINT_LEFT.format(workflow=str(ROOT / "workflow"), spent=SPENT_S))
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n{sys.executable} {program} > {out}.tmp && mv {out}.tmp {out}\n")
    slurm_cluster.run(
        ["sbatch", "--parsable", f"--time={LIMIT_S // 60}", "-o", str(tmp_path / "job.log"),
         str(script)],
        timeout=30,
    )  # fmt: skip
    wait_for(lambda: out.exists() and out.read_text().strip(), "the job's answer")
    start, before, after, left = map(float, out.read_text().split())
    assert before - start >= SPENT_S
    # squeue's %L is whole seconds of Slurm's own clock: within a second of the limit less
    # what had passed since the start when it was asked, and so below what the job asked for
    assert LIMIT_S - (after - start) - 1 <= left <= LIMIT_S - (before - start) + 1, (
        left, before - start, after - start,
    )  # fmt: skip
    assert left < LIMIT_S - 1
