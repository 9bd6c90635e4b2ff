"""XXH128 of whole files and of every chunk, in one read pass.

Whole-file hashes are written in ``xxh128sum``'s own format (``<hex>  <name>``) so that
``xxh128sum -c`` verifies a file by hand.  Per-chunk hashes, for every configured chunk size,
are computed in the same pass, so a corrupt download can name its chunk without reading
the file again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import xxhash

READ_BLOCK = 16 * 2**20


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


def read_blocks(paths: Iterable[Path], block: int = READ_BLOCK):
    """Yield memoryviews over consecutive blocks of the files, in order, from one buffer."""
    buf = bytearray(block)
    view = memoryview(buf)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while True:
                n = os.readv(fd, [buf])
                if n == 0:
                    break
                yield view[:n]
        finally:
            os.close(fd)


def hash_stream(
    paths: Sequence[Path], chunk_sizes: Sequence[int] = ()
) -> tuple[str, dict[int, list[str]], int]:
    """XXH128 of the concatenation of ``paths`` plus per-chunk digests; also the byte count."""
    whole = xxhash.xxh3_128()
    chunkers = [_ChunkHasher(c) for c in chunk_sizes]
    total = 0
    for data in read_blocks(paths):
        whole.update(data)
        for ch in chunkers:
            ch.update(data)
        total += len(data)
    return whole.hexdigest(), {c.chunk_bytes: c.finish() for c in chunkers}, total


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
