"""Incompressible test data at disk speed, reproducible, in constant memory.

The bytes are an AES-256-CTR keystream (what the study got from ``openssl enc`` over
/dev/zero), computed in-process with ``cryptography`` into one reused buffer: ~3 GB/s on
one core, far faster than os.urandom or numpy, and memory stays at two blocks whatever the
file size.  The key derives from the campaign seed and the file name, so a file regenerated
after a lost scratch directory is byte-identical and its recorded checksums stay valid.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK = 16 * 2**20
_AES_BLOCK = 16


def _keystream(seed: str, name: str):
    digest = hashlib.sha512(f"cloudbench/{seed}/{name}".encode()).digest()
    key, nonce = digest[:32], digest[32:48]
    return Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()


def generate_file(path: Path, size: int, seed: str, block: int = BLOCK) -> None:
    """Write exactly ``size`` bytes of keystream to ``path`` (replacing any old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    enc = _keystream(seed, path.name)
    zeros = bytes(block)
    out = bytearray(block + _AES_BLOCK - 1)
    view = memoryview(out)
    tmp = path.with_name(f".{path.name}.part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        remaining = size
        while remaining:
            n = min(block, remaining)
            written = enc.update_into(zeros[:n] if n < block else zeros, out)
            mv = view[:written]
            while mv:
                k = os.write(fd, mv)
                mv = mv[k:]
            remaining -= n
    finally:
        os.close(fd)
    os.replace(tmp, path)
