"""Sites meet at the remote: each publishes its results there, anyone pulls them all.

Layout under ``<bucket>/<campaign>/`` on every remote of the campaign:

- ``results/<site>/``: the site's current results (records, time series, raw client logs)
  and ``run.json`` naming the run that wrote them;
- ``history/<site>/<run id>/``: earlier runs of that site, moved aside when it publishes again,
  so rerunning one site replaces its results without losing what was measured before.

Results go to every remote; they are pulled from the first remote that has them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from cloudbench.measure import rclone as rc
from cloudbench.records import clip_tail, host_info, small_files, utc_now, write_json

RUN_FILE = "run.json"
PUBLISHED, PULLED = "published.json", "pulled.json"  # markers, never published or pulled
MARKERS = (PUBLISHED, PULLED)


class ExchangeError(RuntimeError):
    """The remote did not take or give a site's results."""


def _run(binary: str, verb: str, *args: str, flags: tuple[str, ...]) -> Any:
    return rc.run_helper(rc.helper_command(binary, verb, *args, extra_flags=flags))


def _why(stderr: str) -> str:
    """rclone's reason, the network failure first where its log names one: against a dead
    store its last line is often a misleading verdict ("is a file not a directory")."""
    # here, not at the top: only a failed call reads rclone's log (publish and pull jobs are
    # a run's most frequent after the transfers, and start faster without it)
    from cloudbench.measure.rclonelog import network_cause

    cause = network_cause(stderr)
    return f"the store did not answer ({cause})" if cause else clip_tail(stderr)


def _current_run(binary: str, where: str, flags: tuple[str, ...]) -> dict[str, Any] | None:
    res = _run(binary, "cat", f"{where}/{RUN_FILE}", flags=flags)
    if res.returncode != 0 or not res.stdout.strip():
        return None
    return json.loads(res.stdout)


def run_id() -> str:
    stamp = utc_now().replace("-", "").replace(":", "")[:15]
    return f"{stamp}Z-{host_info()['host']}"


def publish(
    site: str, local_dir: Path, campaign_prefixes: list[str], flags: tuple[str, ...], out: Path
) -> dict[str, Any]:
    """Copy this site's results to every remote, moving the previous run into history/."""
    binary = rc.find_rclone()
    excludes: list[str] = []
    for marker in MARKERS:
        excludes += ["--exclude", marker]
    run = {"run_id": run_id(), "site": site, "published_utc": utc_now(), **host_info()}
    for prefix in campaign_prefixes:
        current = f"{prefix}/results/{site}"
        previous = _current_run(binary, current, flags)
        if previous:
            dest = f"{prefix}/history/{site}/{previous['run_id']}"
            res = _run(binary, "move", current, dest, flags=flags)
            if res.returncode != 0:
                raise ExchangeError(f"cannot move {current} to {dest}: {_why(res.stderr)}")
        res = _run(binary, "copy", str(local_dir), current, *excludes, flags=flags)
        if res.returncode != 0:
            why = _why(res.stderr)
            raise ExchangeError(f"cannot publish {site} results to {current}: {why}")
        with small_files("exchange") as tmp:
            run_file = tmp / RUN_FILE
            write_json(run_file, run)
            res = _run(binary, "copyto", str(run_file), f"{current}/{RUN_FILE}", flags=flags)
            if res.returncode != 0:
                raise ExchangeError(f"cannot write {current}/{RUN_FILE}: {_why(res.stderr)}")
    write_json(out, {**run, "remotes": campaign_prefixes})
    return run


def pull(
    site: str, campaign_prefixes: list[str], dest: Path, flags: tuple[str, ...], out: Path
) -> dict[str, Any]:
    """Mirror a site's current results into ``dest``; a site not reported yet leaves it empty.

    Sites that share one directory (site=<name> runs one after the other) each find the
    others' own results there: a site that published from here (``published.json``) is
    left as it is, and only a pulled copy (it has the remote's ``run.json``) is ever
    removed, so a pull never deletes what this directory measured.
    """
    binary = rc.find_rclone()
    if (dest / PUBLISHED).exists():
        result = {"site": site, "found": True, "from": str(dest), "measured_here": True}
        write_json(out, result)
        return result
    for prefix in campaign_prefixes:
        current = f"{prefix}/results/{site}"
        run = _current_run(binary, current, flags)
        if run is None:
            continue
        dest.mkdir(parents=True, exist_ok=True)
        res = _run(binary, "sync", current, str(dest), flags=flags)
        if res.returncode != 0:
            why = _why(res.stderr)
            raise ExchangeError(f"cannot pull {site} results from {current}: {why}")
        result = {"site": site, "found": True, "from": current, **run}
        write_json(out, result)
        return result
    if (dest / RUN_FILE).exists():  # nothing published: a stale pulled copy must not pass
        shutil.rmtree(dest)
    result = {"site": site, "found": False, "looked_in": campaign_prefixes}
    write_json(out, result)
    return result


def campaign_manifest_exists(prefix: str, flags: tuple[str, ...]) -> bool:
    from cloudbench.campaign import paths  # a preflight's question: publish and pull need none

    res = _run(rc.find_rclone(), "cat", f"{prefix}/{paths.MANIFEST}", "--count", "1", flags=flags)
    return res.returncode == 0 and bool(res.stdout)
