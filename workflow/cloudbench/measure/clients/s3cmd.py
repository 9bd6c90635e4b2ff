"""s3cmd (the S3 command-line client many HPC centres document for their object stores)
as a client: S3 remotes only.

Its credentials come from the rclone remote in the AWS variables s3cmd reads when its
config file holds no keys (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``), never on its command line; the config file it is given (in the
job's private directory) holds only the endpoint, the addressing style and the region.

It moves one object at a time (large ones in sequential parts): its record says so
(``transfers`` and ``connections`` 1), whatever concurrency the setting asked; more
streams come from more clients. Its evidence is its own output, kept as the
measurement's log: one line per object (or part) with its bytes and seconds.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from cloudbench.binaries import Binary
from cloudbench.measure.clients.base import (
    TIMED_BY_OBJECT_SECONDS,
    Evidence,
    Kept,
)
from cloudbench.measure.clients.s3 import S3Access, S3Client, S3Copy

# upload: 'src' -> 's3://b/k' (3145728 bytes in 0.1 seconds, 57.17 MB/s) [1 of 2]
_MOVED_RE = re.compile(
    r"^(?:upload|download): '(?P<src>.*)' -> '(?P<dst>.*)' "
    r"\((?P<bytes>\d+) bytes in (?P<seconds>[\d.]+) seconds, [^)]*\)"
)


def config_text(access: S3Access) -> str:
    """s3cmd's config file: where and how to reach the store, no keys (s3cmd then reads
    them from the AWS variables). Path-style addressing is a host_bucket without the
    bucket in it; signature v4 in the remote's region."""
    if access.endpoint:
        parts = urlsplit(access.endpoint)
        host, https = parts.netloc, parts.scheme == "https"
    else:
        host, https = "s3.amazonaws.com", True
    bucket_host = host if access.path_style else f"%(bucket)s.{host}"
    lines = [
        "[default]",
        f"host_base = {host}",
        f"host_bucket = {bucket_host}",
        f"use_https = {https}",
        "signature_v2 = False",
        f"bucket_location = {access.region}",
    ]
    return "\n".join(lines) + "\n"


def moved(output: str) -> dict[str, tuple[int, float]]:
    """Each object s3cmd says it moved, by its destination: bytes and seconds (its parts
    added up)."""
    out: dict[str, tuple[int, float]] = {}
    for line in output.splitlines():
        m = _MOVED_RE.match(line.strip())
        if m:
            size, seconds = out.get(m["dst"], (0, 0.0))
            out[m["dst"]] = (size + int(m["bytes"]), seconds + float(m["seconds"]))
    return out


# each line's seconds are printed to a tenth
ROUNDING_S = 0.05


def lines_said(output: str) -> int:
    """How many lines of s3cmd's output say a transfer (one per object, or per part of a
    large one): each rounds its seconds to a tenth, so their sum is good to 0.05 s each."""
    return sum(1 for line in output.splitlines() if _MOVED_RE.match(line.strip()))


class S3cmd(S3Client):
    name = "s3cmd"
    binary = Binary("s3cmd", "CLOUDBENCH_S3CMD", "run `make` (installs it)")
    # Python's words for a socket error, as s3cmd's retries print them: "Retrying failed
    # request: /p/a ([Errno 111] Connection refused)"
    network_words = re.compile(
        r"\[Errno -?\d+\] (?:Connection refused|Connection reset by peer|No route to host"
        r"|Connection timed out|Network is unreachable|Name or service not known)"
    )

    def s3_command(self, copy: S3Copy) -> tuple[list[str], dict[str, str], dict[Path, str]]:
        """``s3cmd put|get --recursive``; an exact object list as ``--exclude '*'`` and one
        anchored regex per name (``--rinclude-from``: a glob would also take ``sub/name``).
        ``--no-preserve``: a downloaded file's time is when it arrived, not the source's."""
        config = copy.workdir / "s3cmd.cfg"
        verb = "put" if copy.direction == "upload" else "get"
        local = copy.local.rstrip("/") + "/"
        pair = [local, copy.url] if copy.direction == "upload" else [copy.url, local]
        argv = [copy.binary, "--config", str(config), verb, "--recursive", "--no-progress"]
        argv += ["--no-preserve", "--force"]
        files = {config: config_text(copy.access)}
        if copy.files is not None:
            names = copy.workdir / "s3cmd.objects"
            files[names] = "".join(f"^{re.escape(n)}$\n" for n in copy.files)
            argv += ["--exclude", "*", "--rinclude-from", str(names)]
        return [*argv, *pair], {}, files

    def evidence(self, kept: Kept) -> Evidence:
        """Its own output says both: each object's bytes and seconds (one at a time, so the
        seconds add up; its start-up and listing are not in them)."""
        log = kept.log
        output = log.read_text(errors="replace") if log.exists() else ""
        said = moved(output)
        return Evidence(
            bytes=sum(b for b, _s in said.values()),
            objects=len(said),
            seconds=round(sum(s for _b, s in said.values()), 3),
            source=f"s3cmd's output ({log.name})",
            timed_by=TIMED_BY_OBJECT_SECONDS,
            resolution_s=ROUNDING_S * lines_said(output),
        )


CLIENT = S3cmd()
