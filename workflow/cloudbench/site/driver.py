"""A site's share of a launched campaign, run at the site without anyone connected.

``cloudbench launch`` reaches a site over ssh once, to run ``start`` there, which returns at
once: the run itself (``run``) goes on detached from the ssh session (its own session, no
terminal, its log and pid file under the site's working directory) or as a batch job where
a centre forbids long processes on login nodes. A laptop that sleeps or a dropped
connection does not end it.

``run`` waits, at a site that only downloads, until the upload site's campaign manifest is on
the remote (the rendezvous the workflow's preflight checks), then runs the site's
``snakemake`` and publishes its status (cloudbench.site.runstatus) to the remote when it
starts, every ``--status-every`` seconds and when it ends. ``start`` refuses, in one line,
to start a second run where one is under way. Credentials stay with the site: it uses its
own rclone config or environment, and the status never holds one.

    python -m cloudbench.site.driver start --config .cloudbench/<campaign>.yaml --site <name>
        [--how detached|sbatch|qsub] [--batch-option OPT ...] -- snakemake ...
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.site import runstatus

RUN_DIR = ".cloudbench"
REFUSED = 3  # start's exit status when a run is already under way at the site
DETACHED, SBATCH, QSUB = "detached", "sbatch", "qsub"
HOW = (DETACHED, SBATCH, QSUB)
MARK = "cloudbench.site.driver"  # in a live driver's command line (a reused pid is not one)
UPLOAD_WAIT_S = 7 * 24 * 3600  # a download site waits at most this long for the upload
STOP_WAIT_S = 300  # snakemake stopping its jobs after SIGTERM
END_PUBLISH_TRIES = 5  # the final status is worth a few tries (the remote may be down a while)


@dataclass(frozen=True)
class RunFiles:
    """Where a site's run keeps its files, under the site's working directory."""

    campaign: str
    site: str

    @property
    def folder(self) -> Path:
        return Path(RUN_DIR) / self.campaign

    @property
    def pid(self) -> Path:
        return self.folder / f"{self.site}.pid"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.site}.log"

    @property
    def job_script(self) -> Path:
        return self.folder / f"{self.site}.job.sh"

    @property
    def job_output(self) -> Path:
        return self.folder / f"{self.site}.job.out"


# --- is a run under way? -------------------------------------------------------------------


def pid_is_driver(pid: int) -> bool:
    """True if ``pid`` is a live driver on this host (not a reused pid of another program)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return MARK.encode() in cmdline


def job_active(how: str, job: str) -> bool:
    """True while the scheduler still holds the batch job (queued or running)."""
    try:
        return _job_held(how, job)
    except FileNotFoundError as err:
        raise RuntimeError(f"cannot check batch job {job}: {err.filename} not found") from None


