"""The site profiles on a real scheduler: Slurm (tursa) and PBS through qsub/qstat (tesseract).

The single-node Slurm started by the fixture is real; PBS is Slurm's torque wrappers
(qsub/qstat/qdel), the closest to PBS Pro that runs here. Only account, partition and cores
are overridden for this machine, as a user at a new site would.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.slurm import SlurmCluster
from tests.infra.workflow import snakemake, snakemake_command, snakemake_env, write_config

pytestmark = [pytest.mark.scheduler, pytest.mark.slow]
RUN_TIMEOUT = 900


def _env(cluster: SlurmCluster) -> dict[str, str]:
    return {
        **cluster.env,
        "SBATCH_ACCOUNT": "cloudbench",
        "SBATCH_PARTITION": cluster.partition,
        "PBS_ACCOUNT": "cloudbench",
    }


def _campaign(
    tmp_path: Path, demo_config: dict, files: int = 2, strategies=("plain", "chunked"), **rclone
) -> Path:
    demo_config["dataset"].update(files=files, size=f"{3 * files}MiB", chunk_sizes=["2MiB"])
    demo_config["repeats"] = 1
    demo_config["strategies"] = list(strategies)  # fewer transfers: each is a batch job
    demo_config["rclone"].update(rclone or {"flags": []})
    return write_config(tmp_path, demo_config)


def _popen(workdir: Path, cfg: Path, profile: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        snakemake_command(workdir, cfg, "--cores", "2", profile=profile),
        cwd=workdir,
        env=snakemake_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_running(cluster: SlurmCluster, name_part: str, timeout: float = 300) -> str:
    """The id of a running job whose name or comment mentions ``name_part``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = cluster.run(["squeue", "-h", "-t", "R", "-o", "%i|%j|%k"], check=False).stdout
        for line in out.splitlines():
            job_id, name, comment = (line.split("|") + ["", ""])[:3]
            if name_part in name or name_part in comment:
                return job_id
        time.sleep(0.5)
    raise AssertionError(f"no running job for {name_part}")


def _kill_mid_run(proc, cluster: SlurmCluster, rule: str, kill) -> tuple[int, str]:
    """Kill the running job of ``rule`` the scheduler's way; the run must end, not wait."""
    try:
        kill(_wait_running(cluster, rule))
        out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            cluster.run(["scancel", "-u", "root"], check=False)
    return proc.returncode, out


def test_demo_through_tursa_then_tesseract(slurm_cluster, tmp_path, demo_config):  # noqa: F811
    # chunked only: every step kind still goes through both schedulers (arrays of data
    # steps, transfers, reassembly, verify); plain transfers through Slurm are the two
    # tests below and tests/test_scale.py, and each batch stage here costs ~12 s of polling
    cfg = _campaign(tmp_path, demo_config, strategies=("chunked",))
    env = _env(slurm_cluster)
    tursa = snakemake(tmp_path, cfg, "--cores", "2", profile="tursa", env=env, timeout=RUN_TIMEOUT)
    assert tursa.returncode == 0, tursa.stdout[-3000:] + tursa.stderr[-3000:]
    out = tursa.stdout + tursa.stderr
    assert "Submitted array job" in out
    # Slurm's own records: slurmctld allocated array tasks (JobId=<array>_<task>)
    ctld = Path(slurm_cluster.log_paths["slurmctld"]).read_text()
    tasks = set(re.findall(r"JobId=(\d+)_(\d+)", ctld))
    arrays = {job for job, _ in tasks}
    assert any(sum(1 for j, _ in tasks if j == a) >= 2 for a in arrays), ctld[-2000:]
    df = pd.read_csv(tmp_path / "results/demo/transfers.tsv", sep="\t")
    assert set(df["site"]) == {"tursa"} and (df["status"] == "ok").all()
    assert (df["connections"] == 2).all()  # threads = the --cores 2 node

    tesseract = snakemake(
        tmp_path, cfg, "--cores", "2", profile="tesseract", env=env, timeout=RUN_TIMEOUT
    )
    assert tesseract.returncode == 0, tesseract.stdout[-3000:] + tesseract.stderr[-3000:]
    assert list((tmp_path / "logs/pbs/jobs").glob("*.exit")), "nothing went through qsub"
    df = pd.read_csv(tmp_path / "results/demo/transfers.tsv", sep="\t")
    tess = df[df["site"] == "tesseract"]
    assert list(tess["layout"]) == ["chunked-2MiB"] and (tess["status"] == "ok").all()


