"""The ledger of finished measurements: a transfer that finished while Snakemake stopped is
published again by the next run, never measured again.

Snakemake stopped (Ctrl-C to it alone, a scheduler signalling the head job) lets its running
jobs finish but does not register them: their outputs stay marked incomplete, and the next
run (``rerun-incomplete``) deletes them and runs the job again. The job is then the one to
know that its measurement is already made, through what it kept beside its record, in
``<record>.attempts/`` (never a declared output, so never deleted by Snakemake):

* ``<stamp>.json``: the attempt (cloudbench.measure.attempts.keep_attempt);
* ``<stamp>.record``: a second name (hard link) of the record as the job wrote it, dated one
  second before the attempt. Snakemake touches every output of a job it registers, so a
  record still older than its attempt was never registered: :func:`unregistered`. One that
  was registered and is run again (``--forcerun``, deleted by hand, its upload measured
  again) is measured again, as Snakemake asked;
* ``<stamp>.spec``: the job's spec: a campaign changed since measures again;
* ``<stamp>.out-<k>``: a copy of each other output (the series, a download's manifest).

:func:`republish` puts them back, the record last (a job with its record has every output),
as the same file as its second name, so that Snakemake's touch once it registers the job
is seen by the next run too. Nothing is asked of Snakemake but what it does to any job.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from cloudbench.campaign.paths import LOG_SUFFIX, attempts_dir, client_log
from cloudbench.measure.attempts import stamp_of

SEAL_SUFFIX = ".record"
SPEC_SUFFIX = ".spec"
NOT_REGISTERED_S = 1  # how much older than its attempt a record is left until registered


def _output_copy(folder: Path, stamp: str, k: int) -> Path:
    return folder / f"{stamp}.out-{k}"


def seal(record: Path, outputs: Sequence[Path], spec: str) -> None:
    """After a job kept its attempt: enter a measurement recorded ok into the ledger (a
    failed one is measured again anyway, and needs none)."""
    row = json.loads(record.read_text())
    if row.get("status") != "ok":
        return
    folder, stamp = attempts_dir(record), stamp_of(row)
    attempt = folder / f"{stamp}.json"
    for k, out in enumerate(outputs):
        shutil.copyfile(out, _output_copy(folder, stamp, k))
    (folder / f"{stamp}{SPEC_SUFFIX}").write_text(spec)
    second = folder / f"{stamp}{SEAL_SUFFIX}"
    second.unlink(missing_ok=True)
    os.link(record, second)
    left = attempt.stat().st_mtime_ns - NOT_REGISTERED_S * 1_000_000_000
    os.utime(second, ns=(left, left))


def unregistered(
    record: Path, outputs: int, spec: str | None = None, upload_record: Path | None = None
) -> str | None:
    """The stamp of this measurement's newest attempt when it is recorded ok and Snakemake
    never registered it (see the module), with its ``outputs`` other outputs kept and, when
    given, the same ``spec`` and no newer ``upload_record`` (the copy a download read was
    measured again since); None otherwise: measure."""
    folder = attempts_dir(record)
    attempts = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not attempts:
        return None
    attempt = attempts[-1]
    stamp = attempt.name.removesuffix(".json")
    second = folder / f"{stamp}{SEAL_SUFFIX}"
    try:
        if second.stat().st_mtime_ns >= attempt.stat().st_mtime_ns:
            return None  # touched: Snakemake registered it
        if json.loads(second.read_text()).get("status") != "ok":
            return None
        if spec is not None and (folder / f"{stamp}{SPEC_SUFFIX}").read_text() != spec:
            return None
        if upload_record is not None and upload_record.exists():
            if upload_record.stat().st_mtime_ns > attempt.stat().st_mtime_ns:
                return None
    except (OSError, ValueError):
        return None
    if not all(_output_copy(folder, stamp, k).exists() for k in range(outputs)):
        return None
    return stamp


def republish(
    record: Path, stamp: str, outputs: Sequence[Path], log: Path | None, clients: int = 1
) -> dict:
    """Put an unregistered measurement's outputs and its client logs back as its job left
    them, the record last; returns the record's row."""
    folder = attempts_dir(record)
    for k, out in enumerate(outputs):
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_output_copy(folder, stamp, k), out)
    if log is not None:
        kept = [(folder / f"{stamp}{LOG_SUFFIX}", log)]
        if clients > 1:
            kept += [
                (folder / f"{stamp}.client-{k}{LOG_SUFFIX}", client_log(log, k))
                for k in range(clients)
            ]
        for src, dst in kept:
            if src.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
    second = folder / f"{stamp}{SEAL_SUFFIX}"
    tmp = record.with_name(f".{record.name}.{stamp}.tmp")
    tmp.unlink(missing_ok=True)
    record.parent.mkdir(parents=True, exist_ok=True)
    os.link(second, tmp)
    os.replace(tmp, record)
    tmp.unlink(missing_ok=True)  # left when the record already was this file (rename(2))
    return json.loads(record.read_text())
