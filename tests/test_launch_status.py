"""What a launched site publishes about itself, how it is shown, and the one-run-per-site
rule (cloudbench.site.runstatus, cloudbench.site.driver, cloudbench.site.launch)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import yaml

from cloudbench.campaign import paths
from cloudbench.campaign.model import ConfigError, load_campaign
from cloudbench.records import utc_now
from cloudbench.site import runstatus
from cloudbench.site.driver import MARK, pid_is_driver, refusal
from cloudbench.site.launch import SiteLaunch, _status_code, ssh_env

NOW = 1_800_000_000.0  # a fixed "now" (2027-01-15T08:00:00Z)


def _doc(state: str, updated_ago: float, every: float = 60, **more) -> dict:
    return {
        "campaign": "demo",
        "site": "x",
        "state": state,
        "host": "login1",
        "started_utc": utc_now(NOW - 3600),
        "updated_utc": utc_now(NOW - updated_ago),
        "status_every_s": every,
        "measurements": {"ok": 3, "failed": 1, "left": 2, "total": 6},
        "last_line": "",
        "detail": "",
        **more,
    }


@pytest.mark.unit
def test_a_site_silent_too_long_is_stale_and_an_ended_one_never():
    limit = runstatus.STALE_INTERVALS * 60 + runstatus.STALE_GRACE_S
    assert not runstatus.is_stale(_doc("running", limit - 1), NOW)
    assert runstatus.is_stale(_doc("running", limit + 1), NOW)
    assert runstatus.is_stale(_doc("waiting", limit + 1), NOW)
    assert not runstatus.is_stale(_doc("finished", 10 * limit), NOW)
    assert not runstatus.is_stale(_doc("queued", 10 * limit), NOW)  # a batch queue: days
    assert not runstatus.is_stale(_doc("running", 3 * 5 + 60, every=5), NOW)
    assert runstatus.is_stale(_doc("running", 3 * 5 + runstatus.STALE_GRACE_S + 1, every=5), NOW)


@pytest.mark.unit
def test_status_shows_every_site_its_counts_and_which_went_silent():
    docs = {
        "tursa": _doc("finished", 30),
        "bnl": _doc("running", 20, last_line="[Thu Nov 26] rule download: 3 of 6 steps"),
        "anl": _doc("running", 5 * 3600),
        "ral": _doc("waiting", 10, detail="waiting for upload site tursa"),
        "cern": None,
    }
    lines = runstatus.render("demo", list(docs), docs, NOW)
    assert lines[0] == (
        "campaign demo: 5 sites: 1 finished, 1 running, 1 STALE, 1 waiting, 1 no status"
    )
    text = "\n".join(lines)
    assert "[tursa] finished: 3 ok, 1 failed, 2 left of 6; on login1, since " in text
    assert "updated 30 s ago" in text
    assert "\n        last: [Thu Nov 26] rule download: 3 of 6 steps" in text
    anl = next(x for x in lines if x.startswith("[anl]"))
    assert anl.startswith("[anl]   STALE: ") and "updated 5 h 0 min ago (last said: running)" in anl
    assert "; waiting for upload site tursa" in text
    assert "[cern]  no status on the remote yet" in text
    assert runstatus.all_ended(["tursa"], docs) and not runstatus.all_ended(list(docs), docs)


@pytest.mark.unit
def test_status_exit_says_done_failed_or_under_way():
    fin = _doc("finished", 10)
    assert _status_code(["a", "b"], {"a": fin, "b": fin}, NOW) == 0
    assert _status_code(["a", "b"], {"a": fin, "b": _doc("failed", 10)}, NOW) == 1
    assert _status_code(["a", "b"], {"a": fin, "b": _doc("running", 10**6)}, NOW) == 1  # stale
    assert _status_code(["a", "b"], {"a": fin, "b": _doc("running", 10)}, NOW) == 3
    assert _status_code(["a", "b"], {"a": fin}, NOW) == 3  # b has said nothing yet


@pytest.mark.unit
def test_a_second_run_is_refused_while_one_is_under_way():
    started = {"started_utc": "2026-11-26T09:00:00.000000Z"}
    detached = {"how": "detached", "pid": 4242, "host": "login1", **started}
    assert refusal(None, "login1") is None
    assert refusal(detached, "login1", alive=lambda pid: pid == 4242) == (
        "already running (pid 4242 on login1, since 2026-11-26T09:00:00.000000Z)"
    )
    assert refusal(detached, "login1", alive=lambda pid: False) is None  # ended: start again
    elsewhere = refusal(detached, "login2", alive=lambda pid: True)
    assert elsewhere is not None and "started on login1 (pid 4242" in elsewhere
    assert "cannot be checked from login2" in elsewhere and "remove the pid file" in elsewhere
    # from login2, the run's own last word on the remote says it ended (or that it did not)
    said = {"pid": 4242, "host": "login1", "state": "finished"}
    assert refusal(detached, "login2", published=lambda: said) is None
    running = refusal(detached, "login2", published=lambda: {**said, "state": "running"})
    assert running is not None and "cannot be checked from login2" in running
    other_run = refusal(detached, "login2", published=lambda: {**said, "pid": 99})
    assert other_run is not None and "cannot be checked from login2" in other_run
    batch = {"how": "sbatch", "job": "77", "host": "login1", **started}
    held = refusal(batch, "login2", active=lambda how, job: (how, job) == ("sbatch", "77"))
    assert held == "already running as batch job 77 (since 2026-11-26T09:00:00.000000Z)"
    assert refusal(batch, "login1", active=lambda how, job: False) is None


def _sleeper(*argv: str) -> subprocess.Popen[str]:
    """A Python that sleeps, once it runs (its first line says so: /proc shows it then)."""
    code = "import time; print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    return proc


@pytest.mark.quick
def test_only_a_live_driver_counts_as_a_run():
    """A pid file outlives its run, and the pid may be reused by another program."""
    for argv, driver in (((MARK,), True), ((), False)):
        proc = _sleeper(*argv)
        try:
            assert pid_is_driver(proc.pid) is driver
        finally:
            proc.kill()
            proc.wait(timeout=10)
        assert not pid_is_driver(proc.pid)


@pytest.mark.unit
def test_counts_come_from_the_records_on_disk(tmp_path, demo_config):
    demo_config.update(strategies=["plain"], repeats=2)
    campaign = load_campaign(demo_config)
    results = tmp_path / "results/demo"
    ms = list(campaign.measurements(campaign.upload_site))
    assert len(ms) == 4  # upload and download, two repeats
    for m, status in zip(ms, ("ok", "failed", "corrupt"), strict=False):
        record = paths.transfer_record(results, m.identity)
        (tmp_path / record).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / record).write_text(json.dumps({"status": status}))
    got = runstatus.counts(campaign, campaign.upload_site.name, results)
    assert got == {"ok": 1, "failed": 2, "left": 1, "total": 4}


@pytest.mark.unit
def test_the_last_line_is_clipped_and_keeps_no_credential(tmp_path):
    log = tmp_path / "site.log"
    secret = "s3cr3t-Value-123"
    log.write_text(f"first\nrclone said: key {secret} refused {'x' * 400}\n\n")
    line = runstatus.last_line(log, [secret])
    assert line.startswith("rclone said: key *** refused x")
    assert secret not in line and len(line) == runstatus.LAST_LINE_CHARS
    assert runstatus.last_line(tmp_path / "none.log") == ""


@pytest.mark.unit
def test_ssh_gets_no_credential_from_this_machine():
    env = {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "RCLONE_CONFIG": "/home/me/rclone.conf",
        "RCLONE_CONFIG_S3T_SECRET_ACCESS_KEY": "abcdefghijk",
        "RCLONE_CONFIG_S3T_TYPE": "s3",
        "AWS_SECRET_ACCESS_KEY": "abcdefghijk",
        "AWS_ACCESS_KEY_ID": "AKIAXXXXXXXX",
    }
    # this machine's rclone config path means nothing at a site: it goes too
    assert ssh_env(env) == {"PATH": "/usr/bin", "HOME": "/home/me"}


@pytest.mark.unit
def test_status_times_are_read_back_exactly():
    stamp = time.time()
    assert runstatus._seconds(utc_now(stamp)) == pytest.approx(stamp, abs=1e-5)


@pytest.mark.unit
def test_launch_keys_choose_how_the_site_run_starts(demo_config):
    demo_config["sites"]["tursa"]["launch"] = {
        "host": "me@login",
        "workdir": "~/cb",  # the shell expands it: not quoted
        "profile": "profiles/tursa",
        "start": "sbatch",
        "batch_options": ["--time=7-00:00:00", "--account=dp123"],
        "python": "/opt/cb/venv/bin/python",
        "status_every": 5,
    }
    launch = SiteLaunch.of(load_campaign(demo_config).upload_site)
    shell, flag, inner = shlex.split(launch.start_command("demo"))
    assert inner.startswith("cd ~/cb || exit 1; /opt/cb/venv/bin/python -m cloudbench.site")
    argv = shlex.split(inner.split("; ", 1)[1])
    assert argv[argv.index("--how") + 1] == "sbatch"
    assert argv[argv.index("--status-every") + 1] == "5"
    assert "--batch-option=--time=7-00:00:00" in argv and "--batch-option=--account=dp123" in argv
    plain = dict(demo_config["sites"]["tursa"]["launch"])
    for key in ("start", "batch_options", "python", "status_every"):
        del plain[key]
    demo_config["sites"]["tursa"]["launch"] = plain
    defaults = SiteLaunch.of(load_campaign(demo_config).upload_site)  # the schema's defaults
    assert (defaults.start, defaults.batch_options, defaults.status_every) == ("detached", (), 60)
    demo_config["sites"]["tursa"]["launch"]["start"] = "nohup"
    with pytest.raises(ConfigError, match=r"sites.tursa.launch.start"):
        load_campaign(demo_config)


@pytest.mark.quick
def test_status_says_when_the_remote_does_not_answer(tmp_path, demo_config):
    """A store that is down is not a site gone silent: --status says which file it could not
    read and exits 4 (rclone against a closed port on 127.0.0.1)."""
    from tests.infra.s3 import free_port
    from tests.infra.workflow import BIN

    demo_config.update(remote="s3dead:")
    demo_config["rclone"]["flags"] = ["--low-level-retries", "1"]  # refused at once, not retried
    cfg = tmp_path / "campaign.yaml"
    cfg.write_text(yaml.safe_dump(demo_config))
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "RCLONE_CONFIG_S3DEAD_TYPE": "s3",
        "RCLONE_CONFIG_S3DEAD_PROVIDER": "Other",
        "RCLONE_CONFIG_S3DEAD_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "RCLONE_CONFIG_S3DEAD_ACCESS_KEY_ID": "nobody",
        "RCLONE_CONFIG_S3DEAD_SECRET_ACCESS_KEY": "nothing-at-all",
    }
    shown = subprocess.run(
        [sys.executable, "-m", "cloudbench", "launch", "--status", str(cfg)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 4, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "campaign demo: 2 sites: 2 no status"
    assert "cannot read s3dead:cloudbench/demo/launch/tesseract.json: " in shown.stdout


@pytest.mark.quick
def test_a_waiting_download_site_stops_when_the_upload_fails_or_it_is_stopped(
    tmp_path, demo_config, monkeypatch
):
    """Download sites wait, at the site, for the upload's manifest (none here: nothing was
    uploaded). bnl gives up once the upload site's run says it failed, anl ends on SIGTERM;
    both say so on the remote, and neither ever started its snakemake (`false` here)."""
    from cloudbench.measure import rclone as rc
    from tests.infra.s3 import object_on_disk, serve_s3
    from tests.infra.workflow import BIN

    demo_config.update(campaign="waits", remote="s3t:")
    demo_config["sites"] = {
        "tursa": {"upload": True, "download": False, "scratch": "scratch"},
        "bnl": {"download": True, "scratch": "scratch"},
        "anl": {"download": True, "scratch": "scratch"},
    }
    pids: dict[str, int] = {}
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3, _ending(pids):
        env = {**os.environ, **s3.client_env("S3T"), "PATH": f"{BIN}:{os.environ['PATH']}"}
        status = tmp_path / "s3root/cloudbench/waits/launch"
        for site in ("bnl", "anl"):
            workdir = tmp_path / site
            (workdir / ".cloudbench").mkdir(parents=True)
            (workdir / ".cloudbench/waits.yaml").write_text(yaml.safe_dump(demo_config))
            argv = [sys.executable, "-m", MARK, "start", "--config", ".cloudbench/waits.yaml",
                    "--site", site, "--status-every", "0.5", "--", "false"]  # fmt: skip
            started = subprocess.run(
                argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=120
            )
            assert started.returncode == 0, started.stdout + started.stderr
            assert (object_on_disk(status / f"{site}.json") or {}).get("state") == "waiting"
            pids[site] = json.loads((workdir / f".cloudbench/waits/{site}.pid").read_text())["pid"]
        anl_log = tmp_path / "anl/.cloudbench/waits/anl.log"
        deadline = time.monotonic() + 60
        while "waiting for upload site" not in (  # its handler is set: SIGTERM is caught
            anl_log.read_text() if anl_log.exists() else ""
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.kill(pids["anl"], signal.SIGTERM)
        failed = dict(_doc("failed", 0), campaign="waits", site="tursa", updated_utc=utc_now())
        for name, value in s3.client_env("S3T").items():  # the upload site, here
            monkeypatch.setenv(name, value)
        problems = runstatus.publish_status(rc.find_rclone(), failed, ["s3t:cloudbench/waits"], ())
        assert not problems
        deadline = time.monotonic() + 120
        docs = {}
        while True:
            docs = {s: object_on_disk(status / f"{s}.json") or {} for s in ("bnl", "anl")}
            if all(d.get("state") == "failed" for d in docs.values()):
                break
            assert time.monotonic() < deadline, docs
            time.sleep(0.2)
    assert docs["bnl"]["detail"] == "upload site tursa failed: not started"
    assert docs["anl"]["detail"] == "stopped by SIGTERM before snakemake started"
    for site in ("bnl", "anl"):
        log = (tmp_path / site / f".cloudbench/waits/{site}.log").read_text()
        assert "running: false" not in log and "waiting for upload site tursa" in log
        assert _gone_within(pids[site], 30)


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while pid_is_driver(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@contextmanager
def _ending(pids: dict[str, int]) -> Iterator[None]:
    """Drivers the test started end with it, whatever happened (they are detached)."""
    try:
        yield
    finally:
        for pid in pids.values():
            if pid_is_driver(pid):
                os.killpg(pid, signal.SIGKILL)
