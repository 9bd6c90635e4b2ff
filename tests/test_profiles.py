"""The site profiles on a real scheduler: Slurm (tursa) and PBS through qsub/qstat (tesseract).

The several-node Slurm started by the fixture is real; PBS is Slurm's torque wrappers
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
import yaml

from cloudbench.campaign.paths import CLIENT_LOGS, LOG_SUFFIX
from tests.infra.batchsite import site_env
from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.slurm import SlurmCluster
from tests.infra.workflow import (
    HANG_S,
    ROOT,
    popen_snakemake,
    snakemake,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.full, pytest.mark.scheduler, pytest.mark.slow]


def _campaign(
    tmp_path: Path, demo_config: dict, files: int, size: str, strategies=("plain",), **rclone
) -> Path:
    demo_config["dataset"].update(files=files, size=size, chunk_sizes=["2MiB"])
    demo_config["repeats"] = 1
    demo_config["strategies"] = list(strategies)  # fewer transfers: each is a batch job
    demo_config["rclone"].update(rclone or {"flags": []})
    return write_config(tmp_path, demo_config)


def _wait_running(cluster: SlurmCluster, name_part: str, timeout: float = HANG_S) -> str:
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


def _kill_mid_run(proc, cluster: SlurmCluster, workdir: Path, site: str, kill) -> tuple[int, str]:
    """Kill the download job at ``site`` the scheduler's way once its copy has started (its
    client log is there; the copy lasts 2 s, ``uploaded``); the run must end, not wait.

    Not as soon as the scheduler says the job runs: a kill 40 ms after the job was allocated
    reached Slurm before its batch script did, and the job ran on to success (s60b)."""
    started = time.time()
    logs = workdir / "results/demo/sites" / site / CLIENT_LOGS / "download"

    def copying() -> list[Path]:
        return [p for p in logs.rglob(f"r*{LOG_SUFFIX}") if p.stat().st_mtime >= started]

    try:
        wait_for(copying, f"the download's copy at {site} to start", proc=proc)
        kill(_wait_running(cluster, "download"))
        out, _ = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            cluster.run(["scancel", "-u", "root"], check=False)
    return proc.returncode, out


@pytest.fixture(scope="module")
def uploaded(slurm_cluster, tmp_path_factory) -> tuple[Path, Path, dict]:  # noqa: F811
    """One 1 MiB file, plain, uploaded at tursa without a scheduler (the data steps too):
    the campaign both killed runs go on from, each downloading at a site of its own. Every
    copy is slowed (--bwlimit 512k: 2 s a copy), so that there is a running download to
    kill: the test kills the job once its copy has started (``_kill_mid_run``). The same
    campaign file throughout, so nothing measured is measured again. The workdir, its
    campaign file and the sites' environment."""
    tmp = tmp_path_factory.mktemp("killed")
    demo = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    demo = {k: v for k, v in demo.items() if k not in ("tune", "concurrency")}
    cfg = _campaign(tmp, demo, 1, "1MiB", flags=["--bwlimit", "512k"])
    env = site_env(slurm_cluster)
    up = snakemake(tmp, cfg, "results/demo/manifest.json", "--config", "site=tursa", env=env)
    assert up.returncode == 0, up.stderr[-2000:]
    return tmp, cfg, env


def test_job_killed_by_slurm_is_failed_not_waited_on(slurm_cluster, uploaded):  # noqa: F811
    """tursa's download (a Slurm job) scancelled mid-copy: the run ends, failed."""
    tmp_path, cfg, env = uploaded
    proc = popen_snakemake(tmp_path, cfg, "--cores", "2", env=env, profile="tursa")
    returncode, out = _kill_mid_run(
        proc,
        slurm_cluster,
        tmp_path,
        "tursa",
        lambda job: slurm_cluster.run(["scancel", job.split("_")[0]]),
    )
    assert returncode != 0
    # the campaign's terminal at a Slurm site (cloudbench.site.terminal): its header, the
    # killed download in one line naming its cause, about N + 20 lines for N measurements
    failed = [ln for ln in out.splitlines() if ln.startswith("failed: rule download")]
    assert len(failed) == 1, out[-3000:]
    assert failed[0].split(": ", 2)[2].partition(" (log: ")[0].strip(), failed
    header = [ln for ln in out.splitlines() if ln.startswith("cloudbench: campaign demo at tursa")]
    assert len(header) == 1, out[-3000:]
    planned = int(header[0].split(": ")[2].split()[0])  # "<n> measurement(s) to make"
    assert len(out.splitlines()) <= planned + 20, out[-3000:]


