"""The launcher fans a campaign out over real ssh (OpenSSH on 127.0.0.1) in one command."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from cloudbench.campaign.model import load_campaign
from cloudbench.site.launch import SiteLaunch
from tests.infra import sshd
from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN, ROOT

pytestmark = pytest.mark.slow


def test_launch_config_errors_before_anything_runs(demo_config):
    campaign = load_campaign(demo_config)
    with pytest.raises(ValueError, match=r"sites.tursa.launch: missing host, workdir, profile"):
        SiteLaunch.of(campaign.upload_site)


def test_site_command_is_what_a_user_types():
    launch = SiteLaunch("bnl", "me@login", "/home/me/cloudbench dir", "profiles/bnl")
    shell, flag, inner = shlex.split(launch.run_command("demo"))
    assert (shell, flag) == ("bash", "-lc")  # a login shell: the site's modules and PATH
    assert inner == (
        "cd '/home/me/cloudbench dir' && snakemake --profile profiles/bnl"
        " --configfile .cloudbench/demo.yaml --config site=bnl"
    )


@pytest.mark.skipif(not sshd.available(), reason="openssh-server not installed: `make sysdeps`")
def test_launcher_runs_three_sites_over_ssh(tmp_path, demo_config):
    with (
        sshd.serve_ssh(tmp_path / "ssh") as ssh,
        serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3,
    ):
        launch = {
            "host": ssh.host,
            "port": ssh.port,
            "profile": str(ROOT / "profiles/local"),
            "snakemake": str(BIN / "snakemake"),
            "snakefile": str(ROOT / "workflow/Snakefile"),
            "options": ssh.client_options(),
        }
        demo_config.update(remote="s3t:", strategies=["plain"], repeats=1)
        demo_config["dataset"].update(files=1, size="4MiB", chunk_sizes=["1MiB"])
        demo_config["rclone"]["flags"] = []
        demo_config["sites"] = {
            name: {
                "upload": name == "tursa",
                "download": True,
                "scratch": "scratch",
                "location": loc,
                "launch": {**launch, "workdir": str(tmp_path / name)},
            }
            for name, loc in (
                ("tursa", [55.92, -3.17]),
                ("bnl", [40.87, -72.88]),
                ("anl", [41.71, -87.98]),
            )
        }
        laptop = tmp_path / "laptop"
        laptop.mkdir()
        cfg = laptop / "campaign.yaml"
        cfg.write_text(yaml.safe_dump(demo_config))
        env = {**os.environ, **s3.client_env("S3T"), "PATH": f"{BIN}:{os.environ['PATH']}"}
        run = subprocess.run(
            [sys.executable, "-m", "cloudbench", "launch", str(cfg)],
            cwd=laptop,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("[tursa] starting on root@127.0.0.1")
    ok = [line for line in lines if " ok after " in line]
    assert {line.split("]")[0][1:] for line in ok} == {"tursa", "bnl", "anl"}
    assert lines.index(next(x for x in ok if x.startswith("[tursa]"))) < min(
        lines.index(x) for x in lines if x.startswith(("[bnl] starting", "[anl] starting"))
    )
    df = pd.read_csv(laptop / "results/demo/transfers.tsv", sep="\t")
    assert len(df) == 4 and (df["status"] == "ok").all()
    assert set(df["site"]) == {"tursa", "bnl", "anl"}
    assert (laptop / "results/demo/report.html").stat().st_size > 50_000
    for site in ("tursa", "bnl", "anl"):  # each site ran in its own working directory
        assert (tmp_path / site / "results/demo/sites" / site / "published.json").exists()
