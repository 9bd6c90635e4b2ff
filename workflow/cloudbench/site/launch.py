"""One command fans a campaign out: every site's share over ssh, in order, then the report.

Run on a laptop or login node: ``python -m cloudbench launch config/<campaign>.yaml``.
The upload site runs first; the download sites then run in parallel; finally every site's
results are pulled from the remote and aggregated here.  Each site is reached with its own
``sites.<name>.launch`` settings (ssh host, working directory, profile) and runs the same
``snakemake --profile ...`` a user would type there.  Credentials never travel: each site
uses its own rclone config or environment.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from cloudbench.campaign.model import NO_SITE, Campaign, ConfigError, Site, load_campaign

REMOTE_CONFIG_DIR = ".cloudbench"
SITE_TIMEOUT = 7 * 24 * 3600  # a campaign may run for days; ssh keeps it bounded anyway


@dataclass(frozen=True)
class SiteLaunch:
    """How to reach one site and what to run there."""

    site: str
    host: str
    workdir: str
    profile: str
    port: int | None = None
    snakemake: str = "snakemake"
    snakefile: str | None = None
    options: tuple[str, ...] = ()

    @classmethod
    def of(cls, site: Site) -> SiteLaunch:
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
            snakemake=str(spec.get("snakemake", "snakemake")),
            snakefile=str(spec["snakefile"]) if spec.get("snakefile") else None,
            options=tuple(str(o) for o in spec.get("options", ())),
        )

    def ssh(self, remote_command: str) -> list[str]:
        port = ["-p", str(self.port)] if self.port else []
        return ["ssh", "-o", "BatchMode=yes", *port, *self.options, self.host, remote_command]

    def config_path(self, campaign: str) -> str:
        return f"{REMOTE_CONFIG_DIR}/{campaign}.yaml"

    def put_config_command(self, campaign: str) -> str:
        wd = shlex.quote(self.workdir)
        return f"mkdir -p {wd}/{REMOTE_CONFIG_DIR} && cat > {wd}/{self.config_path(campaign)}"

    def run_command(self, campaign: str) -> str:
        """The site's share, exactly as a user would type it there, in a login shell."""
        argv = [self.snakemake]
        if self.snakefile:
            argv += ["--snakefile", self.snakefile]
        argv += [
            "--profile",
            self.profile,
            "--configfile",
            self.config_path(campaign),
            "--config",
            f"site={self.site}",
        ]
        inner = f"cd {shlex.quote(self.workdir)} && {shlex.join(argv)}"
        return f"bash -lc {shlex.quote(inner)}"


@dataclass
class SiteResult:
    site: str
    ok: bool
    seconds: float
    log: Path
    detail: str = ""


def run_site(
    launch: SiteLaunch, campaign: str, config_text: str, log_dir: Path, say: Callable[[str], None]
) -> SiteResult:
    log = log_dir / f"{launch.site}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"[{launch.site}] starting on {launch.host} in {launch.workdir} ({launch.profile})")
    t0 = time.monotonic()
    with open(log, "w") as fh:
        put = subprocess.run(
            launch.ssh(launch.put_config_command(campaign)),
            input=config_text,
            stdout=fh,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        if put.returncode != 0:
            return SiteResult(
                launch.site,
                False,
                time.monotonic() - t0,
                log,
                f"cannot reach {launch.host} (ssh exit {put.returncode})",
            )
        fh.flush()
        run = subprocess.run(
            launch.ssh(launch.run_command(campaign)),
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=SITE_TIMEOUT,
        )
    ok = run.returncode == 0
    detail = "" if ok else f"exit {run.returncode}; last lines:\n" + _tail(log)
    return SiteResult(launch.site, ok, time.monotonic() - t0, log, detail)


def _tail(path: Path, lines: int = 8) -> str:
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(f"    {line}" for line in text)


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


def launch(config_path: Path, repo: Path, say: Callable[[str], None] = print) -> int:
    config_text = config_path.read_text()
    campaign: Campaign = load_campaign(yaml.safe_load(config_text))
    launches = {s.name: SiteLaunch.of(s) for s in campaign.sites}  # all checked up front
    log_dir = Path("results") / campaign.name / "launch"
    lock = threading.Lock()

    def said(line: str) -> None:
        with lock:
            say(line)

    def report(r: SiteResult) -> None:
        state = "ok" if r.ok else "FAILED"
        said(
            f"[{r.site}] {state} after {r.seconds:.0f} s (log {r.log})"
            + (f": {r.detail}" if r.detail else "")
        )

    up = campaign.upload_site.name
    first = run_site(launches[up], campaign.name, config_text, log_dir, said)
    report(first)
    if not first.ok:
        said(f"upload site {up} failed: download sites not started")
        return 1
    others = [s.name for s in campaign.sites if s.name != up]
    with ThreadPoolExecutor(max_workers=max(1, len(others))) as pool:
        futures = [
            pool.submit(run_site, launches[n], campaign.name, config_text, log_dir, said)
            for n in others
        ]
        results = [f.result() for f in futures]
    for r in results:
        report(r)
    report_path = Path("results") / campaign.name / "report.html"
    said(f"[aggregate] pulling every site's results and building {report_path}")
    agg = aggregate_here(config_path, repo, report_path)
    said(f"[aggregate] {'ok' if agg == 0 else 'FAILED'}")
    failed = [r.site for r in results if not r.ok]
    if failed:
        said(f"sites that failed: {', '.join(failed)}")
    return 1 if failed or agg else 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="cloudbench launch", description=__doc__)
    p.add_argument("config", type=Path, help="the campaign file (with sites.<name>.launch)")
    p.add_argument(
        "--repo",
        type=Path,
        default=Path(__file__).resolve().parents[3],
        help="this cloudbench checkout (for the local aggregation)",
    )
    a = p.parse_args(argv)
    try:
        return launch(a.config, a.repo)
    except ConfigError as err:
        print(f"cloudbench launch: {err}", file=sys.stderr)
        return 2
