"""One campaign through both schedulers, read by every test here: the demo's transfer steps
through the Slurm profile (tursa), then the PBS one (tesseract), with each scheduler's status
command failing one call in three the whole time (issue #37's acceptance test: every
measurement ok, and no two copies at a site overlap in time), and Slurm's, early in the
run, in an outage of many calls in a row, waited out.

The failing command is real: a small shell script named ``squeue`` (Slurm, the status
command of profiles/default) or ``qstat`` (PBS, called by profiles/pbs/pbs-status.py), first
on PATH for this test's Snakemake only, that fails every third call (exit 1 and a message,
as a lost controller would), and every call of an outage, and otherwise runs the real
command. Slurm is the test cluster of tests/infra/slurm.py; PBS is Slurm's torque wrappers
(qsub/qstat/qdel) over it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.infra.batchsite import site_env
from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.slurm import SlurmCluster
from tests.infra.terminal import full_log
from tests.infra.workflow import BIN, HANG_S, ROOT, snakemake, write_config

pytestmark = [pytest.mark.full, pytest.mark.scheduler, pytest.mark.slow]

#: fails calls first..last-1 (an outage: every call, "outage") and otherwise calls 3, 6, 9...
#: ("failed"); every call's number and outcome go to ``<dir>/calls.log``
FLAKY = """#!/bin/sh
# {name}, failing one call in three and an outage's calls (tests/test_status_failures.py)
dir={dir}
n=$(flock "$dir/calls.lock" sh -c 'n=$(( $(cat "$1" 2>/dev/null || echo 0) + 1 )); \
echo "$n" > "$1"; echo "$n"' sh "$dir/{name}.count")
if [ "$n" -ge {first} ] && [ "$n" -lt {last} ]; then
    echo "{name} $n outage" >> "$dir/calls.log"
    echo "{name}: slurm_load_jobs error: Unable to contact slurm controller" >&2
    exit 1
fi
if [ $((n % 3)) -eq 0 ]; then
    echo "{name} $n failed" >> "$dir/calls.log"
    echo "{name}: slurm_load_jobs error: Socket timed out on send/recv operation" >&2
    exit 1
