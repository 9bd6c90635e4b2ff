"""The answer as a command: the bash lines a user types to move their own data the way a
measured setting moved cloudbench's (its tool, strategy, clients and concurrency).

Each client builds its own lines (:meth:`cloudbench.measure.clients.base.Client.user_command`,
from the same builder as the measured copy); here only what every client shares: a
chunked upload's split step before the copy and a chunked download's reassembly after
it, and a note for settings of several clients. Nothing is run and nothing is written;
a remote this environment defines is read (its endpoint), and no credential's value is
ever in a line.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.campaign.clients import info_of
from cloudbench.campaign.model import (
    DIRECTIONS,
    MULTI_STREAM_STRATEGIES,
    STRATEGIES,
    Layout,
    Setting,
)
from cloudbench.campaign.secrets import redact, secret_values
from cloudbench.data.chunking import chunk_index_width
from cloudbench.measure import clients
from cloudbench.measure.clients.base import CopyRequest

# The user's directory, to replace: quoted in every line (its < >), so a path with spaces
# put in its place stays one word
LOCAL_DIR = "<your-directory>"
CHUNKS_SUFFIX = ".chunks"  # the chunks' directory beside it: <local_dir>.chunks
# Digits of a chunk's index when the files' size is not given: a million chunks a file
# (GNU split stops with "output file suffixes exhausted" beyond, never misnames one)
WIDE_INDEX = 6


@dataclass(frozen=True)
class UserCopy:
    """One measured setting, as the copy a user would run with it.

    ``remote``: ``name:bucket/prefix`` (the rclone remote; the S3 tools reach its S3 side).
    ``concurrency``: the setting's (for ``auto``, the threads its records ran with).
    ``flags``, ``multi_thread_*``: the campaign's rclone settings; ``template``: the
    ``command`` client's. ``file_bytes``: the size of the user's files, so chunk names are
    cloudbench's (``<file>/<file>.<index>``, as wide); None: ``WIDE_INDEX`` digits.
    ``backend``: the remote's rclone type as the records name it (None: asked of rclone).
    ``config_dir``: where a client's small config file is written (the AWS CLI's, s3cmd's).
    """

    tool: str
    direction: str  # upload | download
    strategy: str  # plain | chunked | multithread
    concurrency: int
    remote: str
    clients: int = 1
    chunk_bytes: int = 0
    local_dir: str = LOCAL_DIR
    chunk_dir: str | None = None  # None: <local_dir>.chunks
    flags: tuple[str, ...] = ()
    multi_thread_cutoff: int = 0
    multi_thread_chunk_size: int = 0
    template: str | None = None
    file_bytes: int | None = None
    backend: str | None = None
    config_dir: str = "."

    @property
    def chunks(self) -> str:
        return self.chunk_dir or self.local_dir.rstrip("/") + CHUNKS_SUFFIX

    @property
    def index_width(self) -> int:
        if self.file_bytes is None:
            return WIDE_INDEX
        return chunk_index_width(self.file_bytes, self.chunk_bytes)


def user_lines(spec: UserCopy) -> list[str]:
    """The bash lines, in order, that move ``spec.local_dir`` to or from ``spec.remote`` as
    the setting did: comments (``#``) say what is not a command (the setting, where the
    credentials come from, how to run several clients); every word is shlex-quoted.

    Chunked: an upload first splits each file of the directory with GNU ``split`` into
    ``<chunks>/<file>/<file>.<index>`` (cloudbench's objects, ``index`` from 0, zero-padded
    so the names sort in order) and copies that directory; a download copies the objects
    into it, then joins each file's chunks in order (``cat``) into the directory. Only the
    files directly in the directory are split (cloudbench refuses chunked for nested ones).

    ValueError for a spec no measurement could have had.
    """
    _check(spec)
    upload = spec.direction == "upload"
    chunked = spec.strategy == "chunked"
    here = spec.chunks if chunked else spec.local_dir
    src, dst = (here, spec.remote) if upload else (spec.remote, here)
    request = CopyRequest(
        src,
        dst,
        concurrency=spec.concurrency,
        workdir=Path(spec.config_dir),
        template=spec.template,
        strategy=spec.strategy,
        flags=spec.flags,
        multi_thread_cutoff=spec.multi_thread_cutoff,
        multi_thread_chunk_size=spec.multi_thread_chunk_size,
        backend=spec.backend,
        instrumented=False,
        direction=spec.direction,
    )
    layout = Layout(spec.strategy, spec.chunk_bytes if chunked else 0)
    setting = Setting(spec.tool, spec.clients, spec.concurrency)
    lines = [f"# cloudbench: {setting.label}, {layout.label} {spec.direction}, {spec.remote}"]
    if spec.clients > 1:
        lines.append(
            f"# the setting ran {spec.clients} clients at once (one per node), each moving its "
            f"own 1/{spec.clients} of the files: as printed, the copy line moves them all; "
            f"to do the same, put each share in a directory of its own (all chunks of a file "
            f"in one share) and run the line once per share, {spec.clients} at the same time"
            if chunked
            else f"# the setting ran {spec.clients} clients at once (one per node), each moving "
            f"its own 1/{spec.clients} of the files: as printed, the copy line moves them all; "
            f"to do the same, put each share in a directory of its own and run the line once "
            f"per share, {spec.clients} at the same time"
        )
    if upload and chunked:
        lines.append(split_line(spec.local_dir, spec.chunks, spec.chunk_bytes, spec.index_width))
    own = clients.load(spec.tool).user_command(request)  # its copy last
    lines += own[:-1] + ([] if upload else [shlex.join(["mkdir", "-p", here])]) + own[-1:]
    if not upload and chunked:
        lines.append(join_line(spec.chunks, spec.local_dir))
    secrets = secret_values()  # a second guard: the clients put none in
    return [redact(line, secrets) for line in lines]


def split_line(local_dir: str, chunks: str, chunk_bytes: int, width: int) -> str:
    """Each file directly in ``local_dir`` split into ``chunks/<file>/<file>.<index>``; its
    first chunk made empty beforehand, which ``split`` overwrites, so an empty file is one
    empty chunk (as cloudbench's: ``split`` alone writes none, and it would be lost)."""
    split = shlex.join(["split", "-b", str(chunk_bytes), "-d", "-a", str(width), "--"])
    into = f'{shlex.quote(chunks)}/"$n"'
    return (
        f'for f in {_glob(local_dir)}; do [ -f "$f" ] || continue; n=${{f##*/}}; '
        f'mkdir -p {into} && : > {into}/"$n".{0:0{width}d} && '
        f'{split} "$f" {into}/"$n". || break; done'
    )


def join_line(chunks: str, local_dir: str) -> str:
    """Each ``chunks/<file>/`` joined, its chunks in index order, into ``local_dir/<file>``."""
    return (
        f"mkdir -p {shlex.quote(local_dir)} && for d in {_glob(chunks)}/; do "
        f'n=$(basename "$d"); cat "$d$n".* > {shlex.quote(local_dir)}/"$n" || break; done'
    )


def _glob(directory: str) -> str:
    """``directory/*`` for bash: the directory quoted, the star not."""
    return f"{shlex.quote(directory.rstrip('/') or '/')}/*"


def _check(spec: UserCopy) -> None:
    info = info_of(spec.tool)  # ValueError naming the known clients
    if spec.direction not in DIRECTIONS:
        raise ValueError(f"direction {spec.direction!r}: upload or download")
    if spec.strategy not in STRATEGIES:
        raise ValueError(f"strategy {spec.strategy!r}: one of {', '.join(STRATEGIES)}")
    if spec.strategy in MULTI_STREAM_STRATEGIES and not info.multithread:
        raise ValueError(f"{spec.tool} cannot split one file into streams ({spec.strategy})")
    if spec.strategy == "chunked" and spec.chunk_bytes < 1:
        raise ValueError("chunked needs chunk_bytes of at least 1")
    if spec.concurrency < 1 or spec.clients < 1:
        raise ValueError("concurrency and clients are at least 1")
    if info.needs_template and not spec.template:
        raise ValueError(f"{spec.tool} needs its template")


# The prefix of the user's own data under the campaign's bucket, to replace
YOUR_PREFIX = "<your-prefix>"


def tuned_command(
    campaign: Any, search: Mapping[str, Any], backend: str | None = None
) -> list[str]:
    """The lines for a tuning search's best setting (campaign.tune): the user's directory
    and a prefix of theirs in the campaign's bucket, on the remote the search measured."""
    best = search.get("best")
    if not best:
        return []
    layout = Layout.from_label(best["layout"])
    remote = campaign.remote_named(search["remote"])
    return user_lines(
        UserCopy(
            tool=search["tool"],
            direction=search["direction"],
            strategy=layout.strategy,
            concurrency=int(best["concurrency"]),
            remote=remote.path(campaign.bucket, YOUR_PREFIX),
            clients=int(best["clients"]),
            chunk_bytes=layout.chunk_bytes,
            flags=tuple(campaign.rclone_flags),
            multi_thread_cutoff=campaign.multi_thread_cutoff,
            multi_thread_chunk_size=campaign.multi_thread_chunk_size,
            template=campaign.template_for(search["tool"]),
            file_bytes=campaign.file_bytes,
            backend=backend,
        )
    )
