"""Issue #37's acceptance test for scheduler status: the status command failing one call in
three for a whole campaign, on both schedulers: every measurement ok, and no two copies at a
site overlap in time.

The failing command is real: a small shell script named ``squeue`` (Slurm, the status
command of profiles/default) or ``qstat`` (PBS, called by profiles/pbs/pbs-status.py), first
on PATH for this test's Snakemake only, that fails every third call (exit 1 and a message,
as a lost controller would) and otherwise runs the real command. Slurm is the test cluster
of tests/infra/slurm.py; PBS is Slurm's torque wrappers (qsub/qstat/qdel) over it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.slurm import SlurmCluster
from tests.infra.workflow import BIN, snakemake, write_config

pytestmark = [pytest.mark.scheduler, pytest.mark.slow]
RUN_TIMEOUT = 600

#: fails calls 3, 6, 9...; every call's number and outcome go to ``<dir>/calls.log``
FLAKY = """#!/bin/sh
# {name}, failing one call in three (tests/test_status_failures.py)
dir={dir}
n=$(flock "$dir/calls.lock" sh -c 'n=$(( $(cat "$1" 2>/dev/null || echo 0) + 1 )); \
echo "$n" > "$1"; echo "$n"' sh "$dir/{name}.count")
if [ $((n % 3)) -eq 0 ]; then
    echo "{name} $n failed" >> "$dir/calls.log"
    echo "{name}: slurm_load_jobs error: Socket timed out on send/recv operation" >&2
    exit 1
fi
echo "{name} $n ran" >> "$dir/calls.log"
exec {real} "$@"
"""


def flaky_path(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A PATH with a one-in-three failing ``name`` first, and the log of its calls."""
    real = shutil.which(name)
    assert real, f"{name} not on PATH"
    folder = tmp_path / f"flaky-{name}"
    folder.mkdir()
    script = folder / name
    script.write_text(FLAKY.format(name=name, dir=folder, real=real))
    script.chmod(0o755)
    return f"{folder}:{BIN}:{os.environ.get('PATH', '')}", folder / "calls.log"


def campaign(tmp_path: Path, demo_config: dict) -> Path:
    """Four measurements of one 4 MiB file, plain, two repeats: tursa uploads twice (and
    downloads nothing), tesseract downloads twice; each copy slowed (--bwlimit 1M) to last
    about 4 s, so that an overlap, were there one, would be seconds long."""
    demo_config["dataset"].update(files=1, size="4MiB")
    demo_config["repeats"] = 2
    demo_config["strategies"] = ["plain"]
    demo_config["sites"]["tursa"]["download"] = False
    demo_config["rclone"].update(flags=["--bwlimit", "1M"])
    return write_config(tmp_path, demo_config)


def copies(workdir: Path, site: str) -> list[tuple[float, float, str]]:
    """[start, end] of every timed copy at ``site``, from its transfer records."""
    found = []
    folder = workdir / "results/demo/sites" / site / "transfers"
    for path in folder.glob("*/*/*/*/r*.json"):  # direction/remote/layout/setting/r<repeat>
        rec = json.loads(path.read_text())
        assert rec["status"] == "ok", (path, rec.get("error"))
        found.append((rec["started_epoch"], rec["started_epoch"] + rec["seconds"], path.stem))
    return sorted(found)


def assert_apart(spans: list[tuple[float, float, str]]) -> None:
    for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"{first} (until {end:.3f}) overlaps {second} (from {start:.3f})"


def failures(calls_log: Path, name: str) -> tuple[int, int]:
    """(calls that failed, calls in all) of the flaky ``name``."""
    lines = calls_log.read_text().splitlines() if calls_log.exists() else []
    mine = [ln for ln in lines if ln.startswith(f"{name} ")]
    return sum(ln.endswith(" failed") for ln in mine), len(mine)


