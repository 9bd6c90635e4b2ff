"""One measurement's timed copy, as every transfer job makes it: in the site's copy slot
(cloudbench.measure.slot), by one client in this process, or by the setting's N clients
started together (cloudbench.measure.group), each moving its own share and adding up to one
record. The steps around it (the store's gate, staging, the checks and the manifest after
it) are cloudbench.steps'.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cloudbench.campaign import paths
from cloudbench.campaign.spec import TransferSpec
from cloudbench.data.checksums import hash_stream
from cloudbench.measure import group as clients
from cloudbench.measure import rclone as rc
from cloudbench.measure import record as transfer
from cloudbench.measure import series as series_file
from cloudbench.measure import slot
from cloudbench.measure.attempts import set_aside_unrecorded
from cloudbench.measure.clients.base import CopyJob
from cloudbench.measure.copy import measure
from cloudbench.measure.progress import label_of
from cloudbench.records import read_json, small_files, timed_step, utc_now


def _objects_of(files: Sequence[dict[str, Any]]) -> list[str]:
    """Every object of these files (manifest entries), in file and chunk order."""
    return [c["object"] for f in files for c in f.get("chunks", [])] or [f["object"] for f in files]


def label(spec: TransferSpec, client: int | None = None) -> str:
    """The measurement as its job log's lines name it (a client of a group: with its index)."""
    said = label_of(spec.direction, spec.remote, spec.layout_label, spec.repeat, spec.setting_label)
    return said if client is None else f"{said} client {client}"


@dataclass(frozen=True)
class Copy:
    """One copy to time: which measurement, each client's threads (auto: the job's), from
    where to where, which files (manifest entries), and its client's log and series."""

    spec: TransferSpec
    threads: int
    src: str
    dst: str
    files: Sequence[dict[str, Any]]
    log: Path
    series: Path


def client_copy(
    copy: Copy,
    timeout: float | None = None,
    stall_s: float | None = None,
    client: int | None = None,
    ready: Callable[[], object] | None = None,
) -> transfer.TransferRecord:
    """One client's timed copy of its files, by the setting's tool: every client gets the
    exact object list, so nothing else that sits in the source is moved or counted. Past
    ``timeout`` seconds the client is ended and the copy fails."""
    spec, files = copy.spec, copy.files
    with small_files("copy") as tmp:
        job = CopyJob(
            direction=spec.direction,
            strategy=spec.layout.strategy,
            src=copy.src,
            dst=copy.dst,
            objects=tuple(_objects_of(files)),
            expected_bytes=sum(f["bytes"] for f in files),
            object_bytes=spec.layout.chunk_bytes or spec.file_bytes,
            threads=copy.threads,
            remote_url=spec.remote_url,
            log_path=copy.log,
            workdir=Path(tmp),
            flags=spec.flags,
            multi_thread_cutoff=spec.multi_thread_cutoff,
            multi_thread_chunk_size=spec.multi_thread_chunk_size,
            min_rclone_version=spec.min_rclone_version,
            template=spec.command_template,
        )
        rec = measure(
            job,
            spec.setting.tool,
            keys=spec.row_keys(),
            series_path=copy.series,
            label=label(spec, client),
            ready=ready,
            timeout=timeout,
            stall_s=stall_s,
            ask_store=store_check(spec),
        )
    return (
        rec.with_(files=len(files))
        if client is None
        else rec.with_(files=len(files), client=client)
    )


def timed_copy(
    copy: Copy, record: Path, timeout: float | None = None, stall_s: float | None = None
) -> transfer.TransferRecord:
    """One measurement of a copy, holding the site's copy slot (cloudbench.measure.slot): no
    other copy at the site overlaps it, whatever the scheduler's status command says. The
    wait is in ``waited_for_slot_s``, never in ``seconds``; the copy gets what the wait left
    of its ``timeout``, and a slot still taken past it fails the measurement unmeasured."""
    spec = copy.spec
    try:
        with slot.held(spec.scratch, timeout, label(spec)) as took:
            rec = _copy(copy, record, slot.remaining(timeout, took.waited_s), stall_s)
    except slot.SlotError as err:
        unmeasured = not_measured(spec, str(err), copy.series)
        return unmeasured.with_(waited_for_slot_s=err.waited_s)
    return rec.with_(waited_for_slot_s=took.waited_s)