fi
echo "{name} $n ran" >> "$dir/calls.log"
exec {real} "$@"
"""


#: the outage: calls OUTAGE_FROM.. in a row, more than the plugin's default 5 attempts. From
#: the second call: every call is a status check of jobs in flight, and a check's failed
#: calls are retried in the same check (max-status-checks-per-second), so the whole outage
#: falls in the run's second check, whatever the machine's speed.
OUTAGE_FROM, OUTAGE_CALLS = 2, 12


def flaky_path(tmp_path: Path, name: str, outage: int = 0) -> tuple[str, Path]:
    """A PATH with a one-in-three failing ``name`` first (its calls from OUTAGE_FROM in an
    outage of ``outage`` calls), and the log of its calls."""
    real = shutil.which(name)
    assert real, f"{name} not on PATH"
    folder = tmp_path / f"flaky-{name}"
    folder.mkdir()
    script = folder / name
    last = OUTAGE_FROM + outage
    script.write_text(FLAKY.format(name=name, dir=folder, real=real, first=OUTAGE_FROM, last=last))
    script.chmod(0o755)
    return f"{folder}:{BIN}:{os.environ.get('PATH', '')}", folder / "calls.log"


@dataclass
class Campaign:
    """What the module's one campaign left: its working directory, each run's output and
    its status command's log of calls, and the sites whose transfer records the Slurm run
    left (its table is drawn once, by the PBS run)."""

    workdir: Path
    tursa_out: str
    tesseract_out: str
    squeue_calls: Path
    qstat_calls: Path
    tursa_sites: list[str]


@pytest.fixture(scope="module")
def through_both(slurm_cluster: SlurmCluster, tmp_path_factory) -> Campaign:  # noqa: F811
    """One 2 MiB file, plain and chunked (1 MiB chunks), one repeat, each copy slowed
    (--bwlimit 1M) to last about 2 s, so that an overlap, were there one, would be seconds
    long: tursa uploads and downloads through Slurm, tesseract downloads through PBS. Every
    transfer step kind (upload, download, reassemble, verify) goes through both schedulers,
    and each site has two copies a direction that nothing but its slot keeps apart (plain's
    and chunked's); one file, not two: every kind is there with one. The data steps before
    the uploads (generate, checksum, chunk) are made first without a scheduler, as the
    campaign's own step (their target: the staged data): they hold no site's slot, and
    their batch jobs, arrays of several tasks, are test_profiles' submit-host run's and
    test_hpc_docs'. The Slurm run stops short of the report (--omit-from aggregate: the PBS
    run draws it, with both sites' rows)."""
    tmp = tmp_path_factory.mktemp("both")
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["dataset"].update(files=1, size="2MiB", chunk_sizes=["1MiB"])
    config.update(repeats=1, strategies=["plain", "chunked"])
    # the demo's search and its sweep aside: one setting each, the node's cores as threads
    config.pop("tune", None)
    config.pop("concurrency", None)
    config["rclone"].update(flags=["--bwlimit", "1M"])
    cfg = write_config(tmp, config)
    base = site_env(slurm_cluster)
    # the data, staged for upload at tursa: no scheduler, no flaky command
    staged = "results/demo/sites/tursa/steps/staged/all.txt"
    data = snakemake(tmp, cfg, staged, "--config", "site=tursa", env=base)
    assert data.returncode == 0, data.stdout[-3000:] + data.stderr[-3000:]

    # Slurm (tursa): the executor plugin's squeue fails one call in three, and OUTAGE_CALLS
    # in a row from its second call
    path, squeue_calls = flaky_path(tmp, "squeue", outage=OUTAGE_CALLS)
    tursa = snakemake(
        tmp, cfg, "--cores", "2", "--omit-from", "aggregate", profile="tursa",
        env={**base, "PATH": path}, timeout=HANG_S,
    )  # fmt: skip
    assert tursa.returncode == 0, tursa.stdout[-3000:] + tursa.stderr[-3000:]
    sites = tmp / "results/demo/sites"
    tursa_sites = sorted(p.name for p in sites.iterdir() if list(p.glob("transfers/**/r*.json")))

    # PBS (tesseract, downloads only): pbs-status.py's qstat fails one call in three; its
    # status checked every 2 s rather than a centre's 10 (a test's setting: shorter waits)
    path, qstat_calls = flaky_path(tmp, "qstat")
    tesseract = snakemake(
        tmp, cfg, "--cores", "2", "--seconds-between-status-checks", "2",
        profile="tesseract", env={**base, "PATH": path}, timeout=HANG_S,
    )  # fmt: skip
    assert tesseract.returncode == 0, tesseract.stdout[-3000:] + tesseract.stderr[-3000:]
    return Campaign(
        tmp,
        tursa.stdout + tursa.stderr,
        tesseract.stdout + tesseract.stderr,
        squeue_calls,
        qstat_calls,
        tursa_sites,
    )


def copies(workdir: Path, site: str) -> list[tuple[float, float, str]]:
    """[start, end] of every timed copy at ``site``, from its transfer records."""
    found = []
    folder = workdir / "results/demo/sites" / site / "transfers"
    for path in folder.glob("*/*/*/*/r*.json"):  # direction/remote/layout/setting/r<repeat>
        rec = json.loads(path.read_text())
        assert rec["status"] == "ok", (path, rec.get("error"))
        found.append((rec["started_epoch"], rec["started_epoch"] + rec["seconds"], str(path)))
    return sorted(found)


def assert_apart(spans: list[tuple[float, float, str]]) -> None:
    for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"{first} (until {end:.3f}) overlaps {second} (from {start:.3f})"


def outcomes(calls_log: Path, name: str) -> dict[int, str]:
    """Each call of the flaky ``name`` by its number: ran, failed (one in three) or outage."""
    lines = calls_log.read_text().splitlines() if calls_log.exists() else []
    mine = [ln.split() for ln in lines if ln.startswith(f"{name} ")]
    return {int(n): outcome for _, n, outcome in mine}


def assert_one_in_three(calls: dict[int, str], outage: range) -> None:
    """Every third call failed, and only those, outside the outage; at least one did."""
    failed = sorted(n for n, outcome in calls.items() if outcome == "failed")
    thirds = sorted(n for n in calls if n % 3 == 0 and n not in outage)
    assert failed and failed == thirds, calls


def test_failing_status_calls_never_free_a_site_mid_copy(through_both: Campaign) -> None:
    outage = range(OUTAGE_FROM, OUTAGE_FROM + OUTAGE_CALLS)
    assert_one_in_three(outcomes(through_both.squeue_calls, "squeue"), outage)
    assert_one_in_three(outcomes(through_both.qstat_calls, "qstat"), range(0))
    said = (through_both.workdir / "logs/pbs/status.log").read_text()
    # a failed call was answered from the job's exit record, or as running: never as failed
    assert ": qstat rc=1 qstat: slurm_load_jobs error" in said, said
    assert " failed:" not in said, said

    df = pd.read_csv(through_both.workdir / "results/demo/transfers.tsv", sep="\t")
    assert len(df) == 6 and (df["status"] == "ok").all(), df[["site", "status", "error"]]
    assert (df["attempts"] == 1).all()  # no measurement was run twice
    assert df["waited_for_slot_s"].notna().all()  # every copy held the site's slot
    for site, expected in (("tursa", 4), ("tesseract", 2)):
        spans = copies(through_both.workdir, site)
        assert len(spans) == expected, spans
        assert_apart(spans)


def test_demo_through_tursa_then_tesseract(
    through_both: Campaign,
    slurm_cluster: SlurmCluster,  # noqa: F811
) -> None:
    """The demo's transfer steps through both site profiles: every kind as Slurm jobs
    (Snakemake's words, and the steps' records name the nodes they ran on; the data steps
    made before were not made again), transfers with the node's cores as threads, and
    through qsub."""
    # Snakemake's own words of each submission: the run's full log (the terminal is the
    # campaign's, tests/infra/terminal.py)
    log = full_log(through_both.workdir, through_both.tursa_out)
    submitted = set(
        re.findall(r"has been submitted with SLURM jobid \S+ \(log: \S*rule_(\w+?)/", log)
    )
    kinds = {"upload", "download", "reassemble", "verify"}
    assert submitted == kinds, (submitted, log[-3000:])
    steps = pd.read_csv(through_both.workdir / "results/demo/steps.tsv", sep="\t")
    after = steps[steps["step"].isin(kinds)]
    assert set(after["step"]) == {"reassemble", "verify"}, steps
    assert set(after["host"]) <= set(slurm_cluster.nodes), steps[["step", "host"]]
    assert through_both.tursa_sites == ["tursa"]  # the Slurm run measured at tursa only
    df = pd.read_csv(through_both.workdir / "results/demo/transfers.tsv", sep="\t")
    tursa = df[df["site"] == "tursa"]
    assert len(tursa) == 4 and (tursa["status"] == "ok").all(), tursa
    assert (tursa["transfers"] == 2).all()  # threads = the --cores 2 node
    chunked = tursa[tursa["layout"] == "chunked-1MiB"]
    assert len(chunked) == 2 and (chunked["connections"] == 2).all()  # both chunks at once

    # the demo's remote is a directory, with no endpoint to probe: each probe only records
    # why, on the submitting host, never as a batch job with a queue wait (run.smk's
    # localrules), where the transfers ran as batch jobs
    probes = list((through_both.workdir / "results/demo/sites").glob("*/probe/*/*.json"))
    assert len(probes) == 4, probes  # before and after, at both sites
    for probe in map(json.loads, (p.read_text() for p in probes)):
        assert probe["status"] == "skipped" and probe["ran_on"] == "submit host", probe
    assert tursa["ran_on"].str.startswith("batch job ").all(), tursa["ran_on"]

    assert list((through_both.workdir / "logs/pbs/jobs").glob("*.exit")), "nothing via qsub"
    tess = df[df["site"] == "tesseract"]
    assert sorted(tess["layout"]) == ["chunked-1MiB", "plain"], tess
    assert (tess["status"] == "ok").all()


def status_attempts() -> int:
    """profiles/default's slurm-status-attempts, what every Slurm site runs with."""
    profile = ROOT / "profiles/default/config.yaml"
    return int(yaml.safe_load(profile.read_text())["slurm-status-attempts"])


def test_a_slurm_status_outage_is_waited_out(through_both: Campaign) -> None:
    """With the plugin's default 5 attempts, a check whose calls all fail drops the run's
    jobs from polling and the run never ends (seen by hand: five failed squeue calls, then
    none at all, and Snakemake still waiting 150 s later though its job had written
    out.txt); profiles/default's attempts wait the outage out. The Slurm run's squeue
    failed OUTAGE_CALLS calls in a row from its second call, with its jobs in flight: the
    run ended ok (the fixture), every call of the outage failed, and the next one ran."""
    assert status_attempts() > OUTAGE_CALLS
    calls = outcomes(through_both.squeue_calls, "squeue")
    outage = range(OUTAGE_FROM, OUTAGE_FROM + OUTAGE_CALLS)
    assert [calls.get(n) for n in outage] == ["outage"] * OUTAGE_CALLS, calls
    assert calls.get(outage.stop) == "ran", calls  # waited out: the first call after it ran