def test_job_killed_by_slurm_is_failed_not_waited_on(slurm_cluster, tmp_path, demo_config):  # noqa: F811
    cfg = _campaign(
        tmp_path, demo_config, files=1, strategies=["plain"], flags=["--bwlimit", "300k"]
    )
    proc = _popen(tmp_path, cfg, "tursa", _env(slurm_cluster))
    returncode, out = _kill_mid_run(
        proc, slurm_cluster, "upload", lambda job: slurm_cluster.run(["scancel", job.split("_")[0]])
    )
    assert returncode != 0
    assert "failed: rule upload" in out  # one line (cloudbench.site.terminal)


def test_job_killed_by_pbs_is_failed_not_waited_on(slurm_cluster, tmp_path, demo_config):  # noqa: F811
    cfg = _campaign(tmp_path, demo_config, files=1, strategies=["plain"])
    env = _env(slurm_cluster)
    up = snakemake(
        tmp_path, cfg, "results/demo/manifest.json", "--config", "site=tursa", env=env
    )  # uploads at full speed, without a scheduler
    assert up.returncode == 0, up.stderr[-2000:]
    cfg = _campaign(  # then slow downloads, so there is a running job to kill
        tmp_path, demo_config, files=1, strategies=["plain"], flags=["--bwlimit", "300k"]
    )

    def qdel(job: str) -> None:
        res = subprocess.run(
            ["qdel", job], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
        )
        assert res.returncode == 0, res.stderr

    proc = _popen(tmp_path, cfg, "tesseract", env)
    returncode, out = _kill_mid_run(proc, slurm_cluster, "download", qdel)
    assert returncode != 0
    assert "failed: rule download" in out


def test_transfers_on_the_submit_host_where_nodes_cannot_reach_the_store(
    slurm_cluster,  # noqa: F811
    tmp_path,
    demo_config,
):
    """A Slurm site whose compute nodes have no route to the store: its profile says
    transfers_on: submit_host. Data steps are still batch jobs (on the test nodes, whose
    hostnames are node1..3); every transfer runs where snakemake runs, and says so."""
    cfg = _campaign(tmp_path, demo_config, files=2, strategies=("plain",))
    # the site's profile, made from the Slurm template as docs/hpc-sites.md says
    profile = tmp_path / "profile-tursa"
    shutil.copytree(Path(__file__).parents[1] / "profiles/slurm", profile)
    text = (profile / "config.yaml").read_text().replace("site=mysite", "site=tursa")
    text = text.replace("# - transfers_on=submit_host", "- transfers_on=submit_host")
    assert "- transfers_on=submit_host" in text  # the template's line, uncommented
    (profile / "config.yaml").write_text(text)
    run = snakemake(
        tmp_path, cfg, "--cores", "2", profile=str(profile), env=_env(slurm_cluster),
        timeout=RUN_TIMEOUT,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout + run.stderr
    submitted = set(
        re.findall(r"has been submitted with SLURM jobid \S+ \(log: \S*rule_(\w+?)/", out)
    )
    assert "Submitted array job" in out  # data steps: batch jobs (arrays) as always
    assert "verify" in submitted and not submitted & {"upload", "download"}, submitted
    df = pd.read_csv(tmp_path / "results/demo/transfers.tsv", sep="\t")
    assert (df["status"] == "ok").all() and len(df) == 2
    assert set(df["ran_on"]) == {"submit host"}
    assert set(df["host"]) == {socket.gethostname()}  # this machine, not a node
    steps = pd.read_csv(tmp_path / "results/demo/steps.tsv", sep="\t")
    assert set(steps[steps["step"] == "checksum"]["host"]) <= set(slurm_cluster.nodes)
