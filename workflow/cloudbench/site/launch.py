"""One command fans a campaign out: every site's run starts at the site, then it returns.

Run on a laptop or login node: ``python -m cloudbench launch config/<campaign>.yaml``.
Each site is reached once over ssh with its own ``sites.<name>.launch`` settings (ssh host,
working directory, profile): the campaign file is copied there and the site's run is started
detached from the ssh session, or as a batch job (``launch.start``), by
cloudbench.site.driver, which runs the same ``snakemake --profile ...`` a user would type
there. A site that only downloads waits, at the site, for the upload site's campaign
manifest on the remote. Nothing here needs to stay connected: each site publishes its
progress to the remote (cloudbench.site.runstatus), ``--status`` shows it, and ``--wait`` /
``--follow`` poll it and, when every site is done, pull every site's results and build the
report here. Credentials never travel: each site uses its own rclone config or environment,
and ssh is given an environment without any.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cloudbench.campaign.model import NO_SITE, Campaign, ConfigError, Site, load_campaign
from cloudbench.site import runstatus
from cloudbench.site.driver import DETACHED, MARK, REFUSED

REMOTE_CONFIG_DIR = ".cloudbench"
SSH_TIMEOUT = 300  # copying the file and starting the run: seconds, not the campaign
UNREADABLE = 4  # --status: the remote did not answer (the sites may be fine)
FOLLOW_TIMEOUT = 8 * 24 * 3600  # a campaign may run for days; following it is bounded


def shell_path(path: str) -> str:
    """``path`` for the site's shell, quoted, with a leading ``~/`` left for the shell to
    expand (``workdir: ~/cloudbench`` is the usual way to name one's checkout)."""
    if path == "~":
        return path
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


@dataclass(frozen=True)
class SiteLaunch:
    """How to reach one site and what to run there (``sites.<name>.launch``)."""

    site: str
    host: str
    workdir: str
    profile: str
    port: int | None = None
    snakemake: str = "snakemake"
    snakefile: str | None = None
    options: tuple[str, ...] = ()
    start: str = DETACHED
    batch_options: tuple[str, ...] = ()
    python: str | None = None
    status_every: float = 60.0

    @classmethod
    def of(cls, site: Site) -> SiteLaunch:
        """From a checked campaign (the schema has filled in every default)."""
        spec = dict(site.launch)
        missing = [k for k in ("host", "workdir", "profile") if not spec.get(k)]
        if missing:
            raise ConfigError(
                f"sites.{site.name}.launch: missing {', '.join(missing)} (the launcher needs "
                "the ssh host, the working directory there and the profile to use)"
            )
        return cls(
            site=site.name,
            host=str(spec["host"]),
            workdir=str(spec["workdir"]),
            profile=str(spec["profile"]),
            port=int(spec["port"]) if spec.get("port") else None,
            snakemake=str(spec["snakemake"]),
            snakefile=str(spec["snakefile"]) if spec.get("snakefile") else None,
            options=tuple(str(o) for o in spec["options"]),
            start=str(spec["start"]),
            batch_options=tuple(str(o) for o in spec["batch_options"]),
            python=str(spec["python"]) if spec.get("python") else None,
            status_every=float(spec["status_every"]),
        )

    def ssh(self, remote_command: str) -> list[str]:
        port = ["-p", str(self.port)] if self.port else []
        return ["ssh", "-o", "BatchMode=yes", *port, *self.options, self.host, remote_command]

    def config_path(self, campaign: str) -> str:
        return f"{REMOTE_CONFIG_DIR}/{campaign}.yaml"

    def put_config_command(self, campaign: str) -> str:
        wd = shell_path(self.workdir)
        return f"mkdir -p {wd}/{REMOTE_CONFIG_DIR} && cat > {wd}/{self.config_path(campaign)}"

    def snakemake_argv(self, campaign: str) -> list[str]:
        """The site's share, exactly as a user would type it there."""
        argv = [self.snakemake]
        if self.snakefile:
            argv += ["--snakefile", self.snakefile]
        return [
            *argv,
            "--profile",
            self.profile,
            "--configfile",
            self.config_path(campaign),
            "--config",
            f"site={self.site}",
        ]

    def start_command(self, campaign: str) -> str:
        """Start the site's run (cloudbench.site.driver start) in a login shell there: the
        site's modules and PATH. Without ``python``, the Python beside the site's snakemake
        (the cloudbench install it runs with)."""
        driver = [
            "-m",
            MARK,
            "start",
            "--config",
            self.config_path(campaign),
            "--site",
            self.site,
            "--how",
            self.start,
            "--status-every",
            f"{self.status_every:g}",
            *(f"--batch-option={o}" for o in self.batch_options),
            "--",
            *self.snakemake_argv(campaign),
        ]
        found = ""
        if self.python:
            python = shell_path(self.python)
        else:
            python = '"${py%/*}/python"'
            missing = shlex.quote(f"cloudbench launch: {self.snakemake} not found at the site")
            found = (
                f"py=$(command -v {shlex.quote(self.snakemake)}) || "
                f"{{ echo {missing} >&2; exit 127; }}; "
            )
        inner = f"cd {shell_path(self.workdir)} || exit 1; {found}{python} {shlex.join(driver)}"
        return f"bash -lc {shlex.quote(inner)}"


@dataclass
class Started:
    """What starting one site's run came to."""

    site: str
    state: str  # started, refused (a run is under way there) or failed
    said: str


def ssh_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment ssh runs with: none of the credentials this machine holds, so that no
    ``SendEnv`` (in ~/.ssh/config or the site's options) can carry one to a site."""
    from cloudbench.campaign.secrets import without_credentials

    env = without_credentials(os.environ if environ is None else environ)
    return {k: v for k, v in env.items() if not k.upper().startswith("AWS_")}


def start_site(launch: SiteLaunch, campaign: str, config_text: str, log: Path) -> Started:
    """Copy the campaign file to the site and start its run there; one ssh call each."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = ssh_env()
    with open(log, "a") as fh:
        try:
            put = subprocess.run(
                launch.ssh(launch.put_config_command(campaign)),
                input=config_text,
                stdout=fh,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=SSH_TIMEOUT,
                env=env,
            )
            if put.returncode != 0:
                why = f"cannot reach {launch.host} (ssh exit {put.returncode}; see {log})"
                return Started(launch.site, "failed", why)
            run = subprocess.run(
                launch.ssh(launch.start_command(campaign)),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=SSH_TIMEOUT,
                env=env,
            )
        except subprocess.TimeoutExpired:
            why = f"{launch.host} did not answer within {SSH_TIMEOUT} s"
            return Started(launch.site, "failed", why)
        fh.write(run.stdout + run.stderr)
    said = (run.stdout.strip().splitlines() or [""])[0]
    if run.returncode == 0:
        return Started(launch.site, "started", said)
    if run.returncode == REFUSED:
        return Started(launch.site, "refused", said)
    last = (run.stderr.strip().splitlines() or [said])[-1]
    return Started(launch.site, "failed", f"exit {run.returncode}: {last} (see {log})")


def aggregate_here(config_path: Path, repo: Path, report: Path) -> int:
    """Pull every site's results and build the report on this machine (site: none)."""
    base = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(repo / "workflow/Snakefile"),
        "--profile",
        str(repo / "profiles/local"),
        "--configfile",
        str(config_path),
        "--config",
        f"site={NO_SITE}",
    ]
    first = subprocess.run(base)
    second = subprocess.run([*base, "--report", str(report)])
    return first.returncode or second.returncode


def with_occurrence(config_path: Path, occurrence: str) -> Path:
    """The campaign file of one occurrence of a series (docs/series.md): the file as it is,
    with ``occurrence:`` set, written under results/occurrences/ (the same for --status and
    --follow with the same --occurrence), so every site runs the same occurrence."""
    data = yaml.safe_load(config_path.read_text()) or {}
    data["occurrence"] = str(occurrence)
    out = Path("results") / "occurrences" / f"{config_path.stem}@{occurrence}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _campaign(config_path: Path) -> tuple[str, Campaign]:
    text = config_path.read_text()
    return text, load_campaign(yaml.safe_load(text))


def start_all(
    config_path: Path, say: Callable[[str], None] = print
) -> tuple[Campaign, list[Started]]:
    """Start every site's run, the upload site first; one line per site."""
    text, campaign = _campaign(config_path)
    launches = {s.name: SiteLaunch.of(s) for s in campaign.sites}  # all checked up front
    log_dir = Path("results") / campaign.name / "launch"
    up = campaign.upload_site.name
    order = [up] + [s.name for s in campaign.sites if s.name != up]
    out = []
    for name in order:
        site = launches[name]
        say(f"[{name}] starting on {site.host} in {site.workdir} ({site.profile}, {site.start})")
        result = start_site(site, campaign.name, text, log_dir / f"{name}.log")
        failed = "FAILED to start: " if result.state == "failed" else ""
        say(f"[{name}] {failed}{result.said}")
        out.append(result)
    return campaign, out


def read_all(
    campaign: Campaign, problems: list[str] | None = None
) -> dict[str, dict[str, Any] | None]:
    """Every site's newest status on the remote (read here, without ssh); the remotes that
    did not answer go to ``problems``."""
    from cloudbench.measure import rclone as rc

    binary = rc.find_rclone()
    prefixes, flags = campaign.rendezvous_prefixes, campaign.rclone_flags
    return {
        s: runstatus.read_status(binary, prefixes, s, flags, problems) for s in campaign.site_names
    }


def status(config_path: Path, say: Callable[[str], None] = print) -> int:
    """Show every site's progress once: 0 when every site finished, 1 when one failed or
    went silent, 3 while some are still under way (or have said nothing yet), 4 when the
    remote could not be read."""
    _, campaign = _campaign(config_path)
    problems: list[str] = []
    docs = read_all(campaign, problems)
    now = time.time()
    for line in runstatus.render(campaign.name, campaign.site_names, docs, now):
        say(line)
    for p in problems:
        say(p)
    return UNREADABLE if problems else _status_code(campaign.site_names, docs, now)


def _status_code(sites: list[str], docs: Mapping[str, Mapping[str, Any] | None], now: float) -> int:
    states = [runstatus.shown_state(docs.get(s), now) for s in sites]
    if all(s == runstatus.FINISHED for s in states):
        return 0
    if any(s in (runstatus.FAILED, "STALE") for s in states):
        return 1
    return 3


def follow(
    config_path: Path,
    repo: Path,
    poll: float,
    timeout: float = FOLLOW_TIMEOUT,
    skip: frozenset[str] = frozenset(),
    say: Callable[[str], None] = print,
) -> int:
    """Poll the sites' status until every site has ended, saying each change, then pull
    every site's results and build the report here. ``skip``: sites not started, not
    waited for. Killing this loses nothing: ``--follow`` takes it up again."""
    _, campaign = _campaign(config_path)
    sites = [s for s in campaign.site_names if s not in skip]
    shown: dict[str, tuple[Any, ...]] = {}
    width = max(len(s) for s in campaign.site_names)
    deadline = time.monotonic() + timeout
    unread = ""
    while True:
        problems: list[str] = []
        docs = read_all(campaign, problems)
        now = time.time()
        if problems and problems[0] != unread:  # said once, not every poll
            say(f"[remote] {problems[0]} (the sites carry on; trying again)")
        unread = problems[0] if problems else ""
        for s in sites:
            doc = docs.get(s)
            c = (doc or {}).get("measurements") or {}
            key = (runstatus.shown_state(doc, now), c.get("ok"), c.get("failed"), c.get("left"))
            if shown.get(s) != key:
                shown[s] = key
                say(runstatus.site_line(s, doc, now, width).splitlines()[0])
        if runstatus.all_ended(sites, docs):
            break
        if time.monotonic() > deadline:
            say(
                f"stopped following after {timeout / 3600:.0f} h; the sites carry on: "
                f"cloudbench launch --follow {config_path}"
            )
            return 1
        time.sleep(poll)
    report_path = Path("results") / campaign.name / "report.html"
    say(f"[aggregate] pulling every site's results and building {report_path}")
    agg = aggregate_here(config_path, repo, report_path)
    say(f"[aggregate] {'ok' if agg == 0 else 'FAILED'}")
    failed = [s for s in sites if (docs.get(s) or {}).get("state") != runstatus.FINISHED]
    failed += sorted(skip)
    if failed:
        say(f"sites that failed: {', '.join(failed)}")
    return 1 if failed or agg else 0


def launch(
    config_path: Path,
    repo: Path,
    wait: bool = False,
    poll: float = 60.0,
    say: Callable[[str], None] = print,
) -> int:
    """Start every site's run; with ``wait``, follow them and aggregate when all are done."""
    _, results = start_all(config_path, say)
    failed = frozenset(r.site for r in results if r.state == "failed")
    refused = [r.site for r in results if r.state == "refused"]
    if not wait:
        say(f"follow with: cloudbench launch --status {config_path} (or --follow)")
        return 1 if failed or refused else 0
    code = follow(config_path, repo, poll, skip=failed, say=say)
    return 1 if failed else code


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="cloudbench launch", description=__doc__)
    p.add_argument("config", type=Path, help="the campaign file (with sites.<name>.launch)")
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--wait", action="store_true", help="start, then follow (as --follow) until all end"
    )
    what.add_argument(
        "--status",
        action="store_true",
        help="start nothing: show each site's progress from the remote (exit 0: all finished, "
        "1: one failed or went silent, 3: still under way, 4: the remote did not answer)",
    )
    what.add_argument(
        "--follow",
        action="store_true",
        help="start nothing: poll the status until every site has ended, then pull every "
        "site's results and build the report here",
    )
    p.add_argument(
        "--poll", type=float, default=60.0, help="seconds between status reads (default 60)"
    )
    p.add_argument(
        "--repo",
        type=Path,
        default=Path(__file__).resolve().parents[3],
        help="this cloudbench checkout (for the local aggregation)",
    )
    p.add_argument(
        "--occurrence",
        help="run (or follow) this occurrence of the campaign's series at every site, e.g. "
        "$(date -u +%%Y%%m%%dT%%H%%M) (docs/series.md)",
    )
    a = p.parse_args(argv)
    from cloudbench.measure.rclone import RcloneError

    # a line as each site starts or changes, also into `| tee` or nohup's file: Python
    # holds a pipe's lines back until its buffer fills (a whole campaign's, for --wait)
    sys.stdout.reconfigure(line_buffering=True)

    if a.occurrence:
        a.config = with_occurrence(a.config, a.occurrence)

    try:
        if a.status:
            return status(a.config)
        if a.follow:
            return follow(a.config, a.repo, a.poll)
        return launch(a.config, a.repo, wait=a.wait, poll=a.poll)
    except (ConfigError, RcloneError, OSError) as err:
        print(f"cloudbench launch: {err}", file=sys.stderr)
        return 2
