"""The launcher over real ssh (OpenSSH on 127.0.0.1) and a real S3 server: each site's run
goes on detached from the ssh session, and the launcher needs no live connection."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cloudbench.campaign.model import load_campaign
from cloudbench.site.driver import pid_is_driver
from cloudbench.site.launch import SiteLaunch
from tests.infra import sshd
from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN, ROOT, wait_for

# start order: a site that uploads and downloads, then one that only downloads (a third,
# downloading too, was one more detached run, Snakemake and its jobs: ~5 CPU-s)
SITES = {"tursa": [55.92, -3.17], "anl": [41.71, -87.98]}
WAIT = 600  # seconds: a whole tiny campaign, two sites, on a loaded machine
IDENTITY = ["site", "direction", "remote", "layout", "setting", "repeat", "status"]


@pytest.mark.unit
def test_launch_config_errors_before_anything_runs(demo_config):
    campaign = load_campaign(demo_config)
    with pytest.raises(ValueError, match=r"sites.tursa.launch: missing host, workdir, profile"):
        SiteLaunch.of(campaign.upload_site)


@pytest.mark.unit
def test_site_command_starts_what_a_user_types():
    launch = SiteLaunch("bnl", "me@login", "/home/me/cloudbench dir", "profiles/bnl")
    shell, flag, inner = shlex.split(launch.start_command("demo"))
    assert (shell, flag) == ("bash", "-lc")  # a login shell: the site's modules and PATH
    assert inner.startswith("cd '/home/me/cloudbench dir' || exit 1; py=$(command -v snakemake)")
    driver = shlex.split(inner.split("}; ", 1)[1])
    assert driver[:4] == ["${py%/*}/python", "-m", "cloudbench.site.driver", "start"]
    assert driver[driver.index("--") + 1 :] == shlex.split(
        "snakemake --profile profiles/bnl --configfile .cloudbench/demo.yaml --config site=bnl"
    )


def _site_conf(s3, path: Path) -> Path:
    """The site's own rclone config (its credentials stay at the site, as at a centre)."""
    prefix = "RCLONE_CONFIG_S3T_"
    lines = ["[s3t]"] + [
        f"{k.removeprefix(prefix).lower()} = {v}" for k, v in s3.client_env("S3T").items()
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _campaign(tmp_path: Path, demo_config: dict, name: str, ssh, s3) -> Path:
    """A tiny two-site campaign whose sites are working directories behind the sshd, each
    with its own rclone config (its path set over ssh). The ssh options still say
    SendEnv=RCLONE_CONFIG_*, as a user's ~/.ssh/config might: the launcher gives ssh no
    credential to send."""
    options = ssh.client_options()
    cfg = dict(demo_config, campaign=name, remote="s3t:", strategies=["plain"], repeats=1)
    cfg["dataset"] = dict(cfg["dataset"], files=1, size="1MiB", chunk_sizes=["1MiB"])
    cfg["rclone"] = dict(cfg["rclone"], flags=[])
    cfg["sites"] = {}
    for site, location in SITES.items():
        workdir = tmp_path / name / site
        conf = _site_conf(s3, workdir / "rclone.conf")
        cfg["sites"][site] = {
            "upload": site == "tursa",
            "download": True,
            "scratch": "scratch",
            "location": location,
            "launch": {
                "host": ssh.host,
                "port": ssh.port,
                "workdir": str(workdir),
                "profile": str(ROOT / "profiles/local"),
                "snakemake": str(BIN / "snakemake"),
                "snakefile": str(ROOT / "workflow/Snakefile"),
                "options": [*options, "-o", f"SetEnv=RCLONE_CONFIG={conf}"],
                "status_every": 2,
            },
        }
    laptop = tmp_path / name / "laptop"
    laptop.mkdir(parents=True)
    path = laptop / "campaign.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _laptop_env(s3) -> dict[str, str]:
    return {**os.environ, **s3.client_env("S3T"), "PATH": f"{BIN}:{os.environ['PATH']}"}


def _launch(cfg: Path, env: dict, *args: str, timeout: float = WAIT):
    return subprocess.run(
        [sys.executable, "-m", "cloudbench", "launch", str(cfg), *args],
        cwd=cfg.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _status_files(s3root: Path, campaign: str) -> dict[str, dict]:
    out = {}
    for site in SITES:
        path = s3root / "cloudbench" / campaign / "launch" / f"{site}.json"
        try:
            out[site] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out


@contextmanager
def _ending_drivers(root: Path) -> Iterator[None]:
    """The detached runs under ``root`` end with the test (their process groups: the driver,
    its snakemake and jobs), finished or not: they outlive ssh by design."""
    try:
        yield
    finally:
        for pid_file in root.glob("*/*/.cloudbench/*/*.pid"):
            pid = json.loads(pid_file.read_text()).get("pid")
            if pid and pid_is_driver(pid):
                os.killpg(pid, signal.SIGKILL)


def _table(cfg: Path, campaign: str) -> pd.DataFrame:
    df = pd.read_csv(
        cfg.parent / "results" / campaign / "transfers.tsv",
        sep="\t",
        dtype=str,
        keep_default_na=False,
    )
    return df[IDENTITY].sort_values(IDENTITY).reset_index(drop=True)


def _undisturbed(cfg: Path) -> pd.DataFrame:
    """The table an undisturbed run ends with: every measurement the campaign implies, once,
    ok (the campaign model's own list, as ``_table`` reads a run's)."""
    campaign = load_campaign(yaml.safe_load(cfg.read_text()))
    rows = [
        {
            "site": m.site,
            "direction": m.direction,
            "remote": m.remote,
            "layout": m.layout.label,
            "setting": m.setting.label,
            "repeat": str(m.repeat),
            "status": "ok",
        }
        for m in campaign.measurements()
    ]
    df = pd.DataFrame(rows, columns=IDENTITY)
    return df.sort_values(IDENTITY).reset_index(drop=True)


@pytest.mark.full
@pytest.mark.slow
@pytest.mark.skipif(not sshd.available(), reason="openssh-server not installed: `make sysdeps`")
def test_sites_finish_with_launcher_killed_and_sshd_restarted(tmp_path, demo_config):
    """The issue's acceptance test: `launch --wait` killed (SIGKILL) and the ssh server
    restarted mid-campaign; every site's run finishes, `--follow` aggregates, the status
    command reports every site, and the final table is that of an undisturbed run (every
    measurement the campaign implies, once, ok). One campaign: the undisturbed run it was
    once compared with (a second campaign, started by `launch --wait`, more site runs)
    is the campaign's own list of measurements, and `--wait` is the launcher killed."""
    with (
        sshd.serve_ssh(tmp_path / "ssh") as ssh,
        serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3,
        _ending_drivers(tmp_path),
    ):
        env = _laptop_env(s3)
        storm = _campaign(tmp_path, demo_config, "storm", ssh, s3)

        # the launcher starts every site (a line each as it starts), then follows them; its
        # lines read as it says them, into a pipe as into a terminal (PYTHONUNBUFFERED unset)
        launcher = subprocess.Popen(
            [sys.executable, "-m", "cloudbench", "launch", str(storm), "--wait", "--poll", "2"],
            cwd=storm.parent,
            env={k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        for line in launcher.stdout:  # until every site said it started (or it ended)
            lines.append(line.rstrip("\n"))
            if sum("] started (pid " in x for x in lines) == len(SITES):
                break
        assert lines[0].startswith("[tursa] starting on root@127.0.0.1"), lines
        assert [x.split("]")[0][1:] for x in lines if "] started (pid " in x] == list(SITES)
        for site in SITES:  # the site keeps its log and pid file in its working directory
            run_dir = tmp_path / "storm" / site / ".cloudbench" / "storm"
            assert json.loads((run_dir / f"{site}.pid").read_text())["how"] == "detached"

        # launching again starts no second run anywhere: one line per site says why
        again = _launch(storm, env)
        assert again.returncode == 1, again.stdout + again.stderr
        refused = [x for x in again.stdout.splitlines() if "not started: already running" in x]
        assert [x.split("]")[0][1:] for x in refused] == list(SITES), again.stdout

        def running() -> dict[str, dict] | None:  # mid-campaign: a site running
            docs = _status_files(tmp_path / "s3root", "storm")
            return docs if any(d["state"] == "running" for d in docs.values()) else None

        docs = wait_for(running, "a site's status saying running", WAIT, proc=launcher)
        assert not any(d["state"] in ("finished", "failed") for d in docs.values()), docs
        for site in SITES:  # the site's run holds no credential of the laptop's
            pid = json.loads((tmp_path / f"storm/{site}/.cloudbench/storm/{site}.pid").read_text())
            environ = Path(f"/proc/{pid['pid']}/environ").read_bytes().split(b"\0")
            assert not [v for v in environ if v.startswith(b"RCLONE_CONFIG_")], site
            assert f"RCLONE_CONFIG={tmp_path}/storm/{site}/rclone.conf".encode() in environ
        assert launcher.poll() is None  # still following when killed
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=30)
        launcher.stdout.close()
        ssh.restart()

        done = _launch(storm, env, "--follow", "--poll", "2")
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-4000:]
        assert "[aggregate] ok" in done.stdout

        shown = _launch(storm, env, "--status")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert shown.stdout.splitlines()[0] == "campaign storm: 2 sites: 2 finished"
        for site in SITES:
            line = next(x for x in shown.stdout.splitlines() if x.startswith(f"[{site}]"))
            n = 2 if site == "tursa" else 1
            assert f"finished: {n} ok, 0 failed, 0 left of {n};" in line, shown.stdout

    storm_table = _table(storm, "storm")
    assert len(storm_table) == 3 and (storm_table["status"] == "ok").all()
    pd.testing.assert_frame_equal(storm_table, _undisturbed(storm))
    assert (storm.parent / "results/storm/report.html").stat().st_size > 50_000
    for site in SITES:  # no credential went to a site's log or status
        for path in (tmp_path / "storm" / site / ".cloudbench").rglob("*"):
            if path.is_file():
                assert s3.secret not in path.read_text(errors="replace"), path
        status = tmp_path / "s3root/cloudbench/storm/launch" / f"{site}.json"
        assert s3.secret not in status.read_text()


@pytest.mark.unit
def test_an_occurrence_is_launched_as_the_campaign_file_with_it_set(tmp_path, monkeypatch):
    """--occurrence: every site runs the same occurrence of the series (docs/series.md)."""
    import yaml

    from cloudbench.campaign.model import load_campaign
    from cloudbench.site.launch import with_occurrence

    monkeypatch.chdir(tmp_path)
    src = tmp_path / "weekly.yaml"
    src.write_text(
        "campaign: weekly\nremote: scratch/r\ndataset: {files: 1, size: 1MiB}\n"
        "strategies: [plain]\n"
        "sites: {lab: {upload: true, download: true, scratch: s}}\n"
    )
    path = with_occurrence(src, "20261126T0600")
    assert path == Path("results/occurrences/weekly@20261126T0600.yaml")
    c = load_campaign(yaml.safe_load(path.read_text()))
    assert c.name == "weekly@20261126T0600" and c.series == "weekly"
    assert c.remote_prefix(c.remotes[0]).endswith("weekly@20261126T0600")
