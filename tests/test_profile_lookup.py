"""`make profiles`, then `snakemake --profile tursa` / `--profile tesseract` as typed.

Snakemake looks a bare profile name up in $XDG_CONFIG_HOME/snakemake, never in profiles/;
`make profiles` links the site profiles there. From the checkout, Snakemake also applies the
workflow profile profiles/default by itself, and its top-level keys replace the site
profile's: the two layers must never share a key, or the site's value is silently lost.
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.infra.checkout import fresh_copy
from tests.infra.workflow import BIN, ROOT

SITES = {"tursa": "slurm", "tesseract": "pbs"}  # site -> its template
SUBMITTING = {"sbatch", "srun", "salloc", "scancel", "qsub", "qdel"}
# The Slurm plugin queries scontrol/sinfo/sacct whenever it is loaded, local runs included.
QUERYING = {"squeue", "sacct", "sacctmgr", "sshare", "sinfo", "scontrol", "qstat"}
DUMMY_ENV = {
    "SBATCH_ACCOUNT": "dummy-account",
    "SBATCH_PARTITION": "dummy-partition",
    "PBS_ACCOUNT": "dummy-project",
}


def _profile(name: str) -> dict:
    return yaml.safe_load((ROOT / "profiles" / name / "config.yaml").read_text())


def _setting_lines(name: str) -> int:
    text = (ROOT / "profiles" / name / "config.yaml").read_text()
    return sum(1 for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))


def fake_schedulers(bindir: Path) -> None:
    """Scheduler commands that only record being called (and fail), in the file
    $SCHEDULER_CALLS names: each Snakemake run of this file its own."""
    bindir.mkdir(parents=True)
    for cmd in SUBMITTING | QUERYING:
        exe = bindir / cmd
        exe.write_text(f'#!/bin/sh\necho "{cmd} $*" >> "$SCHEDULER_CALLS"\nexit 1\n')
        exe.chmod(0o755)


def job_blocks(out: str, rule: str) -> list[str]:
    """The dry run's description of every job of ``rule``."""
    blocks, current = [], None
    for line in out.splitlines():
        if re.match(r"^(local)?rule \w+:$", line) or line.startswith("Job stats:"):
            current = [line] if line in (f"rule {rule}:", f"localrule {rule}:") else None
            if current is not None:
                blocks.append(current)
        elif current is not None:
            current.append(line)
    return ["\n".join(b) for b in blocks]


