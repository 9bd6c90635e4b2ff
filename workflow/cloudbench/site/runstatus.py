"""What a site's detached run says about itself on the remote, and how it is shown.

A site's driver (cloudbench.site.driver) publishes one small JSON document,
``<bucket>/<campaign>/launch/<site>.json`` on every remote of the campaign, when it starts,
every ``status_every`` seconds while it runs and once more when it ends. Anyone with the
campaign file and read access to the remote sees every site's progress from it
(``cloudbench launch --status``), without ssh to any site. The document holds counts, the
host, times and the last line of the site's log (credentials redacted): never a credential.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STATUS_DIR = "launch"
QUEUED, WAITING, RUNNING = "queued", "waiting", "running"
FINISHED, FAILED = "finished", "failed"
ENDED = (FINISHED, FAILED)
# a site silent for longer than this many of its own update intervals (plus the grace, for
# a slow remote) is shown as stale: its driver, host or link to the remote may be gone
STALE_INTERVALS = 3
STALE_GRACE_S = 120.0
LAST_LINE_CHARS = 200


def status_path(prefix: str, site: str) -> str:
    """Where a site's status lives under a campaign prefix on one remote."""
    return f"{prefix}/{STATUS_DIR}/{site}.json"


def _seconds(utc: str) -> float:
    """Epoch seconds of a cloudbench UTC time (records.utc_now)."""
    return datetime.fromisoformat(utc.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def _short(utc: object) -> str:
    """A UTC time to the second, for people."""
    return f"{str(utc)[:19]}Z" if utc else "?"


def counts(campaign: Any, site: str, results: str | Path) -> dict[str, int]:
    """How many of the site's measurements are recorded ok or not ok, and how many are left,
    from the transfer records on disk (the same files transfers.tsv is built from)."""
    from cloudbench.campaign import paths

    out = {"ok": 0, "failed": 0, "left": 0, "total": 0}
    for m in campaign.measurements(campaign.site_named(site)):
        record = Path(paths.transfer_record(results, m.identity))
        out["total"] += 1
        try:
            status = json.loads(record.read_text()).get("status")
        except (OSError, ValueError):
            status = None
        if status is None:
            out["left"] += 1
        elif status == "ok":
            out["ok"] += 1
        else:  # failed, or kept as found (corrupt, unverified): the report says which
            out["failed"] += 1
    return out


def last_line(log: Path, secrets: Iterable[str] = ()) -> str:
    """The last non-empty line of the site's log, clipped, with credentials redacted."""
    from cloudbench.campaign.secrets import redact

    try:
        with open(log, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 8192))
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if line.strip():
            return redact(line.strip(), secrets)[:LAST_LINE_CHARS]
    return ""


def is_stale(doc: Mapping[str, Any], now: float) -> bool:
    """True for a run that says it is under way but has been silent too long (a batch job
    still queued says nothing until it starts: never stale)."""
    if doc.get("state") in (*ENDED, QUEUED):
        return False
    every = float(doc.get("status_every_s") or 60)
    return now - _seconds(doc["updated_utc"]) > STALE_INTERVALS * every + STALE_GRACE_S


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


def shown_state(doc: Mapping[str, Any] | None, now: float) -> str:
    """The one word a site's line starts with: its state, STALE, or 'no status'."""
    if doc is None:
        return "no status"
    return "STALE" if is_stale(doc, now) else str(doc.get("state"))


def site_line(site: str, doc: Mapping[str, Any] | None, now: float, width: int = 0) -> str:
    """One site's progress in one line (and its last log line on a second, indented)."""
    name = f"[{site}]".ljust(width + 2)
    if doc is None:
        return f"{name} no status on the remote yet (not started, or not reached the remote)"
    state = shown_state(doc, now)
    c = doc.get("measurements") or {}
    counted = f"{c.get('ok', 0)} ok, {c.get('failed', 0)} failed, {c.get('left', 0)} left"
    updated = _ago(now - _seconds(doc["updated_utc"]))
    where = f"on {doc.get('host')}" + (f" (job {doc['job']})" if doc.get("job") else "")
    line = f"{name} {state}: {counted} of {c.get('total', 0)}; {where}, since "
    line += f"{_short(doc.get('started_utc'))}, updated {updated} ago"
    if state == "STALE":
        line += f" (last said: {doc.get('state')})"
    if doc.get("detail"):
        line += f"; {doc['detail']}"
    if doc.get("last_line"):
        line += f"\n{' ' * (width + 3)}last: {doc['last_line']}"
    return line


def render(
    campaign: str, sites: Sequence[str], docs: Mapping[str, Mapping[str, Any] | None], now: float
) -> list[str]:
    """Every site's line, after one summary line: how many sites are in each state."""
    states = [shown_state(docs.get(s), now) for s in sites]
    tally = ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))
    width = max(len(s) for s in sites)
    return [f"campaign {campaign}: {len(sites)} sites: {tally}"] + [
        site_line(s, docs.get(s), now, width) for s in sites
    ]


def all_ended(sites: Sequence[str], docs: Mapping[str, Mapping[str, Any] | None]) -> bool:
    return all((docs.get(s) or {}).get("state") in ENDED for s in sites)


def read_status(
    binary: str,
    prefixes: Sequence[str],
    site: str,
    flags: Sequence[str],
    problems: list[str] | None = None,
) -> dict[str, Any] | None:
    """A site's newest status on any of the campaign's remotes (None if none has one).
    A remote that could not be read (not one without the file) is added to ``problems``:
    a site is not "silent" when it is the remote that does not answer."""
    from cloudbench.measure import rclone as rc
    from cloudbench.records import clip_tail

    found: list[dict[str, Any]] = []
    for prefix in prefixes:
        path = status_path(prefix, site)
        res = rc.run_helper(rc.helper_command(binary, "cat", path, extra_flags=flags), 120)
        if res.returncode not in rc.NOT_FOUND_EXITS and problems is not None:
            problems.append(f"cannot read {path}: {clip_tail(res.stderr)}")
        if res.returncode == 0 and res.stdout.strip():
            try:
                found.append(json.loads(res.stdout))
            except ValueError:
                continue  # a torn read; the next poll reads it whole
    return max(found, key=lambda d: d.get("updated_utc", ""), default=None)


def publish_status(
    binary: str, doc: Mapping[str, Any], prefixes: Sequence[str], flags: Sequence[str]
) -> list[str]:
    """Write the status to every remote; the problems, one per remote that did not take it."""
    from cloudbench.measure import rclone as rc
    from cloudbench.records import clip_tail, small_files, write_json

    problems = []
    with small_files("status") as tmp:
        local = tmp / "status.json"
        write_json(local, dict(doc))
        for prefix in prefixes:
            dest = status_path(prefix, str(doc["site"]))
            cmd = rc.helper_command(binary, "copyto", str(local), dest, extra_flags=flags)
            res = rc.run_helper(cmd, timeout=120)
            if res.returncode != 0:
                problems.append(f"cannot write {dest}: {clip_tail(res.stderr)}")
    return problems
