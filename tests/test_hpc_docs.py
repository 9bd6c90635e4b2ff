"""The HPC section (docs/hpc-sites.md, linked from the README's step 3) works as written: its
shell blocks run, line by line, in a fresh copy of the checkout against the tests' 3-node
Slurm, as a new user at a centre would type them.

What differs from a centre, and only that: ``$EDITOR`` is a script making the edit the
page asks for (site name, cores per node), the partition is the test cluster's, and the
README's campaign (the study's 10 x 3.8 GiB) is planned (``-n``), not run; the test's own
tiny campaign is run for real through the new site's profile (the page's plan of it, its
``-n`` line, is that run: a run plans first).
"""

from __future__ import annotations

import os
import re
import subprocess

import pandas as pd
import pytest
import yaml

from tests.infra.checkout import fresh_copy, readme_campaign
from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.workflow import BIN, ROOT

PAGE = ROOT / "docs" / "hpc-sites.md"
pytestmark = [pytest.mark.scheduler, pytest.mark.full]


def shell_blocks(after: str) -> list[str]:
    """The commands of the first ```bash block after the line containing ``after``."""
    text = PAGE.read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(after) :], re.S).group(1)
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line]


def run(line: str, cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_pages_commands_at_a_slurm_site_and_adding_a_site(slurm_cluster, tmp_path):  # noqa: F811
    checkout = fresh_copy(tmp_path / "cloudbench")
    name, campaign = readme_campaign()
    for k, site in enumerate(campaign["sites"].values()):
        site["scratch"] = str(tmp_path / f"scratch{k}")
    (checkout / name).write_text(yaml.safe_dump(campaign, sort_keys=False))
    editor = tmp_path / "editor"
    editor.write_text("#!/bin/sh\nsed -i 's/^cores: 128 /cores: 2   /' \"$1\"\n")
    editor.chmod(0o755)
    env = {
        **os.environ, **slurm_cluster.env,
        "PATH": f"{BIN}:{os.environ['PATH']}", "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "EDITOR": str(editor),
    }  # fmt: skip

    # "at a Slurm site": the exports, the plan, and the README campaign's run (planned)
    for line in shell_blocks("Account, partition and queue come from the environment"):
        if line.startswith("export"):
            line = line.replace(
                "SBATCH_PARTITION=cpu", f"SBATCH_PARTITION={slurm_cluster.partition}"
            )
            for pair in line.removeprefix("export ").split():
                k, v = pair.split("=", 1)
                env[k] = v
            continue
        if "PBS_" in line or "tesseract" in line:
            continue  # the PBS half: tests/test_scale.py runs that profile through qsub
        if line.startswith("snakemake --profile tursa") and not line.endswith("-n"):
            line += " -n"  # the study's campaign: planned, not run (see the docstring)
        if line == "snakemake --profile tursa -n":
            continue  # no campaign file given: the demo's, planned below with the new site
        done = run(f"make profiles >/dev/null && {line}", checkout, env)
        assert done.returncode == 0, f"{line}\n{(done.stdout + done.stderr)[-3000:]}"
        assert "rule upload" in done.stdout + done.stderr

    # "Adding a site": every line as written, but the plan's (-n) run for real: a plan that
    # fails fails the run, and one Snakemake fewer (the new site's profile measures on the
    # 3 nodes)
    ours = checkout / "config/my-campaign.yaml"
    ours.write_text(yaml.safe_dump({
        "campaign": "hpcdocs", "remote": str(tmp_path / "remote"),
        "dataset": {"files": 2, "size": "1MiB"}, "strategies": ["plain"], "repeats": 1,
        "clients": [1, 2],
        "sites": {"mysite": {"upload": True, "download": False, "scratch": str(tmp_path / "s")}},
    }, sort_keys=False))  # fmt: skip
    plan = "snakemake --profile mysite --configfile config/my-campaign.yaml -n"
    lines = shell_blocks("**Adding a site** is a copy")
    assert lines[-1] == plan, lines  # the page's last line: the plan, run for real
    for line in lines:
        done = run(line.removesuffix(" -n") if line == plan else line, checkout, env)
        assert done.returncode == 0, f"{line}\n{(done.stdout + done.stderr)[-3000:]}"
        if line.startswith("make profiles"):
            assert "mysite" in done.stdout
    df = pd.read_csv(checkout / "results/hpcdocs/transfers.tsv", sep="\t")
    assert (df["status"] == "ok").all() and len(df) == 2
    assert df["ran_on"].str.startswith("batch job ").all()
    assert df.loc[df["clients"] == 2, "host"].iloc[0].count("node") == 2
    # a user found tool_version empty on the two-client row, and retries 0 where one had none
    assert df["tool_version"].notna().all() and df["tool_version"].nunique() == 1
    assert df["retries"].notna().all()  # rclone counts them, with one client as with two