def _copy(
    copy: Copy, record: Path, timeout: float | None, stall_s: float | None
) -> transfer.TransferRecord:
    """The copy by one client in this process, or by the setting's N clients each moving
    its own files, started together (:func:`group_copy`). Each client's parallelism is the
    setting's concurrency, or the job's threads (auto)."""
    spec, log = copy.spec, copy.log
    n = spec.setting.clients
    set_aside_unrecorded(record, [log] + [paths.client_log(log, k) for k in range(n)])
    each = replace(copy, threads=spec.setting.concurrency or copy.threads)
    if n == 1:
        return client_copy(each, timeout, stall_s)
    return group_copy(each, copy.threads, record, timeout, stall_s)


def group_copy(
    copy: Copy, job_threads: int, record: Path, timeout: float | None, stall_s: float | None
) -> transfer.TransferRecord:
    """The setting's N clients, each moving its share of the files (cloudbench.measure.group),
    started by the launcher with ``job_threads`` each; one record adding them up."""
    spec, log, n = copy.spec, copy.log, copy.spec.setting.clients
    folder = paths.clients_dir(record)
    plan = {
        "spec": spec.to_json(),
        "threads": copy.threads,
        "src": copy.src,
        "dst": copy.dst,
        "shares": clients.shares(copy.files, n),
        "logs": [str(paths.client_log(log, k)) for k in range(n)],
        "timeout": timeout,
        "stall_s": stall_s,
    }
    plan_path = clients.write_plan(folder, plan)
    for k in range(n):
        paths.client_log(log, k).unlink(missing_ok=True)
    # the measurement's own log names its clients' logs (it was left empty beside them), and
    # is written before they start: an attempt killed before any client wrote a line still
    # leaves it, so the rerun counts that attempt (its start time makes each one distinct)
    names = ", ".join(paths.client_log(log, k).name for k in range(n))
    index = {"time": utc_now(), "level": "info", "source": "cloudbench"}
    Path(log).write_text(json.dumps(index | {"msg": f"{n} clients: {names}"}) + "\n")
    paths.live_log(log).unlink(missing_ok=True)  # a second name: Snakemake deletes the log on rerun
    with contextlib.suppress(OSError):
        os.link(log, paths.live_log(log))
    exit_code, how = clients.run_clients(plan_path, n, job_threads, dict(os.environ))
    per = clients.read_clients(folder, n)
    group = clients.aggregate(per, n, spec.start_tolerance_s)
    write_group_series(copy.series, folder, per)
    return transfer.group_measured(
        spec.row_keys(),
        per,
        group,
        files=len(spec.files),
        launcher=how,
        launcher_exit=exit_code,
        src=copy.src,
        dst=copy.dst,
    )


def write_group_series(series: Path, folder: Path, per: Sequence[dict[str, Any] | None]) -> None:
    """The group's series: its clients' cumulative bytes (each its own share) added up on
    one clock, by the one convention of every series (cloudbench.measure.series).

    A client that counted nothing (an s5cmd upload: its bytes are seen only inside the
    tool, and by the listing after the group) has no part to add, so the group has no
    series, as one such client has none: a sum of zeros read as a copy that moved nothing
    from start to end (a user's 2-client s5cmd upload had a "stall" as long as the copy)."""
    got = [c for c in per if c is not None and c.get("started_epoch") is not None]
    first = min((c["started_epoch"] for c in got), default=0.0)
    counts = {
        c["client"]: series_file.read(clients.client_series_path(folder, c["client"])) for c in got
    }
    if any(not counts[c["client"]] and c.get("bytes_moved") is None for c in got):
        series_file.write(series, [])
        return
    inputs = []
    for c in got:
        points = counts[c["client"]]
        final = c.get("bytes_moved") or (points[-1][1] if points else 0)
        points.append((float(c.get("seconds") or 0.0), int(final)))
        inputs.append((c["started_epoch"] - first, points, int(final)))
    series_file.write(series, series_file.added_up(inputs))


