"""XXH128 of whole files and of every chunk, in one read pass.

Whole-file hashes are written in ``xxh128sum``'s own format (``<hex>  <name>``) so that
``xxh128sum -c`` verifies a file by hand.  Per-chunk hashes, for every configured chunk size,
are computed in the same pass; they go into the manifest, so a corrupt download can be
traced to its chunk.

Files are read through memory maps (``chunking.windows``): XXH3 reads the page cache
directly, with no copy into a Python buffer, in L2-sized pieces so that the second and later
hashes of a piece (per-chunk digests) find it in cache.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import xxhash

from cloudbench.data.chunking import pieces, prefetch_head, windows
from cloudbench.processes import usable_cores
from cloudbench.records import write_json


def xxh128():
    """A fresh XXH3-128 state (what ``xxh128sum`` computes): ``update(bytes)``, ``hexdigest()``."""
    return xxhash.xxh3_128()


class _ChunkHasher:
    """Feeds a byte stream into one XXH128 per fixed-size chunk."""

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self.left = chunk_bytes
        self.current = xxhash.xxh3_128()
        self.digests: list[str] = []

    def update(self, data: memoryview) -> None:
        while data:
            take = min(self.left, len(data))
            self.current.update(data[:take])
            data = data[take:]
            self.left -= take
            if self.left == 0:
                self.digests.append(self.current.hexdigest())
                self.current = xxhash.xxh3_128()
                self.left = self.chunk_bytes

    def finish(self) -> list[str]:
        if self.left != self.chunk_bytes:
            self.digests.append(self.current.hexdigest())
        return self.digests


def hash_stream(
    paths: Sequence[Path], chunk_sizes: Sequence[int] = ()
) -> tuple[str, dict[int, list[str]], int]:
    """XXH128 of the concatenation of ``paths`` plus per-chunk digests; also the byte count."""
    whole = xxhash.xxh3_128()
    chunkers = [_ChunkHasher(c) for c in chunk_sizes]
    total = 0
    # Every byte is hashed twice (the file's digest, its chunk's): with a second core the
    # chunk digests are computed beside the file's, on the same mapped window (XXH3 lets go
    # of the GIL), which is faster than xxh128sum alone; with one core, in L2-sized pieces.
    if chunkers and usable_cores() > 1:
        from concurrent.futures import ThreadPoolExecutor  # only where chunks are hashed

        helper = ThreadPoolExecutor(1)
    else:
        helper = None

    def chunk_update(view: memoryview) -> None:
        for ch in chunkers:
            ch.update(view)

    try:
        for i, path in enumerate(paths):
            if i + 1 < len(paths):  # a cold next file streams in while this one is hashed
                prefetch_head(paths[i + 1])
            fd = os.open(path, os.O_RDONLY)
            try:
                for win in windows(fd, 0, os.fstat(fd).st_size, populate=helper is None):
                    try:
                        if helper is not None:
                            beside = helper.submit(chunk_update, win.view)
                            whole.update(win.view)
                            beside.result()
                        elif chunkers:
                            for piece in pieces(win.view):
                                whole.update(piece)
                                chunk_update(piece)
                        else:
                            whole.update(win.view)
                        total += len(win.view)
                    finally:
                        win.close()
            finally:
                os.close(fd)
    finally:
        if helper is not None:
            helper.shutdown()
    return whole.hexdigest(), {c.chunk_bytes: c.finish() for c in chunkers}, total


# --- digests computed while a file was written ------------------------------------------------

_NOTE_KEYS = ("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")


DIGEST_NOTE_SUFFIX = ".xxh128.json"


def digest_note_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{DIGEST_NOTE_SUFFIX}")


def is_digest_note(name: str) -> bool:
    """Whether a file (by its path) is a digest note: cloudbench's, written beside a file a
    client of a group downloaded once its transfer was timed, never part of the copy."""
    base = name.rsplit("/", 1)[-1]
    return base.startswith(".") and base.endswith(DIGEST_NOTE_SUFFIX)


def write_digest_note(path: Path, digest: str, nbytes: int, source: str = "reassemble") -> None:
    """Record the XXH128 of ``path``, computed by ``source`` (reassembly, from the very bytes
    it wrote; or the client that downloaded the file, reading it back).

    The note is bound to the file's identity (device, inode, size, mtime and ctime, taken
    after the file got its final name), so any later change to the file voids it.
    """
    st = os.stat(path)
    write_json(
        digest_note_path(path),
        {
            "file": path.name,
            "xxh128": digest,
            "bytes": nbytes,
            "source": source,
            **{k: getattr(st, k) for k in _NOTE_KEYS},
        },
    )


def read_digest_note(path: Path) -> tuple[str, int, str] | None:
    """(XXH128, bytes, who computed it) from the note of an unchanged ``path``; None if
    absent or stale."""
    try:
        note = json.loads(digest_note_path(path).read_text())
        st = os.stat(path)
        if note["file"] != path.name or note["bytes"] != st.st_size:
            return None
        if any(note[k] != getattr(st, k) for k in _NOTE_KEYS):
            return None
        return str(note["xxh128"]), int(note["bytes"]), str(note.get("source", "reassemble"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def xxh128sum_line(digest: str, name: str) -> str:
    return f"{digest}  {name}\n"


def parse_xxh128sum(text: str) -> dict[str, str]:
    """Name -> digest from ``xxh128sum`` output (also accepts its BSD ``--tag`` style)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("XXH128 ("):
            name, digest = line[len("XXH128 (") :].rsplit(") = ", 1)
        else:
            digest, name = line.split(None, 1)
            name = name.lstrip("*").strip()
        out[name] = digest.lower()
    return out
