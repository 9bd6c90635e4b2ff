"""What surrounds a timed copy at a site: clearing a copy's place before it is measured
again, and keeping every attempt (its record and raw log) so nothing measured is lost.

The timed copy itself is :func:`cloudbench.measure.copy.measure`, the same for every client.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cloudbench.campaign.paths import LOG_SUFFIX, attempts_dir, live_log
from cloudbench.records import read_json, write_json


def purge(binary: str, prefix: str, flags: tuple[str, ...]) -> None:
    """Remove what an earlier, interrupted measurement left at ``prefix`` (absent is fine)."""
    # here, not at the top: the checks after a download keep their attempts with this module,
    # and need no rclone
    from cloudbench.measure import rclone as rc

    rc.run_helper(rc.helper_command(binary, "purge", prefix, extra_flags=flags))


def stamp_of(row: dict[str, Any]) -> str:
    """The name an attempt is kept under: its start, without ``:`` and ``-``."""
    return str(row["started_utc"]).replace(":", "").replace("-", "")


def keep_attempt(
    record_path: Path,
    record: dict[str, Any],
    log_path: Path | None = None,
    client_logs: Sequence[Path] = (),
) -> None:
    """Every attempt's record and client log, kept beside the current one.

    A rerun replaces the record Snakemake tracks; the history of failed attempts (and what
    they cost) stays in ``<record>.attempts/`` so nothing measured is ever lost.
    """
    stamp = stamp_of(record)
    folder = attempts_dir(record_path)
    write_json(folder / f"{stamp}.json", record)
    if log_path is not None and log_path.exists() and log_path.stat().st_size:
        shutil.copyfile(log_path, folder / f"{stamp}{LOG_SUFFIX}")
    for k, client_log in enumerate(client_logs):  # several clients: each one's own log
        if client_log.exists():
            shutil.copyfile(client_log, folder / f"{stamp}.client-{k}{LOG_SUFFIX}")
    for log in [*([log_path] if log_path is not None else []), *client_logs]:
        live_log(log).unlink(missing_ok=True)  # recorded: no longer an attempt to set aside


def attempted_before(record_path: Path, logs: Sequence[Path]) -> bool:
    """Whether this measurement was attempted here before: a kept attempt, or a log that an
    attempt killed before its record left (at its own path or its second name)."""
    folder = attempts_dir(record_path)
    if folder.is_dir() and any(folder.iterdir()):
        return True
    return any(p.exists() for log in logs for p in (log, live_log(log)))


def set_aside_unrecorded(record_path: Path, logs: Sequence[Path]) -> None:
    """Logs left by an attempt that never wrote its record (a job killed hard, or stopped
    with Ctrl-C) go into ``<record>.attempts/`` as ``<mtime>.unrecorded.<name>``, so the next
    attempt does not overwrite them; a log already kept by :func:`keep_attempt` just goes.
    Such a log is found at its own path or, when Snakemake has deleted that before the rerun,
    by its second name (:func:`cloudbench.campaign.paths.live_log`)."""
    from cloudbench.campaign.secrets import redact_file  # as purge's rclone: transfers only

    folder = attempts_dir(record_path)
    for log in logs:
        found = next((p for p in (log, live_log(log)) if p.exists()), None)
        data = found.read_bytes() if found is not None else b""
        kept = folder.is_dir() and any(
            p.suffix != ".json" and p.stat().st_size == len(data) and p.read_bytes() == data
            for p in folder.iterdir()
        )
        # an empty log with its second name is an attempt killed before its client said
        # anything (s3cmd prints a line per object, once it is moved): kept all the same, so
        # the attempt counts; an empty log without one is no attempt's
        started = live_log(log).exists()
        if (data and not kept) or (found is not None and not data and started):
            when = datetime.fromtimestamp(found.stat().st_mtime, UTC)
            folder.mkdir(parents=True, exist_ok=True)
            kept_as = folder / f"{when:%Y%m%dT%H%M%S.%fZ}.unrecorded.{log.name}"
            shutil.copyfile(found, kept_as)
            redact_file(kept_as)  # a killed job never scrubbed its log
        log.unlink(missing_ok=True)
        live_log(log).unlink(missing_ok=True)


def fresh_dir(path: Path) -> Path:
    """An empty directory: a repeat must move the data again, never find it already there."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def last_attempt(record_path: Path) -> dict[str, Any] | None:
    """The most recent kept attempt of a record (attempt files sort by start time)."""
    kept = sorted(attempts_dir(record_path).glob("*.json"))
    return read_json(kept[-1]) if kept else None
