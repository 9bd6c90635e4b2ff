"""Split files into fixed-size chunks and put them back together, with in-kernel copies.

``os.copy_file_range`` moves the bytes inside the kernel (no trip through user space), so
splitting and reassembly run at the file system's copy speed, not Python's.  Chunk names are
``<file>.<index>`` with zero-padded indices wide enough to sort numerically at any count.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

COPY_STEP = 1 << 30


def _copy_range(src_fd: int, dst_fd: int, count: int, offset: int) -> None:
    """Copy ``count`` bytes from ``src_fd`` at ``offset`` to the current end of ``dst_fd``."""
    done = 0
    while done < count:
        try:
            n = os.copy_file_range(src_fd, dst_fd, min(COPY_STEP, count - done), offset + done)
        except OSError:
            n = 0
        if n == 0:  # not supported across these file systems, or EOF: fall back to read/write
            os.lseek(src_fd, offset + done, os.SEEK_SET)
            data = os.read(src_fd, min(16 * 2**20, count - done))
            if not data:
                raise OSError(f"unexpected end of file after {offset + done} bytes")
            n = os.write(dst_fd, data)
        done += n


def chunk_name(file_name: str, index: int, width: int) -> str:
    return f"{file_name}.{index:0{width}d}"


def split_file(src: Path, outdir: Path, chunk_bytes: int, width: int) -> list[Path]:
    """Split ``src`` into ``outdir/<name>.<index>``; the last chunk holds the remainder."""
    outdir.mkdir(parents=True, exist_ok=True)
    size = src.stat().st_size
    paths = []
    fd = os.open(src, os.O_RDONLY)
    try:
        for index, offset in enumerate(range(0, max(size, 1), chunk_bytes)):
            path = outdir / chunk_name(src.name, index, width)
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _copy_range(fd, out, min(chunk_bytes, size - offset), offset)
            finally:
                os.close(out)
            paths.append(path)
    finally:
        os.close(fd)
    return paths


def chunks_of(directory: Path, file_name: str) -> list[Path]:
    """The chunks of ``file_name`` in ``directory``, in numeric index order."""
    pattern = re.compile(re.escape(file_name) + r"\.(\d+)$")
    found = []
    for p in directory.iterdir():
        m = pattern.match(p.name)
        if m:
            found.append((int(m.group(1)), p))
    found.sort()
    indices = [i for i, _ in found]
    if indices != list(range(len(indices))):
        missing = sorted(set(range(max(indices, default=-1) + 1)) - set(indices))
        raise FileNotFoundError(f"{file_name}: chunk(s) missing from {directory}: {missing[:10]}")
    return [p for _, p in found]


def concatenate(parts: list[Path], dest: Path) -> int:
    """Write the concatenation of ``parts`` to ``dest``; returns the bytes written."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    total = 0
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for part in parts:
            fd = os.open(part, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                _copy_range(fd, out, size, 0)
                total += size
            finally:
                os.close(fd)
    finally:
        os.close(out)
    os.replace(tmp, dest)
    return total
