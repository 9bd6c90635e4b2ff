"""The README's commands work as written: its campaign file and the commands of "A real
campaign in four steps" run in a fresh copy of the checkout, as a new user types them.

They are planned (``-n``) rather than run: the README's campaign is the study's 10 x 3.8 GiB
at two centres' scratch paths. Running a campaign end to end, and the cleanup command exactly
as written, is tests/test_real_campaign.py's job.
"""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest
import yaml

from tests.infra.checkout import fresh_copy, readme_campaign, readme_commands
from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN


@pytest.mark.unit
def test_readme_names_its_commands():
    name, campaign = readme_campaign()
    assert name == "config/tursa-to-us.yaml" and campaign["campaign"] == "tursa-us-2026"
    commands = readme_commands()
    assert any("--report" in c for c in commands)
    assert any(c.startswith("snakemake cleanup --cores 1") for c in commands)
    assert len(commands) >= 3, commands


@pytest.mark.full
def test_readme_commands_work_as_written(tmp_path):
    """Step 3 plans (``-n``) and the cleanup runs for real, each exactly as the README
    writes it, from a fresh copy of the checkout; only the scratch paths of the README's
    campaign are moved under tmp_path, and the remote is a real S3 server."""
    checkout = fresh_copy(tmp_path / "cloudbench")
    name, campaign = readme_campaign()
    for k, site in enumerate(campaign["sites"].values()):
        site["scratch"] = str(tmp_path / f"scratch{k}")
    (checkout / name).write_text(yaml.safe_dump(campaign, sort_keys=False))
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        (s3.root / campaign["bucket"]).mkdir()
        leftover = s3.root / campaign["bucket"] / campaign["campaign"] / "data" / "x.bin"
        leftover.parent.mkdir(parents=True)
        leftover.write_bytes(b"billed")
        # step 1: the remote, defined in the environment as the README says
        env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **s3.client_env("MYS3")}
        for command in readme_commands():
            argv = shlex.split(command)
            if "--report" in argv:
                continue  # a report needs a finished campaign: test_real_campaign builds one
            plan = "cleanup" not in argv
            run = subprocess.run(
                [*argv, *(["-n"] if plan else [])], cwd=checkout, env=env,
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            said = run.stdout + run.stderr
            assert run.returncode == 0, f"{command}\n{said[-3000:]}"
            if plan:  # the study's plan: 10 files, 3 strategies, generated then uploaded
                assert "rule generate" in said and "rule upload" in said, said[-2000:]
            if not plan:  # what the cleanup removed is said on the terminal, not only logged
                assert "removed mys3:lattice-bench/tursa-us-2026/data" in said, said[-2000:]
        assert not leftover.exists()  # the cleanup removed the campaign's data
