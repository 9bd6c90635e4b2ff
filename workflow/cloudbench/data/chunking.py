"""Split files into fixed-size chunks and put them back together, plus the file I/O they share.

The kernel copies (copy_file_range(2), else sendfile(2), ``_KernelCopy``): one copy from page
cache to page cache where ``split`` makes two (read into a buffer, write it out), as ``cat``
of coreutils 9 does, or none where the file system can share blocks or copy on the server.
Only where a file system supports neither do the bytes go through ``write`` from a map.
What must be hashed is read through read-only memory maps in windows of ``WINDOW`` bytes
(no copy into a Python buffer; resident memory stays at one window per thread whatever the
file size).  Destinations are preallocated with fallocate(2), so the write path finds its
blocks already reserved.

``split_file`` hashes each chunk's bytes from the source's map just before the kernel copies
them.  Reassembly has a second thread read the new file back through its map, right behind
the copy, and hand every byte, in order, to ``on_data`` (a hash's ``update``): the caller
hashes the file as written, in the same pass, on the other core.

A file truncated by someone else while it is mapped here would end the process with SIGBUS;
the files these functions read are private to the job that reads them.

Chunk names are ``<file>.<index>`` with zero-padded indices wide enough to sort numerically at
any count.
"""

from __future__ import annotations

import errno
import functools
import mmap
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import xxhash

from cloudbench.data.pagecache import fully_cached, release_if_clean
from cloudbench.data.parallel import run_workers
from cloudbench.processes import usable_cores

WINDOW = 32 * 2**20  # bytes of a source mapped at once (page-aligned)
PIECE = 256 * 2**10  # bytes hashed at a time: small enough to stay in L2 for a second hash
# Errors of copy_file_range(2) and sendfile(2) that mean "not between these two files" (other
# file systems on an old kernel, a file system without splice support), not a failed copy:
# the next way is tried.  Raised before any byte is copied, so nothing is copied twice.
COPY_UNSUPPORTED = frozenset(
    {errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EBADF}
)
SPLIT_WORKERS = 2  # threads writing chunks at once (each chunk is its own file)
PREFETCH_STEP = 8 * 2**20  # readahead hints, issued this far ahead of the reader ...
PREFETCH_AHEAD = 64 * 2**20  # ... so a cold file streams from disk while we work


# --- low-level I/O --------------------------------------------------------------------------


@functools.cache
def _fallocate():
    """libc's fallocate, looked up once, when a file is first preallocated (ctypes is not
    imported by jobs that never write one)."""
    import ctypes

    try:
        # the process's own symbols (libc among them): find_library("c") would run ldconfig
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):  # pragma: no cover - not glibc/musl
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fn.restype = ctypes.c_int
    return fn


def preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes for ``fd`` up front (fallocate(2)); a no-op where unsupported.

    Raises only when the file system is out of space, so a job fails at once rather than after
    writing most of a file.  Deliberately not ``os.posix_fallocate``: where the file system
    cannot preallocate (NFSv3, some FUSE), glibc emulates it by writing every block.
    """
    fallocate = _fallocate()
    if fallocate is None or size <= 0:
        return
    if fallocate(fd, 0, 0, size) != 0:
        import ctypes

        err = ctypes.get_errno()
        if err in (errno.ENOSPC, errno.EDQUOT):
            raise OSError(err, f"cannot reserve {size} bytes: {os.strerror(err)}")


def write_all(fd: int, data: memoryview) -> None:
    while data:
        n = os.write(fd, data)
        data = data[n:]


class _Window:
    """``length`` bytes of a file from ``offset``: a read-only mapping, or a buffer read in."""

    __slots__ = ("_map", "view")

    def __init__(self, fd: int, offset: int, length: int, populate: bool = True) -> None:
        self._map = None
        base = offset - offset % mmap.ALLOCATIONGRANULARITY
        pre = getattr(mmap, "MAP_POPULATE", 0) if populate else 0
        try:
            self._map = mmap.mmap(
                fd,
                length + offset - base,
                flags=mmap.MAP_SHARED | pre,
                prot=mmap.PROT_READ,
                offset=base,
            )
            self.view = memoryview(self._map)[offset - base :]
        except (OSError, ValueError):  # not mappable (special file, some FUSE): read it
            buf = bytearray(length)
            got = os.preadv(fd, [buf], offset)
            self.view = memoryview(buf)[:got]
        if len(self.view) != length:
            self.close()
            raise OSError(errno.EIO, f"file shrank while being read (at byte {offset})")

    def close(self) -> None:
        self.view.release()
        if self._map is not None:
            self._map.close()


class _Prefetcher:
    """Readahead hints ahead of a sequential reader (cheap when the file is already cached)."""

    def __init__(self, fd: int, stop: int, start: int = 0) -> None:
        self.fd, self.stop, self.next = fd, stop, start

    def advance(self, pos: int) -> None:
        while self.next < self.stop and self.next < pos + PREFETCH_AHEAD:
            n = min(PREFETCH_STEP, self.stop - self.next)
            try:
                os.posix_fadvise(self.fd, self.next, n, os.POSIX_FADV_WILLNEED)
            except OSError:  # a hint only
                self.stop = 0
            self.next += n


def prefetch_head(path: Path) -> None:
    """Start reading the head of ``path`` into the page cache (a hint; errors are ignored),
    unless all of it is there already."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        if not fully_cached(fd):
            _Prefetcher(fd, os.fstat(fd).st_size).advance(0)
    finally:
        os.close(fd)