def _job_held(how: str, job: str) -> bool:
    if how == SBATCH:
        res = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=60
        )
        return res.returncode == 0 and bool(res.stdout.strip())
    res = subprocess.run(["qstat", "-f", job], capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        return False
    for line in res.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "job_state":
            return value.strip() not in ("C", "F", "E")
    return True


def refusal(
    record: Mapping[str, Any] | None,
    host: str,
    alive: Callable[[int], bool] = pid_is_driver,
    active: Callable[[str, str], bool] = job_active,
    published: Callable[[], Mapping[str, Any] | None] = lambda: None,
) -> str | None:
    """Why no second run may start here (one line), or None when none is under way.

    ``record`` is the pid file: a detached run is under way while its pid is a live driver
    (checked on the host that started it: a pid means nothing elsewhere), a batch run while
    the scheduler holds its job. From another login node (one name, several hosts), the
    run's own last word on the remote (``published``) says whether it has ended.
    """
    if not record:
        return None
    since = f"since {record.get('started_utc', '?')}"
    if record.get("how") in (SBATCH, QSUB) and record.get("job"):
        if active(str(record["how"]), str(record["job"])):
            return f"already running as batch job {record['job']} ({since})"
        return None
    pid = record.get("pid")
    if not pid:
        return None
    if record.get("host") != host:
        last = published() or {}
        same = (last.get("pid"), last.get("host")) == (pid, record.get("host"))
        if same and last.get("state") in runstatus.ENDED:
            return None
        return (
            f"a run was started on {record.get('host')} (pid {pid}, {since}) and cannot be "
            f"checked from {host}: if none is running there, remove the pid file"
        )
    if alive(int(pid)):
        return f"already running (pid {pid} on {host}, {since})"
    return None


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_record(path: Path, record: Mapping[str, Any]) -> None:
    from cloudbench.records import write_json

    write_json(path, record)


# --- start ---------------------------------------------------------------------------------


def _run_argv(a: argparse.Namespace, started: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        MARK,
        "run",
        "--config",
        a.config,
        "--site",
        a.site,
        "--how",
        a.how,
        "--status-every",
        str(a.status_every),
        "--started",
        started,
        "--",
        *a.command,
    ]


def _submit(a: argparse.Namespace, files: RunFiles, argv: list[str]) -> str:
    """Submit the run as a batch job; its id."""
    script = files.job_script
    script.write_text(
        f"#!/bin/bash\ncd {shlex.quote(os.getcwd())} || exit 1\nexec {shlex.join(argv)}\n"
    )
    script.chmod(0o755)
    name = f"cb-{files.campaign}-{files.site}"
    out = str(files.job_output.resolve())
    if a.how == SBATCH:
        cmd = ["sbatch", "--parsable", "--job-name", name, "--output", out]
    else:
        cmd = ["qsub", "-N", name[:15], "-o", out, "-j", "oe"]
    cmd += [*a.batch_option, str(script.resolve())]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise RuntimeError(f"{cmd[0]} not found at the site (launch.start: {a.how})") from None
    job = res.stdout.strip().splitlines()[0].split(";")[0] if res.stdout.strip() else ""
    if res.returncode != 0 or not job:
        raise RuntimeError(
            f"{cmd[0]} refused the run (exit {res.returncode}): {res.stderr.strip()[-300:]}"
        )
    return job


def start(a: argparse.Namespace) -> int:
    """Start the site's run unless one is under way; one line either way."""
    from cloudbench.records import host_info, utc_now

    campaign = _campaign(a.config)
    files = RunFiles(campaign.name, a.site)
    files.folder.mkdir(parents=True, exist_ok=True)
    host = host_info()["host"]
    with open(files.folder / f"{a.site}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two launches at once: the second sees the first
        why = refusal(
            _read_record(files.pid),
            host,
            published=lambda: runstatus.read_status(
                _rclone(), campaign.rendezvous_prefixes, a.site, campaign.rclone_flags
            ),
        )
        if why:
            print(f"not started: {why}; log {files.log.resolve()}")
            return REFUSED
        started = utc_now()
        # the first status goes out before this returns: whoever follows the campaign from
        # now on reads this run's status, never the previous run's
        first = _first_doc(campaign, a.site, a.how, started, a.status_every)
        if a.how != DETACHED:  # until the job starts and says more (a queue may take days)
            first.update(state=runstatus.QUEUED, detail=f"submitted with {a.how}")
        problems = _publish(campaign, a.site, first)
        argv = _run_argv(a, started)
        record: dict[str, Any] = {"how": a.how, "host": host, "started_utc": started}
        if a.how == DETACHED:
            with open(files.log, "a") as log:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # setsid: no terminal, no SIGHUP from the ssh session
                    close_fds=True,
                )
            record["pid"] = proc.pid
            said = f"started (pid {proc.pid} on {host})"
        else:
            record["job"] = _submit(a, files, argv)
            said = f"submitted as batch job {record['job']} ({a.how})"
        _write_record(files.pid, record)
    print(f"{said}; log {files.log.resolve()}")
    for p in problems:
        print(f"warning: {p}")
    return 0


# --- run -----------------------------------------------------------------------------------


def _campaign(config: str):
    import yaml

    from cloudbench.campaign.model import load_campaign

    return load_campaign(yaml.safe_load(Path(config).read_text()))


def _first_doc(campaign: Any, site: str, how: str, started: str, every: float) -> dict[str, Any]:
    """A run's status before it has done anything: who, where, since when, what is left."""
    from cloudbench.records import host_info, utc_now

    job = os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID") or ""
    return {
        "campaign": campaign.name,
        "site": site,
        "state": runstatus.RUNNING if waits_for(campaign, site) is None else runstatus.WAITING,
        "how": how,
        "host": host_info()["host"],
        "pid": os.getpid(),
        "job": job,
        "started_utc": started,
        "updated_utc": utc_now(),
        "status_every_s": every,
        "log": str(RunFiles(campaign.name, site).log.resolve()),
        "measurements": runstatus.counts(campaign, site, f"results/{campaign.name}"),
        "last_line": "",
        "detail": "",
    }


def waits_for(campaign: Any, site: str) -> str | None:
    """The upload site a site waits for, or None for a site that uploads itself."""
    if campaign.site_named(site).upload:
        return None
    return campaign.upload_site.name


def _publish(campaign: Any, site: str, doc: Mapping[str, Any]) -> list[str]:
    from cloudbench.measure import rclone as rc

    return runstatus.publish_status(
        rc.find_rclone(), doc, campaign.rendezvous_prefixes, campaign.rclone_flags
    )


class _Stopped(Exception):
    """SIGTERM reached the driver (scancel, qdel, kill): it ends its run and says so."""


def _say(line: str) -> None:
    from cloudbench.records import utc_now

    print(f"cloudbench driver {utc_now()[:19]}Z: {line}", flush=True)


class Run:
    """One site's run: wait for the upload, run snakemake, publish the status throughout."""

    def __init__(self, a: argparse.Namespace) -> None:
        from cloudbench.campaign.secrets import secret_values

        self.a = a
        self.campaign = _campaign(a.config)
        self.site = a.site
        self.files = RunFiles(self.campaign.name, a.site)
        self.secrets = secret_values()
        self.doc = _first_doc(self.campaign, a.site, a.how, a.started, a.status_every)
        self.started_epoch = time.time()

    def publish(self, **changes: Any) -> list[str]:
        """The status as of now to every remote; what did not take it (said in the log)."""
        from cloudbench.records import utc_now

        self.doc.update(changes)
        self.doc["updated_utc"] = utc_now()
        results = f"results/{self.campaign.name}"
        self.doc["measurements"] = runstatus.counts(self.campaign, self.site, results)
        self.doc["last_line"] = runstatus.last_line(self.files.log, self.secrets)
        problems = _publish(self.campaign, self.site, self.doc)
        for p in problems:
            _say(f"status not published: {p}")
        return problems

    def wait_for_upload(self) -> str | None:
        """Wait until the upload site's manifest is on the remote; why not, if it fails."""
        from cloudbench.site import exchange

        up = waits_for(self.campaign, self.site)
        if up is None:
            return None
        prefix = self.campaign.remote_prefix(self.campaign.remotes[0])
        flags = self.campaign.rclone_flags
        deadline = time.monotonic() + UPLOAD_WAIT_S
        _say(f"waiting for upload site {up}'s manifest at {prefix}")
        while not exchange.campaign_manifest_exists(prefix, flags):
            other = runstatus.read_status(_rclone(), self.campaign.rendezvous_prefixes, up, flags)
            if (
                other
                and other.get("state") == runstatus.FAILED
                and runstatus._seconds(other["updated_utc"]) >= self.started_epoch
            ):  # an earlier run's failure is not this one's
                return f"upload site {up} failed: not started"
            if time.monotonic() > deadline:
                return f"gave up after {UPLOAD_WAIT_S // 3600} h waiting for upload site {up}"
            self.publish(state=runstatus.WAITING, detail=f"waiting for upload site {up}")
            time.sleep(self.a.status_every)
        return None

    def __call__(self) -> int:
        try:
            self.publish()
            why = self.wait_for_upload()
            if why:
                _say(why)
                return self.end(1, why)
            _say(f"running: {shlex.join(self.a.command)}")
            proc = subprocess.Popen(self.a.command, stdin=subprocess.DEVNULL)
            self.publish(state=runstatus.RUNNING, detail="")
            try:
                while True:
                    try:
                        code = proc.wait(timeout=self.a.status_every)
                        break
                    except subprocess.TimeoutExpired:
                        self.publish()
            except _Stopped:
                return self.end(_stop(proc) or 1, "stopped by SIGTERM")
        except _Stopped:
            return self.end(128 + signal.SIGTERM, "stopped by SIGTERM before snakemake started")
        return self.end(code, "" if code == 0 else f"snakemake exit {code}")

    def end(self, code: int, detail: str) -> int:
        """Say how the run ended, here and on the remote (a few tries: it is the last word)."""
        state = runstatus.FINISHED if code == 0 else runstatus.FAILED
        _say(f"{state}{': ' + detail if detail else ''}")
        for attempt in range(END_PUBLISH_TRIES):
            if not self.publish(state=state, detail=detail, exit=code):
                break
            time.sleep(min(60.0, self.a.status_every * (attempt + 1)))
        return code


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """End snakemake as a scheduler would (SIGTERM: it stops its jobs), then for good."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=STOP_WAIT_S)


def _rclone() -> str:
    from cloudbench.measure import rclone as rc

    return rc.find_rclone()


def run(a: argparse.Namespace) -> int:
    def stopped(signum: int, frame: object) -> None:
        raise _Stopped

    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a terminal or session that goes away
    signal.signal(signal.SIGTERM, stopped)
    files = RunFiles(_campaign(a.config).name, a.site)
    files.folder.mkdir(parents=True, exist_ok=True)
    log = os.open(files.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)  # everything, snakemake's output too, goes to the site's log (a batch
    os.dup2(log, 2)  # job's own output file may be ignored by the scheduler)
    the_run = Run(a)
    try:
        return the_run()
    except Exception as err:  # a bug or a broken install: said here and on the remote
        the_run.end(1, f"driver error: {type(err).__name__}: {err}")
        raise


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {MARK}", description=__doc__)
    sub = p.add_subparsers(dest="verb", required=True)
    for verb in ("start", "run"):
        sp = sub.add_parser(verb)
        sp.add_argument("--config", required=True, help="the campaign file at the site")
        sp.add_argument("--site", required=True)
        sp.add_argument("--how", choices=HOW, default=DETACHED)
        sp.add_argument(
            "--status-every", type=float, default=60.0, help="seconds between status updates"
        )
        sp.add_argument("command", nargs=argparse.REMAINDER, help="-- snakemake ...")
        if verb == "start":
            sp.add_argument("--batch-option", action="append", default=[])
        else:
            sp.add_argument("--started", required=True, help="when start started it (UTC)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.command[:1] == ["--"]:
        a.command = a.command[1:]
    if not a.command:
        print("cloudbench driver: no command to run (give it after --)", file=sys.stderr)
        return 2
    from cloudbench.campaign.model import ConfigError

    try:
        return start(a) if a.verb == "start" else run(a)
    except (ConfigError, RuntimeError) as err:
        print(f"cloudbench driver: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