def run(workdir: Path, cfg: Path, profile: str, env: dict) -> None:
    done = snakemake(workdir, cfg, "--cores", "2", profile=profile, env=env, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_failing_status_calls_never_free_a_site_mid_copy(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    demo_config: dict,
) -> None:
    cfg = campaign(tmp_path, demo_config)
    base = {
        **slurm_cluster.env,
        "SBATCH_ACCOUNT": "cloudbench",
        "SBATCH_PARTITION": slurm_cluster.partition,
        "PBS_ACCOUNT": "cloudbench",
    }
    # Slurm (tursa): the executor plugin's squeue fails one call in three
    path, calls = flaky_path(tmp_path, "squeue")
    run(tmp_path, cfg, "tursa", {**base, "PATH": path})
    failed, made = failures(calls, "squeue")
    assert failed >= 1 and failed == made // 3, calls.read_text()

    # PBS (tesseract, downloads only): pbs-status.py's qstat fails one call in three
    path, calls = flaky_path(tmp_path, "qstat")
    run(tmp_path, cfg, "tesseract", {**base, "PATH": path})
    failed, made = failures(calls, "qstat")
    assert failed >= 1 and failed == made // 3, calls.read_text()
    said = (tmp_path / "logs/pbs/status.log").read_text()
    # a failed call was answered from the job's exit record, or as running: never as failed
    assert ": qstat rc=1 qstat: slurm_load_jobs error" in said, said
    assert " failed:" not in said, said

    df = pd.read_csv(tmp_path / "results/demo/transfers.tsv", sep="\t")
    assert len(df) == 4 and (df["status"] == "ok").all(), df[["site", "status", "error"]]
    assert (df["attempts"] == 1).all()  # no measurement was run twice
    assert df["waited_for_slot_s"].notna().all()  # every copy held the site's slot
    for site, expected in (("tursa", 2), ("tesseract", 2)):
        spans = copies(tmp_path, site)
        assert len(spans) == expected, spans
        assert_apart(spans)


#: fails every call while ``<dir>/outage`` counts down (a status outage of K calls in a row)
OUTAGE = """#!/bin/sh
# squeue in an outage of K calls (tests/test_status_failures.py)
dir={dir}
left=$(flock "$dir/calls.lock" sh -c 'k=$(cat "$1" 2>/dev/null || echo 0); \
if [ "$k" -gt 0 ]; then echo $((k - 1)) > "$1"; fi; echo "$k"' sh "$dir/outage")
if [ "$left" -gt 0 ]; then
    echo "squeue failed" >> "$dir/calls.log"
    echo "squeue: slurm_load_jobs error: Unable to contact slurm controller" >&2
    exit 1
fi
echo "squeue ran" >> "$dir/calls.log"
exec {real} "$@"
"""
OUTAGE_CALLS = 12  # more failing calls in a row than the plugin's default 5 attempts


def status_attempts() -> int:
    """profiles/default's slurm-status-attempts, what every Slurm site runs with."""
    profile = Path(__file__).resolve().parents[1] / "profiles/default/config.yaml"
    return int(yaml.safe_load(profile.read_text())["slurm-status-attempts"])


def outage_run(
    cluster: SlurmCluster, tmp_path: Path, attempts: int
) -> tuple[subprocess.Popen, Path]:
    """A one-job Snakemake run through the slurm executor (squeue status, as in
    profiles/default) whose squeue fails OUTAGE_CALLS calls in a row while the job runs."""
    folder = tmp_path / "outage-squeue"
    folder.mkdir()
    script = folder / "squeue"
    script.write_text(OUTAGE.format(dir=folder, real=shutil.which("squeue")))
    script.chmod(0o755)
    (tmp_path / "Snakefile").write_text(
        "rule all:\n    input: 'out.txt'\n"
        "rule wait:\n    output: 'out.txt'\n    shell: 'sleep 20; echo done > {output}'\n"
    )
    env = cluster.client_env({"PATH": f"{folder}:{BIN}:{os.environ.get('PATH', '')}"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--executor", "slurm", "--jobs", "1",
         "--slurm-status-command", "squeue", "--slurm-status-attempts", str(attempts),
         "--slurm-init-seconds-before-status-checks", "5",
         "--default-resources", f"slurm_partition={cluster.partition}", "mem_mb=100",
         "runtime=5"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while "RUNNING" not in cluster.run(["squeue", "-h", "-o", "%T"], check=False).stdout:
        assert time.monotonic() < deadline and proc.poll() is None, "the job never ran"
        time.sleep(0.5)
    (folder / "outage").write_text(f"{OUTAGE_CALLS}\n")  # from now on, while the job runs
    return proc, folder / "calls.log"


def test_a_slurm_status_outage_is_waited_out(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """With the plugin's default 5 attempts, a check whose calls all fail drops the run's
    jobs from polling and the run never ends (seen by hand with outage_run(..., 5): five
    failed squeue calls, then none at all, and Snakemake still waiting 150 s later though
    its job had written out.txt); profiles/default's attempts wait the outage out."""
    assert status_attempts() > OUTAGE_CALLS
    proc, calls = outage_run(slurm_cluster, tmp_path, status_attempts())
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
            slurm_cluster.run(["scancel", "-u", "root"], check=False)
    assert proc.returncode == 0, out[-3000:]
    assert (tmp_path / "out.txt").read_text() == "done\n"
    said = calls.read_text().splitlines()
    assert said.count("squeue failed") == OUTAGE_CALLS and said[-1] == "squeue ran", said