def windows(
    fd: int, start: int, stop: int, populate: bool = True, prefetch: bool = True
) -> Iterator[_Window]:
    """Consecutive windows covering bytes [start, stop) of ``fd``; the caller closes each.
    ``populate``: map each window's pages up front (one thread reading it); two threads
    reading the same window fault its pages in between them faster. ``prefetch``: readahead
    hints ahead of the reader, unless the file is all cached (bytes just written, a warm
    file: 256 hints for 2 GiB that walk pages already there)."""
    hinted = prefetch and not fully_cached(fd)
    hints = _Prefetcher(fd, stop if hinted else start, start)
    pos = start
    while pos < stop:
        hints.advance(pos)
        end = min(stop, (pos // WINDOW + 1) * WINDOW)
        yield _Window(fd, pos, end - pos, populate)
        pos = end


def pieces(view: memoryview, size: int = PIECE) -> Iterator[memoryview]:
    """``view`` in slices of ``size`` bytes, each released once the caller moves on."""
    for off in range(0, len(view), size):
        piece = view[off : off + size]
        yield piece
        piece.release()


class _KernelCopy:
    """Copies a range of one file to another inside the kernel, the first way that works.

    copy_file_range(2) first: on XFS or btrfs it shares the blocks, on NFS 4.2 the server
    copies, and elsewhere it is the kernel's own copy.  Then sendfile(2), then, where neither
    is supported between the two files (some FUSE file systems), ``write`` from a map.  On a
    VM whose user-space copies are slow (this project's test machines) the kernel's copy took
    0.53-0.66 s for 2 GiB of 64 MiB chunks where ``write`` from the chunks' maps took 1.2-3.2 s,
    side by side (`make bench ONLY=chunk`, 2026-11-25).  A way once refused is not asked again.
    """

    WAYS = ("copy_file_range", "sendfile", "write")

    def __init__(self) -> None:
        self.way = 0

    def copy(self, src: int, dest: int, start: int, size: int) -> None:
        """Bytes [start, start + size) of ``src`` to ``dest`` at its file offset."""
        done = 0
        while done < size:
            try:
                n = self._once(src, dest, start + done, size - done)
            except OSError as err:
                if done or err.errno not in COPY_UNSUPPORTED or self.way + 1 == len(self.WAYS):
                    raise
                self.way += 1
                continue
            if n == 0:
                raise OSError(errno.EIO, f"file shrank while being read (at byte {start + done})")
            done += n

    def _once(self, src: int, dest: int, offset: int, count: int) -> int:
        way = self.WAYS[self.way]
        if way == "copy_file_range":
            return os.copy_file_range(src, dest, count, offset)
        if way == "sendfile":
            return os.sendfile(dest, src, offset, count)
        for win in windows(src, offset, offset + count):
            try:
                write_all(dest, win.view)
            finally:
                win.close()
        return count


# --- chunks ---------------------------------------------------------------------------------


MIN_CHUNK_INDEX_WIDTH = 4


def chunk_count(file_bytes: int, chunk_bytes: int) -> int:
    return max(1, -(-file_bytes // chunk_bytes))


def chunk_index_width(file_bytes: int, chunk_bytes: int) -> int:
    """Digits of a chunk index: wide enough to sort numerically, never a 10,000 ceiling."""
    return max(MIN_CHUNK_INDEX_WIDTH, len(str(chunk_count(file_bytes, chunk_bytes) - 1)))


def chunk_name(file_name: str, index: int, width: int) -> str:
    return f"{file_name}.{index:0{width}d}"


def split_file(
    src: Path, outdir: Path, chunk_bytes: int, width: int, digests: list[str] | None = None
) -> list[Path]:
    """Split ``src`` into ``outdir/<name>.<index>``; the last chunk holds the remainder.

    Chunks are separate files, so ``SPLIT_WORKERS`` threads make alternate chunks at once
    (a write holds only its own file's lock); the kernel copies each (``_KernelCopy``).
    With ``digests``, each chunk's XXH128 is taken from the source's bytes the copy takes,
    read through its map just before (one more pass over memory, no more reads), filled in
    chunk order: a chunk size's digests belong to that size's own step, so adding a chunk
    size re-hashes nothing else.
    """

    outdir.mkdir(parents=True, exist_ok=True)
    fd = os.open(src, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        bounds = [(o, min(o + chunk_bytes, size)) for o in range(0, size, chunk_bytes)]
        bounds = bounds or [(0, 0)]
        paths = [outdir / chunk_name(src.name, i, width) for i in range(len(bounds))]
        hashers = [xxhash.xxh3_128() for _ in bounds] if digests is not None else None
        workers = max(1, min(SPLIT_WORKERS, usable_cores(), len(bounds)))

        def work(first: int, failed: threading.Event) -> None:
            win, win_start, win_stop = None, 0, 0
            prefetch = _Prefetcher(fd, size, bounds[first][0])
            copier = _KernelCopy()
            try:
                for index in range(first, len(bounds), workers):
                    if failed.is_set():
                        return
                    start, stop = bounds[index]
                    prefetch.advance(start)
                    pos = start
                    while hashers is not None and pos < stop:  # the bytes the copy will take
                        if win is None or pos >= win_stop:
                            if win is not None:
                                win.close()
                            prefetch.advance(pos)
                            win_start = pos - pos % WINDOW
                            win_stop = min(size, win_start + WINDOW)
                            win = _Window(fd, win_start, win_stop - win_start)
                        end = min(stop, win_stop)
                        with win.view[pos - win_start : end - win_start] as piece:
                            hashers[index].update(piece)
                        pos = end
                    out = os.open(paths[index], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    try:
                        preallocate(out, stop - start)
                        copier.copy(fd, out, start, stop - start)
                    finally:
                        os.close(out)
            finally:
                if win is not None:
                    win.close()

        run_workers(work, workers, "cloudbench-split")
    finally:
        os.close(fd)
    if digests is not None and hashers is not None:
        digests[:] = [h.hexdigest() for h in hashers]
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


def _release_part(part: Path) -> None:
    """Let go of a copied part's page cache if all of it is on disk (``concatenate``); a
    part that cannot be opened again keeps its pages (this is about memory, not data)."""
    try:
        fd = os.open(part, os.O_RDONLY)
    except OSError:
        return
    try:
        release_if_clean(fd)
    finally:
        os.close(fd)


def _feed_written(
    path: Path,
    written: queue.SimpleQueue,
    on_data: Callable[[memoryview], object],
    failed: threading.Event,
) -> None:
    """Every byte of ``path``, in order, to ``on_data``, read through its map as far as
    ``written`` says the copy has got (``(end, part)``; ``None``: the copy is over); then
    each part copied so far is let go of (``_release_part``), here rather than in the
    copying thread, whose copies it held up by a fifth (2026-11-26)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = 0
        while (item := written.get()) is not None:
            end, part = item
            for win in windows(fd, pos, end, prefetch=False):  # just written: cached
                try:
                    for piece in pieces(win.view):
                        if failed.is_set():
                            return
                        on_data(piece)
                finally:
                    win.close()
            _release_part(part)
            pos = end
    finally:
        os.close(fd)


def concatenate(
    parts: list[Path],
    dest: Path,
    on_data: Callable[[memoryview], object] | None = None,
) -> int:
    """Write the concatenation of ``parts`` to ``dest``; returns the bytes written.

    ``on_data``, if given, sees every byte of ``dest`` as written, in order, in slices of
    ``PIECE`` bytes (e.g. a hash's ``update``): a second thread reads each part's bytes back
    from the new file, through its map, as soon as the kernel has copied them there.  So a
    digest taken this way is the file's own, as ``xxh128sum`` would read it from the page
    cache (a copy that went wrong shows in it), and costs no wall time beyond the copy's
    (xxhash lets go of the GIL; the reading thread is one part behind).

    Each part's pages leave the page cache once it is copied, if they are all on disk
    already (``pagecache.release_if_clean``): nothing reads a part again, and the new file's
    pages then reuse memory just freed.  A part still dirty (downloaded seconds ago) stays
    cached, unwritten, as it would be without this.  With ``on_data`` the reading thread
    lets go of the parts, and a part all cached gets no readahead hints: in the copying
    thread these took 0.17-0.24 s of 0.8-1.15 s for 2 GiB, every copy waiting on them
    (cProfile, 2026-11-26); the copy is now all that thread does.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    sizes = [p.stat().st_size for p in parts]
    total = sum(sizes)
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        preallocate(out, total)
        copier = _KernelCopy()
        written: queue.SimpleQueue[tuple[int, Path] | None] = queue.SimpleQueue()

        def work(worker: int, failed: threading.Event) -> None:
            if worker == 1 and on_data is not None:
                _feed_written(tmp, written, on_data, failed)
                return
            offset = 0
            try:
                for i, (part, size) in enumerate(zip(parts, sizes, strict=True)):
                    if failed.is_set():
                        return
                    if i + 1 < len(parts):  # a cold next part streams in while this is copied
                        prefetch_head(parts[i + 1])
                    fd = os.open(part, os.O_RDONLY)
                    try:
                        copier.copy(fd, out, 0, size)
                        if on_data is None:  # else the reading thread lets go of it
                            release_if_clean(fd)
                    finally:
                        os.close(fd)
                    offset += size
                    written.put((offset, part))
            finally:
                written.put(None)  # the reader stops here, whatever happened

        run_workers(work, 1 if on_data is None else 2, "cloudbench-reassemble")
        os.ftruncate(out, total)  # the parts' sizes as copied, whatever was preallocated
    finally:
        os.close(out)
    os.replace(tmp, dest)
    return total