def test_job_killed_by_pbs_is_failed_not_waited_on(slurm_cluster, uploaded):  # noqa: F811
    """tesseract's download (a PBS job, through qsub) qdel'd mid-copy: the run ends, failed."""
    tmp_path, cfg, env = uploaded

    def qdel(job: str) -> None:
        res = subprocess.run(
            ["qdel", job], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
        )
        assert res.returncode == 0, res.stderr

    proc = popen_snakemake(  # its status asked every 2 s, not a centre's 10: shorter waits
        tmp_path, cfg, "--cores", "2", "--seconds-between-status-checks", "2", env=env,
        profile="tesseract",
    )  # fmt: skip
    returncode, out = _kill_mid_run(proc, slurm_cluster, tmp_path, "tesseract", qdel)
    assert returncode != 0
    assert "failed: rule download" in out


def test_transfers_on_the_submit_host_where_nodes_cannot_reach_the_store(
    slurm_cluster,  # noqa: F811
    tmp_path,
    demo_config,
):
    """A Slurm site whose compute nodes have no route to the store: its profile says
    transfers_on: submit_host. Data steps are still batch jobs, the two files' as Slurm job
    arrays (Snakemake's words and slurmctld's records; on the test nodes, whose hostnames
    are node1..3); every transfer runs where snakemake runs, and says so."""
    cfg = _campaign(tmp_path, demo_config, 2, "1MiB")
    # the site's profile, made from the Slurm template as docs/hpc-sites.md says
    profile = tmp_path / "profile-tursa"
    shutil.copytree(Path(__file__).parents[1] / "profiles/slurm", profile)
    text = (profile / "config.yaml").read_text().replace("site=mysite", "site=tursa")
    text = text.replace("# - transfers_on=submit_host", "- transfers_on=submit_host")
    assert "- transfers_on=submit_host" in text  # the template's line, uncommented
    (profile / "config.yaml").write_text(text)
    run = snakemake(  # Snakemake's own terminal: what it submitted to Slurm, job by job
        tmp_path, cfg, "--cores", "2", "--logger-cloudbench-full", profile=str(profile),
        env=site_env(slurm_cluster), timeout=HANG_S,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout + run.stderr
    submitted = set(
        re.findall(r"has been submitted with SLURM jobid \S+ \(log: \S*rule_(\w+?)/", out)
    )
    assert "Submitted array job" in out  # data steps: batch jobs (arrays) as always
    # Slurm's own records: slurmctld allocated an array's tasks (JobId=<array>_<task>), two
    # of one array at least (the two files' generate or checksum)
    ctld = Path(slurm_cluster.log_paths["slurmctld"]).read_text()
    tasks = set(re.findall(r"JobId=(\d+)_(\d+)", ctld))
    assert any(sum(1 for j, _ in tasks if j == a) >= 2 for a in {j for j, _ in tasks}), ctld
    assert "verify" in submitted and not submitted & {"upload", "download"}, submitted
    df = pd.read_csv(tmp_path / "results/demo/transfers.tsv", sep="\t")
    assert (df["status"] == "ok").all() and len(df) == 2
    assert set(df["ran_on"]) == {"submit host"}
    assert set(df["host"]) == {socket.gethostname()}  # this machine, not a node
    steps = pd.read_csv(tmp_path / "results/demo/steps.tsv", sep="\t")
    assert set(steps[steps["step"] == "checksum"]["host"]) <= set(slurm_cluster.nodes)
