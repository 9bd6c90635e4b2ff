"""The test Slurm cluster does what the project's scheduler tests rely on: it is up with
its logs where they are read, its nodes are distinct hosts, a job's nested srun finds the
cluster, and the PBS stand-in (torque's qsub/qstat over it, a TaskProlog, pbsdsh) gives a
job what PBS gives it and answers qstat as pbs-status.py reads it. Slurm's own features
(arrays, scancel, the slurm executor plugin) are exercised by the campaigns that use them
(tests/test_status_failures.py), not tested here."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.infra import fixtures
from tests.infra.slurm import PBS_BIN, PBS_STANDIN_VARIABLE, SlurmCluster
from tests.infra.workflow import wait_for

slurm_cluster = fixtures.slurm_cluster  # the session fixture, visible to this module

pytestmark = [pytest.mark.full, pytest.mark.scheduler]

needs_torque = pytest.mark.skipif(
    shutil.which("qsub") is None,
    reason="slurm-wlm-torque not installed: run `make sysdeps` (apt-get)",
)


def test_cluster_properties(slurm_cluster: SlurmCluster) -> None:
    assert slurm_cluster.cores >= 1
    assert slurm_cluster.env["SLURM_CONF"] == str(slurm_cluster.conf_path)
    for name in ("munged", "slurmctld", *(f"slurmd@{n}" for n in slurm_cluster.nodes)):
        assert slurm_cluster.log_paths[name].exists(), name
    out = slurm_cluster.run(["sinfo", "-h", "-o", "%P %t"]).stdout.split()
    assert out[0] == f"{slurm_cluster.partition}*"


def test_tasks_land_on_distinct_nodes_with_their_own_hostname(slurm_cluster: SlurmCluster) -> None:
    """Each slurmd is a node of its own: srun --nodes=3 gives three node names, each task
    seeing its node's name both from Slurm and from hostname (its own UTS namespace)."""
    n = len(slurm_cluster.nodes)
    out = slurm_cluster.run(
        ["srun", f"--nodes={n}", "--ntasks-per-node=1", "sh", "-c",
         'echo "$SLURM_PROCID $SLURMD_NODENAME $(hostname)"'],
        timeout=60,
    ).stdout  # fmt: skip
    rows = sorted(line.split() for line in out.splitlines())
    assert rows == [[str(k), node, node] for k, node in enumerate(slurm_cluster.nodes)]


@needs_torque
def test_pbs_jobs_get_pbs_variables_and_pbsdsh_starts_a_task_per_chunk(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """The PBS stand-in (torque qsub over Slurm, a TaskProlog, pbsdsh played by srun: no PBS
    server runs here) gives a job what PBS Pro gives it: PBS_JOBID, PBS_JOBNAME,
    PBS_O_WORKDIR, a PBS_NODEFILE with a line per chunk of select=2, and pbsdsh tasks on
    those nodes, each with its PBS_VNODENUM."""
    out_file = tmp_path / "seen.txt"
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"env | grep ^PBS_ | sort > {out_file}.tmp\n"
        f"sed 's/^/node: /' $PBS_NODEFILE >> {out_file}.tmp\n"
        "pbsdsh -- sh -c 'echo task: $PBS_VNODENUM $(hostname)' | sort >> "
        f"{out_file}.tmp\nmv {out_file}.tmp {out_file}\n"
    )
    env = slurm_cluster.client_env(
        {PBS_STANDIN_VARIABLE: "1", "PATH": f"{PBS_BIN}:{os.environ['PATH']}"}
    )
    job = slurm_cluster.run(
        ["qsub", "-V", "-N", "pbsjob", "-l", "select=2:ncpus=1,place=scatter,walltime=00:05:00",
         str(script)],
        env=env, cwd=tmp_path,
    ).stdout.split()[0]  # fmt: skip
    wait_for(out_file.exists, "the PBS job's output")
    seen = out_file.read_text().splitlines()
    assert f"PBS_JOBID={job}" in seen and "PBS_JOBNAME=pbsjob" in seen
    assert f"PBS_O_WORKDIR={tmp_path}" in seen
    nodes = [line.removeprefix("node: ") for line in seen if line.startswith("node: ")]
    assert len(nodes) == 2 and len(set(nodes)) == 2
    assert [line for line in seen if line.startswith("task: ")] == [
        f"task: {k} {node}" for k, node in enumerate(nodes)
    ]


def test_nested_srun_without_slurm_conf(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """The slurm executor's jobstep plugin drops SLURM_CONF before srun."""
    if not slurm_cluster.nested_srun_ok:
        pytest.skip("/etc/slurm/slurm.conf exists; nested srun would use it")
    out_file = tmp_path / "srun.out"
    slurm_cluster.run(
        [
            "sbatch",
            "-o",
            str(out_file),
            "--wrap",
            "env -u SLURM_CONF srun -n1 echo nested-ok",
        ]
    )
    wait_for(
        lambda: out_file.exists() and "nested-ok" in out_file.read_text(),
        f"nested srun output (got {out_file.read_text() if out_file.exists() else None!r})",
    )


@needs_torque
def test_qsub_and_qstat(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\necho torque-ok\n")
    out = slurm_cluster.run(
        [
            "qsub",
            "-N",
            "torquetest",
            "-l",
            "select=1:ncpus=1:mem=100mb,walltime=00:05:00",
            "-o",
            str(tmp_path / "job.out"),
            "-e",
            str(tmp_path / "job.err"),
            str(script),
        ]
    )
    job = out.stdout.strip().splitlines()[0]
    assert job.isdigit(), out.stdout

    def state() -> str:
        full = slurm_cluster.run(["qstat", "-f", job]).stdout
        assert f"Job Id:\t{job}" in full
        assert "Job_Name = torquetest" in full
        return next(
            line.split("=", 1)[1].strip()
            for line in full.splitlines()
            if line.strip().startswith("job_state")
        )

    assert state() in {"Q", "R", "C"}
    wait_for(lambda: state() == "C", "qstat job_state C")
    assert (tmp_path / "job.out").read_text().strip() == "torque-ok"
    # Slurm's wrapper: unknown ids exit 153 like Torque's "Unknown Job Id"
    assert slurm_cluster.run(["qstat", "-f", "99999999"], check=False).returncode == 153