def hash_share(local: Path, files: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A download client hashes its own files once its transfer is timed, so a share is
    checked on the node that fetched it, all clients at once; ``verify`` then compares
    the digests (noted with the file's identity, void if the file changes) to the manifest.
    Chunked copies are hashed by reassembly instead."""
    from cloudbench.data.checksums import write_digest_note

    with timed_step("hash") as t:
        for f in files:
            path = local / f["name"]
            if path.is_file():
                digest, _, nbytes = hash_stream([path])
                write_digest_note(path, digest, nbytes, source="client")
                t.nbytes += nbytes
    return {"bytes": t.nbytes, "seconds": round(t.seconds, 6)}


def run_client(plan_path: Path, index: int | None) -> None:
    """One client of a group (``cloudbench client``): wait for the others, move its share,
    write its record. A client that cannot take part records why, so the group fails with
    a reason instead of hanging."""
    plan = read_json(plan_path)
    folder = plan_path.parent
    spec = TransferSpec.from_json(plan["spec"])
    k, rank_from = clients.client_index(index, os.environ)
    n = len(plan["shares"])
    out = clients.client_record_path(folder, k)
    download = spec.direction == "download"
    # A download client writes (and a tool's sampler sees) only its own share, so the
    # group's series is a sum of disjoint parts; the files join the copy after the group.
    dst = clients.share_dir(Path(plan["dst"]), k) if download else plan["dst"]
    barrier = clients.StartBarrier(folder / "barrier", k, n)
    try:
        share = Copy(
            spec,
            plan["threads"],
            plan["src"],
            str(dst),
            plan["shares"][k],
            Path(plan["logs"][k]),
            clients.client_series_path(folder, k),
        )
        timeout, stall_s = plan.get("timeout"), plan.get("stall_s")
        rec = client_copy(share, timeout, stall_s, client=k, ready=barrier)
        # its start on the group's clock
        rec = transfer.TransferRecord.of(clients.on_group_clock(rec.as_json(), barrier.clock))
    except clients.ClientError as err:
        rec = transfer.client_failed(spec.row_keys(), k, str(err))
    if download:
        # Hashing reads the disk and uses cores: not while another client is still timed.
        try:
            rec = rec.with_(waited_for_group_s=clients.wait_for_end(folder / "barrier", k, n))
        except clients.ClientError as err:
            rec = rec.with_(waited_for_group_s=None, end_barrier=str(err))
        names = [f["name"] for f in plan["shares"][k]]
        clients.settle_share(dst, Path(plan["dst"]), names)
        if rec.status == "ok" and not spec.layout.chunk_bytes:
            rec = rec.with_(hashed=hash_share(Path(plan["dst"]), plan["shares"][k]))
    transfer.write(out, rec.with_(rank_from=rank_from))


def store_check(spec: TransferSpec, binary: str | None = None) -> Callable[[], str | None]:
    """One listing of the measurement's store, with a bookkeeping call's short patience:
    the network cause of its failure, or None when the store answered. The breaker asks it
    before a measurement, and a copy that has moved nothing for ``store_down.stall``."""
    return lambda: rc.store_unreachable(binary or rc.find_rclone(), spec.remote_url, spec.flags)


def not_measured(spec: TransferSpec, reason: str, series: Path) -> transfer.TransferRecord:
    """The record of a measurement that could not start (a failure to measure again), and
    its empty series."""
    series_file.write(series, ())
    files = len(spec.files)
    return transfer.not_measured(spec.row_keys(), reason, files, spec.file_bytes * files)
