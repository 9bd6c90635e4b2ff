"""Incompressible test data at disk speed, reproducible, in constant memory.

The bytes are an AES-256-CTR keystream (what the study got from ``openssl enc`` over
/dev/zero), computed in-process with ``cryptography`` (AES-NI, ~7 GB/s on one core).  CTR
mode can start anywhere, so the file is cut into stripes of ``STRIPE`` bytes and two worker
threads take alternate stripes: each encrypts a ``block`` into its own small buffer (it stays
in that core's cache) and ``pwrite``s it in place.  The cipher of one worker runs while the
other's write is in the kernel, so a file is produced about as fast as the kernel takes
writes, not at the sum of cipher and write.  (Writes to one file take turns in the kernel
anyway; a worker waits for its turn asleep on a lock here rather than spinning on the file's
lock there, which would burn the CPU the other worker's cipher needs.)  Memory stays at one
block per worker whatever the file size.  The key derives from the campaign seed and the
file name, so a file regenerated after a lost scratch directory is byte-identical and its
recorded checksums stay valid (the bytes do not depend on the block size, the stripes or the
number of workers).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cloudbench.data.chunking import preallocate
from cloudbench.data.parallel import run_workers
from cloudbench.processes import usable_cores

# Bytes per cipher call and per write, small enough to stay in cache between the two. 2 GiB,
# 2 workers, memory the host had backed, side by side with dd bs=1M (0.43-0.46 s): 256 KiB
# 0.37 s, 512 KiB 0.35 s, 1 MiB 0.38-0.47 s, and 2 MiB 3.3-5.2 s (in every run; not
# explained: 2 MiB writes of a user buffer into fresh page cache are that slow on this VM)
BLOCK = 512 * 2**10
STRIPE = 8 * 2**20  # consecutive bytes one worker produces (a multiple of the AES block)
WORKERS = 2  # the cipher and the kernel's copy take about as long as each other: 2 overlap
_AES_BLOCK = 16


def _key_nonce(seed: str, name: str) -> tuple[bytes, bytes]:
    import hashlib  # once per generated file, not in every job that imports this module

    digest = hashlib.sha512(f"cloudbench/{seed}/{name}".encode()).digest()
    return digest[:32], digest[32:48]


def _keystream_at(key: bytes, nonce: bytes, offset: int):
    """The encryptor whose output is the file's keystream from byte ``offset`` (a multiple of
    16): CTR's 128-bit big-endian counter block, advanced by ``offset / 16``."""
    counter = (int.from_bytes(nonce, "big") + offset // _AES_BLOCK) % (1 << 128)
    # imported here: every transfer job imports this module, few generate anything
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    return Cipher(algorithms.AES(key), modes.CTR(counter.to_bytes(16, "big"))).encryptor()


def _workers() -> int:
    return max(1, min(WORKERS, usable_cores()))


def generate_file(path: Path, size: int, seed: str, block: int = BLOCK) -> None:
    """Write exactly ``size`` bytes of keystream to ``path`` (replacing any old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key, nonce = _key_nonce(seed, path.name)
    stripes = range(0, size, STRIPE)
    workers = min(_workers(), len(stripes)) or 1
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")  # two jobs may regenerate at once
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def work(first: int, failed: threading.Event) -> None:
        zeros = bytes(block)
        view = memoryview(bytearray(block + _AES_BLOCK - 1))
        for start in stripes[first::workers]:
            if failed.is_set():
                return
            enc = _keystream_at(key, nonce, start)
            pos, stop = start, min(size, start + STRIPE)
            while pos < stop:
                n = min(block, stop - pos)
                written = enc.update_into(zeros[:n] if n < block else zeros, view)
                data = view[:written]
                # No lock of ours around the write: the kernel's own (the file's) orders the
                # two workers' writes. One of ours as well cost 0.12 s in 0.55 on 2 GiB, with
                # the same CPU time (a second hand-off of the GIL per block); but while this
                # VM's host faulted pages in, the version with it was faster (0.67-1.23 s
                # against 1.12-1.59 s: a writer then waits on the file's lock in the kernel;
                # `make bench ONLY=generate`, 2026-11-25)
                while data:
                    k = os.pwrite(fd, data, pos)
                    data, pos = data[k:], pos + k

    try:
        preallocate(fd, size)
        run_workers(work, workers, "cloudbench-generate")
    finally:
        os.close(fd)
    os.replace(tmp, path)
