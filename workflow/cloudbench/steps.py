"""What each transfer rule does: one function per rule, I/O at the edges, records out.

Every function writes its outputs atomically and returns nothing; the CLI maps rules to them.
A transfer reads as one straight path, gate, stage, copy (cloudbench.measure.timed), check,
publish, record: ``upload`` and ``download`` first, then each part in that order. The steps
that move no data have modules of their own, so that their jobs import no client: the data
steps and ``stage`` (cloudbench.data.steps), ``reassemble`` and ``verify``
(cloudbench.measure.check); they are named here too.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudbench.campaign import paths
from cloudbench.campaign.clients import info_of
from cloudbench.campaign.secrets import redact, secret_values
from cloudbench.campaign.spec import TransferSpec
from cloudbench.data.checksums import is_digest_note, xxh128sum_line
from cloudbench.data.steps import (
    DatasetSpec,
    StepError,
    ensure_chunks,
    ensure_file,
    file_hashes,
)
from cloudbench.data.steps import stage as stage
from cloudbench.measure import arrival, ledger, timed
from cloudbench.measure import group as clients
from cloudbench.measure import rclone as rc
from cloudbench.measure import record as transfer
from cloudbench.measure.attempts import (
    attempted_before,
    fresh_dir,
    keep_attempt,
    last_attempt,
    purge,
)
from cloudbench.measure.check import reassemble as reassemble
from cloudbench.measure.check import verify as verify
from cloudbench.measure.clients import load
from cloudbench.measure.progress import label_of, result_line
from cloudbench.measure.rclonelog import network_cause
from cloudbench.records import (
    clip_tail,
    host_info,
    process_seconds,
    small_files,
    utc_now,
    write_json,
)
from cloudbench.site import breaker

COPY_MANIFEST, OBJECTS, CHECKSUMS = paths.MANIFEST, paths.OBJECTS, paths.CHECKSUMS


# --- the transfers: gate, stage, copy, check, publish, record, in that order ----------------


@dataclass(frozen=True)
class Job:
    """What every transfer job is given: its measurement, its threads, where its record,
    its client's log and its series go, and its limits: the copy's time limit
    (measure.copy.copy_timeout), the seconds the steps after it share (``after_copy_s``:
    what the copy's limit leaves of the walltime), the store_down policy."""

    spec: TransferSpec
    threads: int
    record: Path
    log: Path
    series: Path
    timeout: float | None = None
    after_copy_s: float | None = None
    policy: breaker.Policy = field(default_factory=breaker.Policy)


def upload(job: Job, dataset_dir: Path, chunks_root: Path, checksum_jsons: Sequence[Path]) -> None:
    """Timed upload of one copy; its manifest is written after, untimed, only if it is whole.
    Gate, stage, copy, check, publish, record; the listing and the manifest after the copy
    share ``job.after_copy_s``, so the job never outruns its walltime.

    rclone gets the exact object list (--files-from), so nothing else that happens to sit in
    scratch (Snakemake's timestamp files, a stray partial file) is moved or counted.
    """
    spec, threads, record, log, series = job.spec, job.threads, job.record, job.log, job.series
    timeout, policy = job.timeout, job.policy
    if published_again(spec, record, [series], log):
        return
    refuse_if_store_down(spec, policy)
    binary = rc.find_rclone()
    hashes = file_hashes(checksum_jsons)
    regenerated = stage_upload_data(spec, hashes, dataset_dir, chunks_root)
    down, outage = store_gate(binary, spec, policy)
    if down:
        _finish(record, timed.not_measured(spec, down, series).with_(outage), log)
        return
    abort_error = clear_earlier_attempt(binary, spec, record, log)
    paths.listing(record).unlink(missing_ok=True)  # an earlier attempt's
    src = _upload_source(spec, dataset_dir, chunks_root)
    objects = f"{spec.data_prefix}/{OBJECTS}"
    man = copy_manifest(spec, hashes)
    copy = timed.Copy(spec, threads, str(src), objects, man["files"], log, series)
    rec = timed.timed_copy(copy, record, timeout, policy.stall_s)
    rec = rec.with_(regenerated=regenerated, multipart_abort_error=abort_error)
    left = _time_left(job.after_copy_s)
    if rec.status == "ok":
        rec = check_upload_arrived(
            binary, spec, objects, man, rec, left(), listing=paths.listing(record)
        )
    if rec.status == "ok":
        rec = publish_copy_manifest(binary, spec, man, rec, left())
    _record_copy(spec, record, log, rec, timeout, outage)
    ledger.seal(record, [series], spec.to_json())


def download(job: Job, manifest_out: Path, upload_record: Path | None = None) -> None:
    """Timed download of one copy into a fresh directory: gate, the copy's manifest, copy,
    record (nothing after the copy talks to the store: ``job.after_copy_s`` is unused).

    A copy whose upload failed, or a store that cannot be read, is recorded as failed (the
    next run measures it again); a copy that is not there at all stops the run with the
    upload site to run first. A failed copy's partial data is removed when the attempt
    ends (a full disk must not cascade into the next measurement).
    """
    spec, threads, record, log, series = job.spec, job.threads, job.record, job.log, job.series
    timeout, policy = job.timeout, job.policy
    outputs = [series, manifest_out]
    # the data it left is what verify reads next: without it, measure again
    if spec.local_dir.exists() and published_again(spec, record, outputs, log, upload_record):
        return
    refuse_if_store_down(spec, policy)
    down, outage = store_gate(rc.find_rclone(), spec, policy)
    if down:
        _not_downloaded(spec, down, outage, manifest_out, record, log, series)
        return
    man, reason, noted = copy_to_read(spec, upload_record)
    if man is None:
        _not_downloaded(spec, reason, outage | noted, manifest_out, record, log, series)
        return
    seen = transfer.copy_seen(man)  # before anything else: the moment this site could read it
    paths.listing(record).unlink(missing_ok=True)  # an earlier attempt's
    write_json(manifest_out, man)
    local = fresh_dir(spec.local_dir)
    source = f"{spec.data_prefix}/{OBJECTS}"
    copy = timed.Copy(spec, threads, source, str(local), man["files"], log, series)
    rec = timed.timed_copy(copy, record, timeout, policy.stall_s)
    # what arrived, kept beside the record (a client without a timed log is traced by it);
    # not the digest notes a group's clients wrote beside their files after the timed copy
    arrived = rc.local_objects(local)
    arrival.write_listing(
        paths.listing(record), {n: v for n, v in arrived.items() if not is_digest_note(n)}
    )
    if rec.status == "failed":
        shutil.rmtree(local, ignore_errors=True)  # partial data: nothing will read it
    _record_copy(spec, record, log, rec, timeout, seen, outage)
    ledger.seal(record, outputs, spec.to_json())


# --- gate: whether this measurement runs, and what it reads ---------------------------------


def published_again(
    spec: TransferSpec,
    record: Path,
    outputs: Sequence[Path],
    log: Path,
    upload_record: Path | None = None,
) -> bool:
    """A measurement recorded ok that Snakemake never registered (it finished while
    Snakemake stopped): its outputs are published again as its job left them, and nothing
    is measured (cloudbench.measure.ledger). The job log says so, then the result line."""
    stamp = ledger.unregistered(record, len(outputs), spec.to_json(), upload_record)
    if stamp is None:
        return False
    row = ledger.republish(record, stamp, outputs, log, spec.setting.clients)
    label = timed.label(spec)
    print(
        f"cloudbench: {label}: kept, not measured again: it was recorded ok at "
        f"{row.get('started_utc')} and finished while Snakemake stopped; its outputs are "
        f"published again from {paths.attempts_dir(record)}",
        file=sys.stderr,
    )
    print(result_line(label, row), file=sys.stderr, flush=True)
    return True


def refuse_if_store_down(spec: TransferSpec, policy: breaker.Policy) -> None:
    """A measurement whose store's breaker opened during this run fails at once, before any
    request and without a record, in one line naming the breaker (cloudbench.site.breaker):
    the run's rule for a failed job, not a record, keeps it from counting as measured."""
    state = breaker.refused(spec.scratch, spec.site, spec.remote, policy)
    if state is not None:
        raise StepError(breaker.refusal(state))


def store_gate(
    binary: str, spec: TransferSpec, policy: breaker.Policy
) -> tuple[str | None, dict[str, Any]]:
    """Why not to start this measurement (None: go), and its outage columns. Only a store
    that has failed lately costs anything here: one listing (~1 s when it answers), or none
    at all while the site's breaker is open. Without it a copy's first request against a
    dead store spends rclone's whole patience (about 8 minutes at its defaults)."""
    return breaker.gate(
        spec.scratch,
        spec.site,
        spec.remote,
        policy,
        timed.store_check(spec, binary),
        by=timed.label(spec),
        url=redact(spec.remote_url, secret_values()),
    )


def note_store(
    spec: TransferSpec, status: str, error: str | None, stalled_since: float | None = None
) -> dict[str, Any]:
    """After a step's requests: a failure that names a network error counts against the
    store at this site (cloudbench.site.breaker); anything else is an answer and clears the
    count. Returns the row's outage columns."""
    cause = load(spec.setting.tool).network_cause(error or "") if status != "ok" else None
    return breaker.note(
        spec.scratch,
        spec.site,
        spec.remote,
        cause,
        timed.label(spec),
        stalled_since,
        redact(spec.remote_url, secret_values()),
    )


class RemoteUnreachable(RuntimeError):
    """The copy's manifest could not be read for another reason than its absence."""


def fetch_copy_manifest(spec: TransferSpec) -> dict[str, Any] | None:
    """One copy's manifest from the remote; None when the copy is not (completely) there.

    A store that cannot be read (down, refusing, timing out) raises RemoteUnreachable: that
    is a failed measurement to retry, not a missing upload.
    """
    res = rc.read_object(rc.find_rclone(), spec.data_prefix, COPY_MANIFEST, spec.flags)
    if res.returncode == 0 and res.stdout.strip():
        return json.loads(res.stdout)
    if res.returncode in rc.NOT_FOUND_EXITS:  # 0 with nothing printed: no such object
        return None
    last = network_cause(res.stderr) or clip_tail(
        (res.stderr.strip().splitlines() or ["rclone failed"])[-1]
    )
    raise RemoteUnreachable(
        f"cannot read {spec.data_prefix}/{COPY_MANIFEST}: {redact(last, secret_values())}"
    )


def _failed_upload(upload_record: Path | None) -> str | None:
    if upload_record is None or not upload_record.exists():
        return None
    rec = transfer.read(upload_record)  # the upload's record, checked as every record is
    return None if rec.status == "ok" else f"upload of this copy {rec.status}: {rec.error}"


def copy_to_read(
    spec: TransferSpec, upload_record: Path | None
) -> tuple[dict[str, Any] | None, str, dict[str, Any]]:
    """The copy's manifest, or why there is none to read (its upload failed, the store did
    not answer) with the outage columns that says; a copy that is not there at all stops
    the run with the upload site to run first."""
    try:
        man = fetch_copy_manifest(spec)
    except RemoteUnreachable as err:
        return None, str(err), note_store(spec, "failed", str(err))
    if man is not None:
        return man, "", {}
    reason = _failed_upload(upload_record)
    if reason is None:
        raise StepError(
            f"campaign {spec.campaign!r}: no complete upload at {spec.data_prefix} "
            f"({COPY_MANIFEST} missing); run the upload site {spec.upload_site!r} first"
        )
    # the store's failure only when it did not answer: a failed upload's error, quoted in the
    # reason, may name a network cause the store has since recovered from
    return None, reason, note_store(spec, "ok", None)


# --- stage: the copy's files in scratch and its place on the store --------------------------


def copy_manifest(spec: TransferSpec, hashes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The self-description of one copy on the remote: present only when the copy is whole."""
    layout = spec.layout
    files = []
    for name in spec.files:
        h = hashes[name]
        entry: dict[str, Any] = {"name": name, "bytes": h["bytes"], "xxh128": h["xxh128"]}
        if layout.strategy == "chunked":
            digests = h["chunks"][str(layout.chunk_bytes)]
            entry["chunk_bytes"] = layout.chunk_bytes
            entry["chunks"] = [
                {"object": f"{name}/{name}.{i:0{spec.chunk_width}d}", "xxh128": d}
                for i, d in enumerate(digests)
            ]
        else:
            entry["object"] = name
        files.append(entry)
    return {
        "format": "cloudbench-copy/1",
        "campaign": spec.campaign,
        "layout": layout.label,
        "strategy": layout.strategy,
        "chunk_bytes": layout.chunk_bytes,
        "repeat": spec.repeat,
        "objects_prefix": OBJECTS,
        "files": files,
    }


def stage_upload_data(
    spec: TransferSpec, hashes: dict[str, dict[str, Any]], dataset_dir: Path, chunks_root: Path
) -> list[str]:
    """Make sure the copy's files (or chunks) are in scratch and are the dataset's, making
    again what is missing or changed: the names of the files made again."""
    layout = spec.layout
    dataset = DatasetSpec(spec.campaign, spec.upload_site, spec.file_bytes, spec.seed)
    regenerated = []
    for name in spec.files:
        expected = hashes[name]["xxh128"]
        if layout.strategy == "chunked":
            made = ensure_chunks(
                dataset, dataset_dir, chunks_root, name, layout.chunk_bytes, expected
            )
        else:
            made = ensure_file(dataset, dataset_dir, name, expected)
        if made:
            regenerated.append(name)
    return regenerated


def _upload_source(spec: TransferSpec, dataset_dir: Path, chunks_root: Path) -> Path:
    layout = spec.layout
    return chunks_root / layout.chunk_label if layout.strategy == "chunked" else dataset_dir


def clear_copy(binary: str, spec: TransferSpec, prefix: str) -> str | None:
    """Empty a copy's place before it is measured again: objects and unfinished multipart
    uploads an interrupted attempt left behind (those are billed though no listing shows
    them). Returns why the multipart uploads could not be aborted, if so: the measurement
    still runs (a dead store fails it, and says so); ``cleanup`` aborts them later."""
    purge(binary, prefix, spec.flags)
    if rc.backend_type(binary, spec.remote_url) not in rc.MULTIPART_BACKENDS:
        return None
    err = rc.abort_multipart(binary, prefix, spec.flags)
    return redact(err, secret_values()) if err else None


def clear_earlier_attempt(binary: str, spec: TransferSpec, record: Path, log: Path) -> str | None:
    """Empty the copy's place when an earlier attempt may have left something there
    (:func:`clear_copy`); why its multipart uploads could not be aborted, if so.

    Only a copy measured before (this run or an earlier one left its attempt here) can have
    left objects or unfinished uploads at its place: clearing costs round trips to the store
    on every measurement otherwise. A copy some other checkout left there is caught all the
    same: rclone skipping an object fails the measurement, which the next attempt clears."""
    logs = [log, *(paths.client_log(log, k) for k in range(spec.setting.clients))]
    return clear_copy(binary, spec, spec.data_prefix) if attempted_before(record, logs) else None


# --- check and publish: what arrived, and the manifest that says it is whole ----------------


def _time_left(budget_s: float | None) -> Callable[[], float]:
    """Seconds left of ``budget_s`` from now, for each step after the copy in turn (at least
    one: a step with none left fails at once, as a timeout, not after the walltime)."""
    import time

    if budget_s is None:
        return lambda: rc.HELPER_TIMEOUT_S
    end = time.monotonic() + budget_s
    return lambda: max(1.0, min(rc.HELPER_TIMEOUT_S, end - time.monotonic()))


def check_upload_arrived(
    binary: str,
    spec: TransferSpec,
    prefix: str,
    man: dict[str, Any],
    rec: transfer.TransferRecord,
    timeout: float = rc.HELPER_TIMEOUT_S,
    listing: Path | None = None,
) -> transfer.TransferRecord:
    """After a timed upload, one untimed listing of the copy's prefix: every object with its
    size, whatever client moved it. A copy that is not whole fails the measurement (and its
    manifest is never published, so no download reads it); each client whose share is not
    whole is named. Where the client itself counts no bytes, ``bytes_moved`` is the
    listing's. Returns the record, with what the listing found; the listing (with each
    object's time) is kept at ``listing``."""
    try:
        objects = rc.list_objects(binary, prefix, spec.flags, timeout)
    except rc.ListingError as err:
        return transfer.failed(rec, redact(str(err), secret_values()))
    if listing is not None:
        arrival.write_listing(listing, objects)
    found = {name: size for name, (size, _t) in objects.items()}
    whole = arrival.compare(arrival.object_sizes(man["files"]), found)
    n = int(spec.setting.clients)
    per = [dict(c) for c in rec.get("per_client") or []]
    parts = (
        [arrival.compare(arrival.object_sizes(s), found) for s in clients.shares(man["files"], n)]
        if n > 1
        else []
    )
    if not info_of(spec.setting.tool).counts_own_bytes:
        rec = rec.with_(bytes_moved=whole.bytes_found, bytes_moved_from=arrival.MOVED_FROM_LISTING)
        for c, part in zip(per, parts, strict=False):  # each client's own share, listed
            c.update(bytes_moved=part.bytes_found)
    if per:
        rec = rec.with_(per_client=per)
    if whole.whole:
        return rec
    errors = []
    if n > 1:
        for k, part in enumerate(parts):
            if not part.whole:
                errors.append(part.problem(f"client {k} ({spec.setting.tool})"))
                if k < len(per):
                    per[k].update(status="failed", error=errors[-1], mb_per_s=None)
    return transfer.failed(
        rec.with_(per_client=per) if per else rec,
        "; ".join(errors) or whole.problem(spec.setting.tool),
    )


def publish_copy_manifest(
    binary: str,
    spec: TransferSpec,
    man: dict[str, Any],
    rec: transfer.TransferRecord,
    timeout: float,
) -> transfer.TransferRecord:
    """After a whole upload, its manifest on the store, saying who uploaded it and when:
    the manifest marks the copy complete (the file hashes are in it, and in checksums.xxh128
    beside the campaign's manifest, which is written once a run). A manifest that cannot be
    published fails the measurement."""
    man["uploaded_by"] = {
        "site": spec.site,
        "host": rec.get("host"),
        "finished_utc": utc_now(),
        "rclone_version": rec.get("rclone_version"),
        "tool": rec.tool,
        "tool_version": rec.get("tool_version"),
        "started_utc": rec.get("started_utc"),
    }
    with small_files("publish") as tmp:
        man_path = Path(tmp) / COPY_MANIFEST
        write_json(man_path, man)
        dst = f"{spec.data_prefix}/{COPY_MANIFEST}"
        res = rc.publish_file(binary, man_path, dst, spec.flags, timeout)
    if res.returncode != 0:
        return transfer.failed(rec, f"publishing {COPY_MANIFEST}: {clip_tail(res.stderr)}")
    return rec


# --- record ---------------------------------------------------------------------------------


def _record_copy(
    spec: TransferSpec,
    record: Path,
    log: Path,
    rec: transfer.TransferRecord,
    timeout: float | None,
    *columns: dict[str, Any],
) -> None:
    """The end of every timed copy: its time limit (:func:`outran_twice`), what it says of
    the store (:func:`note_store`), the columns the steps before it found (its outage, when
    the copy was seen), then its record (:func:`_finish`)."""
    rec = outran_twice(record, rec, timeout)
    noted = note_store(spec, rec.status, rec.error, rec.get("stalled_since_epoch"))
    found: dict[str, Any] = {}
    for more in columns:
        found |= more
    _finish(record, rec.with_(found | noted), log)


def outran_twice(
    record: Path, rec: transfer.TransferRecord, timeout: float | None
) -> transfer.TransferRecord:
    """:func:`cloudbench.measure.record.outran_twice`, against this record's last attempt."""
    return transfer.outran_twice(rec, timeout, lambda: last_attempt(record), str(record))


def _not_downloaded(
    spec: TransferSpec,
    reason: str,
    columns: dict[str, Any],
    manifest_out: Path,
    record: Path,
    log: Path,
    series: Path,
) -> None:
    """A download that could not start: its manifest says why, and so does its record."""
    write_json(manifest_out, {"files": [], "missing": reason})
    # the record last: a job with its record has every output
    _finish(record, timed.not_measured(spec, reason, series).with_(columns), log)


def _finish(record: Path, rec: transfer.TransferRecord, log: Path) -> None:
    """Keep the attempt, write the record Snakemake tracks, and end the job log with one
    result line a person can read."""
    n = int(rec.clients or 1)
    # the whole job's seconds so far (Python's start, bookkeeping calls, the timed copy): what
    # orchestration costs per measurement is this less the copy's ``seconds`` (make bench)
    rec = rec.with_(job_seconds=process_seconds())
    transfer.write(record, rec)
    row = rec.as_json()
    # the attempt after the record: while the record says failed, the attempt is an input of
    # the measurement newer than its output, so the next run measures it again even where
    # Snakemake never registered this job (site.jobenv.failed_attempt)
    keep_attempt(record, row, log, [paths.client_log(log, k) for k in range(n)] if n > 1 else ())
    label = label_of(rec.direction, rec.remote, rec.layout, rec.repeat, rec.setting)
    print(result_line(label, row), file=sys.stderr, flush=True)


# --- the campaign's manifest ----------------------------------------------------------------


def campaign_manifest(
    info: dict[str, Any], checksum_jsons: Sequence[Path], upload_records: Sequence[Path], out: Path
) -> None:
    """The campaign's index on every remote: dataset, hashes, and which copies are complete.

    Download sites and ``aggregate`` start from it; the per-copy manifests stay the
    authority for each copy, so a copy listed here as failed is never downloaded.
    """
    hashes = file_hashes(checksum_jsons)
    copies = []
    for p in upload_records:
        r = transfer.read(p)  # an upload's record, checked as every record is
        copies.append(
            {
                k: r.get(k)
                for k in (
                    "remote",
                    "layout",
                    "strategy",
                    "chunk_bytes",
                    "repeat",
                    "status",
                    "destination",
                    "started_utc",
                    "rclone_version",
                    "host",
                    "site",
                )
            }
        )
    manifest = {
        "format": "cloudbench-campaign/1",
        **info,
        "files": [
            {"name": n, "bytes": h["bytes"], "xxh128": h["xxh128"], "chunks": h["chunks"]}
            for n, h in sorted(hashes.items())
        ],
        "copies": copies,
        "written_utc": utc_now(),
        **host_info(),
    }
    write_json(out, manifest)
    # every copy holds the same files: one checksum list per campaign, for `xxh128sum -c`
    sums = out.with_name(CHECKSUMS)
    sums.write_text("".join(xxh128sum_line(h["xxh128"], n) for n, h in sorted(hashes.items())))
    binary = rc.find_rclone()
    for remote in info["remotes"]:
        for path in (sums, out):  # the manifest last: it names what is complete
            dst = f"{remote['prefix']}/{path.name}"
            res = rc.run_helper(
                rc.helper_command(
                    binary, "copyto", str(path), dst, extra_flags=tuple(info.get("flags", ()))
                )
            )
            if res.returncode != 0:
                raise StepError(f"cannot publish {path.name} to {dst}: {clip_tail(res.stderr)}")