def job_counts(out: str) -> dict[str, int]:
    table = out.split("Job stats:", 1)[1].split("Reasons:", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def transfers_per_direction(config: dict) -> int:
    """Measurements one site makes in one direction: layouts x repeats x remotes."""
    strategies = config["strategies"]
    layouts = sum(
        len(config["dataset"]["chunk_sizes"]) if s == "chunked" else 1 for s in strategies
    )
    return layouts * config["repeats"] * len(config.get("remotes") or [config["remote"]])


def empty_home(tmp: Path) -> dict[str, str]:
    """An empty config home (and HOME), so nothing outside ``tmp`` is read or written."""
    home = tmp / "home"
    (home / ".config").mkdir(parents=True)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


@pytest.fixture
def xdg(tmp_path: Path) -> dict[str, str]:
    return empty_home(tmp_path)


def make_profiles(checkout: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(checkout), "profiles"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def linked_copy(tmp_path: Path, xdg: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """A fresh copy after `make profiles`, and the environment to run it in (fake
    schedulers first on PATH, no scheduler variables)."""
    checkout = fresh_copy(tmp_path / "cloudbench")
    assert not (checkout / ".venv").exists()  # make profiles needs no venv
    linked = make_profiles(checkout, xdg)
    assert linked.returncode == 0, linked.stdout + linked.stderr
    store = Path(xdg["XDG_CONFIG_HOME"]) / "snakemake"
    assert sorted(linked.stdout.splitlines()) == sorted(
        f"linked   {site}: {store / site} -> {checkout / 'profiles' / site}" for site in SITES
    )  # one line per site; templates, local and the workflow profile are not linked
    assert sorted(p.name for p in store.iterdir()) == sorted(SITES)
    fake_schedulers(tmp_path / "fakebin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "PBS_"))}
    env.update(xdg, PATH=f"{tmp_path / 'fakebin'}:{BIN}:{os.environ['PATH']}")
    return checkout, env


@dataclass
class Typed:
    """A ``snakemake --profile <site>`` command typed in the linked copy: what it said, and
    the scheduler commands it called."""

    run: subprocess.CompletedProcess
    calls: Path

    @property
    def out(self) -> str:
        return self.run.stdout + self.run.stderr

    def submitted(self) -> list[str]:
        called = self.calls.read_text().splitlines() if self.calls.exists() else []
        return [c for c in called if c.split()[0] in SUBMITTING]


#: The commands this file's quick tests type, by name: (site, extra environment, -n?)
TYPED = {
    "tursa -n": ("tursa", DUMMY_ENV, True),
    "tesseract -n": ("tesseract", {}, True),
    "tursa -n, no variables": ("tursa", {}, True),
    "tursa, no variables": ("tursa", {}, False),
}


@pytest.fixture(scope="module")
def typed(tmp_path_factory) -> tuple[Path, dict[str, Typed]]:
    """One fresh copy after `make profiles`, and every command of ``TYPED`` run in it at
    once (a Snakemake process each: three dry runs, which take no lock, and one run that
    stops before it submits or runs anything), each logging its scheduler calls apart."""
    tmp = tmp_path_factory.mktemp("profiles")
    checkout, env = linked_copy(tmp, empty_home(tmp))

    def run(name: str) -> Typed:
        site, more, dry = TYPED[name]
        calls = tmp / f"scheduler-calls {name}.log"
        done = subprocess.run(
            ["snakemake", "--profile", site, *(["-n"] if dry else [])],
            cwd=checkout,
            env={**env, **more, "SCHEDULER_CALLS": str(calls)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        return Typed(done, calls)

    with ThreadPoolExecutor(len(TYPED)) as pool:
        return checkout, dict(zip(TYPED, pool.map(run, TYPED), strict=True))


@pytest.mark.quick
def test_make_profiles_then_bare_profile_names_plan_the_default_campaign(typed):
    """Each site's bare profile name plans the demo with its own layers; tursa (Slurm) with
    the scheduler's variables set, tesseract (PBS) with none: a PBS site's dry run needs no
    account (a Slurm site's without one: the next test)."""
    checkout, runs = typed
    config = yaml.safe_load((checkout / "config" / "config.yaml").read_text())
    n = transfers_per_direction(config)
    plans = {}
    for site in SITES:
        run = runs[f"{site} -n"]
        assert run.run.returncode == 0, run.out[-3000:]
        assert f"Using profiles {site} and workflow specific profile profiles/default" in (
            run.out
        ), run.out[:2000]
        assert not run.submitted()  # -n submits nothing
        plans[site] = run.out

    tursa, tesseract = plans["tursa"], plans["tesseract"]
    counts = job_counts(tursa)
    assert counts["upload"] == n and counts["download"] == n, counts
    assert counts["generate"] == config["dataset"]["files"], counts
    uploads = job_blocks(tursa, "upload")
    assert len(uploads) == n
    for block in uploads:  # site layer: 128-core node, account; workflow layer: resources
        assert "threads: 128" in block, block
        assert "slurm_account=dummy-account" in block and "slurm_partition=dummy-partition" in block
        assert "mem_mb=16000" in block and "runtime=720" in block and "network=1" in block

    counts = job_counts(tesseract)
    assert "upload" not in counts and counts["download"] == n, counts  # a download-only site
    downloads = job_blocks(tesseract, "download")
    assert len(downloads) == n
    for block in downloads:
        assert "threads: 24" in block, block
        assert "mem_mb=16000" in block and "runtime=720" in block and "network=1" in block
        assert "slurm_account" not in block


@pytest.mark.quick
def test_without_the_scheduler_variables_a_dry_run_plans_and_a_run_stops_before_submitting(
    typed,
):
    """A Slurm site without SBATCH_ACCOUNT and SBATCH_PARTITION: its dry run needs no
    account; its run stops before anything is submitted or run."""
    checkout, runs = typed
    dry = runs["tursa -n, no variables"]
    assert dry.run.returncode == 0, dry.run.stderr[-2000:]
    assert not dry.submitted()
    run = runs["tursa, no variables"]
    assert run.run.returncode != 0
    assert "SBATCH_ACCOUNT, SBATCH_PARTITION" in run.run.stderr, run.run.stderr[-2000:]
    assert not run.submitted()
    campaign = yaml.safe_load((checkout / "config" / "config.yaml").read_text())["campaign"]
    assert not (checkout / "results" / campaign).exists()  # not even the local preflight ran


@pytest.mark.quick
def test_make_profiles_refuses_foreign_profiles_and_keeps_them(tmp_path, xdg):
    store = Path(xdg["XDG_CONFIG_HOME"]) / "snakemake"
    mine = store / "tursa"
    mine.mkdir(parents=True)
    (mine / "config.yaml").write_text("executor: slurm\ncores: 4\n")
    elsewhere = tmp_path / "other-checkout" / "profiles" / "tesseract"
    elsewhere.mkdir(parents=True)
    (store / "tesseract").symlink_to(elsewhere)

    run = make_profiles(ROOT, xdg)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "Error" in run.stderr  # make says the target failed
    lines = dict(line.split(":", 1) for line in run.stdout.splitlines())
    assert lines.keys() == {"refused  tursa", "refused  tesseract"}, run.stdout
    assert f"{mine} is a directory that is not ours; left as it is" in lines["refused  tursa"]
    assert f"links to {elsewhere}, not to this checkout" in lines["refused  tesseract"]
    assert (mine / "config.yaml").read_text() == "executor: slurm\ncores: 4\n"
    assert not mine.is_symlink()
    assert os.readlink(store / "tesseract") == str(elsewhere)


@pytest.mark.quick
def test_make_profiles_is_idempotent_and_repairs_only_its_own_links(tmp_path, xdg):
    store = Path(xdg["XDG_CONFIG_HOME"]) / "snakemake"
    first = make_profiles(ROOT, xdg)
    assert first.returncode == 0, first.stdout + first.stderr
    assert all(line.startswith("linked   ") for line in first.stdout.splitlines())
    links = {p.name: os.readlink(p) for p in store.iterdir()}
    assert links == {site: str(ROOT / "profiles" / site) for site in SITES}

    second = make_profiles(ROOT, xdg)
    assert second.returncode == 0
    assert sorted(second.stdout.splitlines()) == sorted(
        f"ok       {s}: {store / s} already links to {ROOT / 'profiles' / s}" for s in SITES
    )
    assert {p.name: os.readlink(p) for p in store.iterdir()} == links

    (store / "tursa").unlink()  # a stale link into this checkout is ours to repair
    (store / "tursa").symlink_to(ROOT / "profiles" / "slurm")
    third = make_profiles(ROOT, xdg)
    assert third.returncode == 0
    assert f"relinked tursa: {store / 'tursa'} -> {ROOT / 'profiles/tursa'}" in third.stdout
    assert os.readlink(store / "tursa") == str(ROOT / "profiles" / "tursa")


@pytest.mark.unit
@pytest.mark.parametrize("site", [*SITES, *SITES.values()])
def test_site_profiles_hold_site_facts_only(site):
    """About ten lines; no key of the workflow profile (it would silently replace it)."""
    workflow_keys = set(_profile("default"))
    keys = set(_profile(site))
    assert not keys & workflow_keys, f"profiles/{site} repeats {keys & workflow_keys}"
    assert {"executor", "cores", "config"} <= keys
    assert _setting_lines(site) <= 13, f"profiles/{site} is no longer a short copy"
    assert any(str(c).startswith("site=") for c in _profile(site)["config"])


@pytest.mark.unit
@pytest.mark.parametrize("site", SITES)
def test_sites_have_the_keys_of_their_template(site):
    assert set(_profile(site)) == set(_profile(SITES[site]))
    for name in ("cluster-generic-submit-cmd", "cluster-generic-status-cmd"):
        if name in _profile(site):  # the PBS scripts resolve beside the profile
            assert (ROOT / "profiles" / site / _profile(site)[name].split()[0]).is_file()


@pytest.mark.unit
def test_local_profile_agrees_with_the_workflow_profile():
    """local repeats the run policy (it is used from other directories too): same values."""
    local, workflow = _profile("local"), _profile("default")
    shared = set(local) & set(workflow)
    assert {"resources", "keep-going", "rerun-incomplete"} <= shared
    assert {k: local[k] for k in shared} == {k: workflow[k] for k in shared}


def _rule_bodies() -> dict[str, str]:
    """Every rule and checkpoint of the workflow, its name and its indented body."""
    found = {}
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        for m in re.finditer(
            r"^(?:rule|checkpoint) (\w+):\n((?:[ \t]+.*\n|\n)*)", smk.read_text(), re.M
        ):
            found[m[1]] = m[2]
    return found


def _local_rules() -> set[str]:
    """The rules run.smk runs on the submitting host at every site."""
    text = (ROOT / "workflow" / "rules" / "run.smk").read_text()
    block = re.search(r"^localrules:\n((?:    \w+,\n)+)", text, re.M)
    assert block, "run.smk's localrules"
    return set(re.findall(r"\w+", block[1]))


@pytest.mark.unit
def test_every_batch_job_asks_for_its_runtime():
    """A batch job without a runtime gets the partition's default, and Slurm's plugin warns
    on the campaign's terminal ("No wall time information given"): profiles/default sets
    one for every rule that is not a localrule (probe had none until 2026-11-28)."""
    batch = set(_rule_bodies()) - _local_rules() - {"all"}
    assert {"upload", "download", "probe", "generate"} <= batch, sorted(batch)
    timed = {r for r, res in _profile("default")["set-resources"].items() if "runtime" in res}
    assert batch <= timed, sorted(batch - timed)


@pytest.mark.unit
def test_every_job_run_in_snakemakes_own_process_runs_on_the_submit_host():
    """A ``run:`` job (a round's decision of repeats: auto or tune) at a batch site would be a
    batch job of its own, with a queue wait and a whole Snakemake started on a node for a
    second's reading of records (tune was, until 2026-11-28): each is a localrule, and so
    is each search's final state."""
    local = _local_rules()
    bodies = _rule_bodies()
    in_process = {name for name, body in bodies.items() if re.search(r"^    run:$", body, re.M)}
    assert {"tune", "precision", "plan"} <= in_process, sorted(in_process)
    assert in_process <= local, sorted(in_process - local)
    assert {"tune_final", "precision_final"} <= local
