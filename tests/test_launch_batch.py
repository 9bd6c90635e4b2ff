"""A site's run as a batch job (``launch.start: sbatch`` or ``qsub``) on the real
several-node Slurm (qsub/qstat: its torque wrappers, the PBS stand-in): the job runs the
site's snakemake and publishes its status; while the job is held, a second start is
refused."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cloudbench.site import driver
from tests.infra import fixtures
from tests.infra.s3 import object_on_disk, serve_s3
from tests.infra.workflow import BIN, ROOT

slurm_cluster = fixtures.slurm_cluster
WAIT = 600  # seconds: a one-site tiny campaign inside a batch job, on a loaded machine


OPTIONS = {"sbatch": ["--time=20"], "qsub": ["-l", "walltime=00:20:00"]}


def _start(workdir: Path, env: dict, how: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-m", driver.MARK, "start", "--config", ".cloudbench/batch.yaml",
        "--site", "tursa", "--how", how, "--status-every", "1",
        *(f"--batch-option={o}" for o in OPTIONS[how]),
        "--", str(BIN / "snakemake"), "--snakefile", str(ROOT / "workflow/Snakefile"),
        "--profile", str(ROOT / "profiles/local"), "--configfile", ".cloudbench/batch.yaml",
        "--config", "site=tursa",
    ]  # fmt: skip
    return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.full
@pytest.mark.scheduler
@pytest.mark.parametrize("how", ["sbatch", "qsub"])
def test_a_site_run_as_a_batch_job_reports_and_is_not_started_twice(
    tmp_path, demo_config, slurm_cluster, monkeypatch, how
):
    cfg = dict(demo_config, campaign="batch", remote="s3t:", strategies=["plain"], repeats=1)
    cfg["dataset"] = dict(cfg["dataset"], files=1, size="1MiB", chunk_sizes=["1MiB"])
    cfg["rclone"] = dict(cfg["rclone"], flags=[])
    cfg["sites"] = {"tursa": {"upload": True, "download": True, "scratch": "scratch"}}
    workdir = tmp_path / "tursa"
    (workdir / ".cloudbench").mkdir(parents=True)
    (workdir / ".cloudbench/batch.yaml").write_text(yaml.safe_dump(cfg))
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        conf = workdir / "rclone.conf"  # the site's own config: no credential in the job's env
        conf.write_text(
            "[s3t]\n"
            + "".join(
                f"{k.removeprefix('RCLONE_CONFIG_S3T_').lower()} = {v}\n"
                for k, v in s3.client_env("S3T").items()
            )
        )
        env = slurm_cluster.client_env(
            {"RCLONE_CONFIG": str(conf), "PATH": f"{BIN}:{slurm_cluster.client_env()['PATH']}"}
        )
        first = _start(workdir, env, how)
        assert first.returncode == 0, first.stdout + first.stderr
        assert first.stdout.startswith("submitted as batch job "), first.stdout
        record = json.loads((workdir / ".cloudbench/batch/tursa.pid").read_text())
        assert record["how"] == how and record["job"] in first.stdout

        again = _start(workdir, env, how)
        assert again.returncode == driver.REFUSED, again.stdout + again.stderr
        assert again.stdout.startswith(
            f"not started: already running as batch job {record['job']} "
        )

        status = tmp_path / "s3root/cloudbench/batch/launch/tursa.json"
        deadline = time.monotonic() + WAIT
        while True:
            doc = object_on_disk(status) or {}
            if doc.get("state") in ("finished", "failed"):
                break
            assert time.monotonic() < deadline, doc
            time.sleep(1)
        log = (workdir / ".cloudbench/batch/tursa.log").read_text()
        assert doc["state"] == "finished", log[-3000:]
        assert doc["job"] == record["job"] and doc["host"] in slurm_cluster.nodes
        assert doc["measurements"] == {"ok": 2, "failed": 0, "left": 0, "total": 2}
        assert s3.secret not in status.read_text() and s3.secret not in log

    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    deadline = time.monotonic() + 60
    while driver.job_active(how, record["job"]):  # the job's last seconds (its epilog)
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert driver.refusal(record, "anywhere") is None  # ended: the next launch may start one
