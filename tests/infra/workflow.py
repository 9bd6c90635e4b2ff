"""Run the real workflow in a scratch working directory, as a user would from the shell."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUN_TIMEOUT = 900
WORKFLOW_PROFILE = ROOT / "profiles" / "default"


def default_sigint() -> None:
    """``preexec_fn`` for a process the test will Ctrl-C: SIGINT back to its default, as in a
    terminal. A suite started in the background (``make test &``, or a CI runner without job
    control) hands its children SIGINT ignored, and Python then never raises
    KeyboardInterrupt, so Snakemake would not stop at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write_config(workdir: Path, config: dict, name: str = "campaign.yaml") -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


#: A PBS site's scheduler polled every 2 s, not every 10 (Snakemake's default for the
#: cluster-generic executor): a test's batch jobs take a few seconds, so a run would
#: otherwise spend most of its time waiting for the next poll. A test's setting, never a
#: profile's: a centre's controller is shared by its users. Slurm's plugin sets its own
#: interval (profiles/default's 10 s, growing while no job ends): 2 s there made the demo's
#: jobs, ~12 s each here from submission to exit, wait for the grown interval (133 s a run
#: against 105).
BATCH_POLLS = ("--seconds-between-status-checks", "2")


#: what a test's run leaves out unless it reads the figures (``figures=True``): the
#: ``figures`` rule, most of a small campaign's report CPU (about 4 of 6 CPU-seconds here), as
#: a user who wants the numbers only does (docs/report.md)
NO_FIGURES = ("--omit-from", "figures")


def snakemake_command(
    workdir: Path, configfile: Path, *args: str, profile: str | None, figures: bool = False
) -> list[str]:
    """``snakemake --profile profiles/<profile>`` on the repo's workflow, run in ``workdir``
    (``profile=None``: no global profile, as a command typed without one); without
    ``figures``, the figures rule left out (:data:`NO_FIGURES`): a test that reads a figure
    or builds the report (``--report`` needs every figure) asks for them.

    ``workdir`` is not the checkout, so the workflow profile (profiles/default, which
    Snakemake applies by itself only from the checkout) is named explicitly.
    """
    polls = BATCH_POLLS if profile not in (None, "local") else ()
    return [
        str(BIN / "snakemake"),
        *polls,  # before args: a test's own value wins (argparse keeps the last)
        *args,  # first: --configfile takes several values and would swallow a target
        # after args (--omit-from takes several values too), unless they say what to leave
        *(() if figures or {"--report", "--omit-from", "--until"} & set(args) else NO_FIGURES),
        "--snakefile", str(ROOT / "workflow" / "Snakefile"),
        "--directory", str(workdir),
        *(["--profile", str(ROOT / "profiles" / profile)] if profile else []),
        "--workflow-profile", str(WORKFLOW_PROFILE),
        "--configfile", str(configfile),
    ]  # fmt: skip


def snakemake_env(env: dict | None) -> dict[str, str]:
    """The caller's environment with the venv's snakemake and rclone first on PATH."""
    return {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **(env or {})}


def snakemake(
    workdir: Path,
    configfile: Path,
    *args: str,
    env: dict | None = None,
    profile: str | None = "local",
    timeout: float = RUN_TIMEOUT,
    figures: bool = False,
) -> subprocess.CompletedProcess:
    """Run :func:`snakemake_command` to the end."""
    return subprocess.run(
        snakemake_command(workdir, configfile, *args, profile=profile, figures=figures),
        cwd=workdir,
        env=snakemake_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def trace_command(results: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``cloudbench trace`` over a campaign's results, as a user runs it: every row
    recomputed from the raw files beside its record (exit 0 only when every one traced)."""
    return subprocess.run(
        [sys.executable, "-m", "cloudbench", "trace", str(results), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )


def popen_snakemake(
    workdir: Path,
    configfile: Path,
    *args: str,
    env: dict | None = None,
    profile: str = "local",
    figures: bool = False,
) -> subprocess.Popen:
    """:func:`snakemake_command` started in the background, in a session of its own, its
    output (stdout and stderr together) on one pipe: a run the test breaks while it goes on
    (it kills the store, or Ctrl-Cs it: ``os.killpg(proc.pid, signal.SIGINT)``)."""
    return subprocess.Popen(
        snakemake_command(workdir, configfile, *args, profile=profile, figures=figures),
        cwd=workdir,
        env=snakemake_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,  # it is Ctrl-C'd
    )


#: long enough that only a hang reaches it, whatever the machine's speed that day
HANG_S = 600.0


#: how often wait_for asks: a tenth of the shortest copy a test breaks (a second or two) is
#: soon enough to land inside it; every ask reads files (logs, records), and four workers
#: asking 20 times a second spent CPU the suite's runs are short of
POLL_S = 0.1


def wait_for(
    predicate: Callable[[], Any],
    what: str,
    timeout: float = HANG_S,
    proc: subprocess.Popen | None = None,
) -> Any:
    """Poll ``predicate`` until it returns something true (returned); fail naming ``what``
    once ``timeout`` seconds have passed, a deadline only a hang reaches (never a duration
    the test relies on). With ``proc``, a run that ended first fails at once, with its
    output's tail."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"the run ended before {what}: {out[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL_S)
