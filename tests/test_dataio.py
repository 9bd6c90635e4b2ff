"""Generation, checksums and chunking against the real tools they stand in for."""

import os
import shutil
import subprocess
import zlib

import pytest
from xxhash import xxh3_128_hexdigest

from cloudbench.data.checksums import hash_stream, parse_xxh128sum
from cloudbench.data.chunking import (
    chunk_count,
    chunk_index_width,
    chunk_name,
    chunks_of,
    concatenate,
    split_file,
)
from cloudbench.data.generate import generate_file

XXH128SUM = shutil.which("xxh128sum")
needs_xxhsum = pytest.mark.skipif(
    XXH128SUM is None, reason="xxh128sum missing: `make sysdeps` installs Debian's xxhash"
)


@pytest.mark.unit
@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 5 * 2**20 + 3, 104857601 // 8])
def test_generate_exact_size(tmp_path, size):
    path = tmp_path / "f.bin"
    generate_file(path, size, seed="t", block=2**20)
    assert path.stat().st_size == size


@pytest.mark.unit
def test_generate_is_incompressible_and_reproducible(tmp_path):
    a, b, c = (tmp_path / d / "f.bin" for d in ("a", "b", "c"))
    generate_file(a, 4 * 2**20, seed="s")
    generate_file(b, 4 * 2**20, seed="s", block=2**20 + 16)  # other block size, same bytes
    generate_file(c, 4 * 2**20, seed="other")
    data = a.read_bytes()
    assert len(zlib.compress(data, 9)) > 0.99 * len(data)
    assert data == b.read_bytes()
    assert data != c.read_bytes()
    assert data[: 2**20] != data[2**20 : 2 * 2**20]  # not a repeated block
    generate_file(tmp_path / "a" / "g.bin", 2**20, seed="s")  # the name is part of the key
    assert (tmp_path / "a" / "g.bin").read_bytes() != data[: 2**20]


@pytest.mark.quick
@needs_xxhsum
def test_checksums_equal_xxh128sum_cli(tmp_path):
    path = tmp_path / "f.bin"
    generate_file(path, 3 * 2**20 + 7, seed="x")
    digest, per_chunk, n = hash_stream([path], [2**20, 1000])
    cli = subprocess.run([XXH128SUM, str(path)], capture_output=True, text=True, check=True)
    assert parse_xxh128sum(cli.stdout)[str(path)] == digest
    assert n == path.stat().st_size
    assert len(per_chunk[2**20]) == 4
    assert len(per_chunk[1000]) == -(-n // 1000)
    # each chunk digest is the CLI's digest of that chunk as a separate file
    parts = split_file(path, tmp_path / "parts", 2**20, 4)
    out = subprocess.run([XXH128SUM, *map(str, parts)], capture_output=True, text=True, check=True)
    by_name = parse_xxh128sum(out.stdout)
    assert [by_name[str(p)] for p in parts] == per_chunk[2**20]


@pytest.mark.quick
@needs_xxhsum
def test_xxh128sum_c_verifies_our_files(tmp_path):
    from cloudbench.data.checksums import xxh128sum_line

    path = tmp_path / "g.bin"
    generate_file(path, 123457, seed="y")
    digest, _, _ = hash_stream([path])
    (tmp_path / "g.bin.xxh128").write_text(xxh128sum_line(digest, "g.bin"))
    ok = subprocess.run([XXH128SUM, "-c", "g.bin.xxh128"], cwd=tmp_path, capture_output=True)
    assert ok.returncode == 0
    with open(path, "r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x00")
    bad = subprocess.run([XXH128SUM, "-c", "g.bin.xxh128"], cwd=tmp_path, capture_output=True)
    assert bad.returncode != 0


@pytest.mark.unit
@pytest.mark.parametrize(("size", "chunk"), [(10 * 2**20 + 1, 2**20), (2**20, 2**20), (5, 7)])
def test_chunk_round_trip(tmp_path, size, chunk):
    src = tmp_path / "f.bin"
    generate_file(src, size, seed="c")
    parts = split_file(src, tmp_path / "chunks", chunk, 4)
    assert [p.name for p in parts] == [f"f.bin.{i:04d}" for i in range(len(parts))]
    assert all(p.stat().st_size == chunk for p in parts[:-1])
    assert parts[-1].stat().st_size == size - chunk * (len(parts) - 1)
    out = tmp_path / "joined.bin"
    assert concatenate(chunks_of(tmp_path / "chunks", "f.bin"), out) == size
    assert out.read_bytes() == src.read_bytes()


@pytest.mark.unit
@pytest.mark.parametrize("refused", [(), ("copy_file_range",), ("copy_file_range", "sendfile")])
def test_split_and_reassembly_fall_back_where_the_kernel_will_not_copy(
    tmp_path, monkeypatch, refused
):
    """A file system without copy_file_range (or splice) support answers EXDEV/EINVAL before
    copying anything; the next way is taken and every byte arrives once, in order. (No such
    file system is mounted here: the refusal is the only stand-in.)"""
    import errno

    calls: dict[str, int] = {}

    def refusing(name):
        real = getattr(os, name)

        def call(*args):
            calls[name] = calls.get(name, 0) + 1
            if name in refused:
                raise OSError(errno.EXDEV if name == "copy_file_range" else errno.EINVAL, name)
            return real(*args)

        return call

    for name in ("copy_file_range", "sendfile"):
        monkeypatch.setattr(os, name, refusing(name))
    src = tmp_path / "f.bin"
    generate_file(src, 5 * 4099 + 7, seed="k")
    data = src.read_bytes()
    digests: list[str] = []
    parts = split_file(src, tmp_path / "chunks", 4099, 4, digests=digests)
    assert [p.read_bytes() for p in parts] == [
        data[i : i + 4099] for i in range(0, len(data), 4099)
    ]
    assert digests == [xxh3_128_hexdigest(data[i : i + 4099]) for i in range(0, len(data), 4099)]
    calls.clear()  # split's workers asked too; from here, the reassembly's own calls
    seen = bytearray()
    out = tmp_path / "joined.bin"
    assert concatenate(parts, out, on_data=seen.extend) == src.stat().st_size
    assert out.read_bytes() == bytes(seen) == src.read_bytes()
    # each refusing way is asked once, then never again for the later parts
    assert all(calls.get(name) == 1 for name in refused)
    used = {0: "copy_file_range", 1: "sendfile", 2: None}[len(refused)]
    if used:
        assert calls[used] >= len(parts)


@pytest.mark.unit
def test_reassembly_digest_is_of_the_file_written_not_of_the_chunks(tmp_path, monkeypatch):
    """A copy that goes wrong (here: the last byte of each copied part flipped in the new
    file) shows in what on_data sees: it reads the new file back, not the chunks."""
    from cloudbench.data import chunking

    src = tmp_path / "f.bin"
    generate_file(src, 3 * 5000, seed="f")
    parts = split_file(src, tmp_path / "chunks", 5000, 4)
    real = chunking._KernelCopy.copy

    def faulty(self, src_fd, dest, start, size):
        real(self, src_fd, dest, start, size)
        with open(f"/proc/self/fd/{dest}", "r+b") as fh:  # dest is open write-only
            fh.seek(os.lseek(dest, 0, os.SEEK_CUR) - 1)
            last = fh.read(1)[0]
            fh.seek(-1, os.SEEK_CUR)
            fh.write(bytes([last ^ 0xFF]))

    monkeypatch.setattr(chunking._KernelCopy, "copy", faulty)
    seen = bytearray()
    out = tmp_path / "joined.bin"
    concatenate(parts, out, on_data=seen.extend)
    written = out.read_bytes()
    assert written != src.read_bytes()  # the fault happened
    assert bytes(seen) == written


@pytest.mark.unit
def test_more_than_10000_chunks_are_named_to_sort_as_numbers():
    size = 10_007 * 64 + 13
    width = chunk_index_width(size, 64)
    assert chunk_count(size, 64) == 10_008 and width == 5  # no 10,000 ceiling
    names = [chunk_name("f.bin", i, width) for i in range(10_008)]
    assert sorted(names) == names  # plain lexical sort == numeric order


@pytest.mark.quick  # writes and reads back 10,008 files: seconds of file-system calls
def test_more_than_10000_chunks_sort_and_reassemble(tmp_path):
    size = 10_007 * 64 + 13
    src = tmp_path / "f.bin"
    generate_file(src, size, seed="many")
    parts = split_file(src, tmp_path / "chunks", 64, width=5)
    assert len(parts) == 10_008
    names = sorted(os.listdir(tmp_path / "chunks"))  # plain lexical sort == numeric order
    assert names == [p.name for p in parts]
    out = tmp_path / "joined.bin"
    concatenate(chunks_of(tmp_path / "chunks", "f.bin"), out)
    assert out.read_bytes() == src.read_bytes()


@pytest.mark.unit
def test_missing_chunk_is_named(tmp_path):
    src = tmp_path / "f.bin"
    generate_file(src, 10 * 100, seed="m")
    split_file(src, tmp_path / "chunks", 100, 4)
    (tmp_path / "chunks" / "f.bin.0003").unlink()
    with pytest.raises(FileNotFoundError, match=r"\[3\]"):
        chunks_of(tmp_path / "chunks", "f.bin")


def _cached_pages(path):
    from cloudbench.data.pagecache import cachestat

    fd = os.open(path, os.O_RDONLY)
    try:
        return cachestat(fd)
    finally:
        os.close(fd)


def _needs_cachestat(tmp_path):
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    if _cached_pages(probe) is None:
        pytest.skip("this kernel has no cachestat(2) (Linux 6.5): parts stay cached, as before")


@pytest.mark.unit
def test_release_if_clean_drops_written_back_pages_and_leaves_dirty_ones(tmp_path):
    from cloudbench.data.pagecache import release_if_clean

    _needs_cachestat(tmp_path)
    path = tmp_path / "f.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, os.urandom(2**20))
        dirty = _cached_pages(path)
        assert dirty.cached == 256 and dirty.dirty > 0
        assert not release_if_clean(fd)  # dirty: not dropped, and no write-back started here
        assert _cached_pages(path).cached == 256
        os.fsync(fd)
        assert release_if_clean(fd)
        assert _cached_pages(path).cached == 0
    finally:
        os.close(fd)


@pytest.mark.unit
def test_a_file_all_in_the_page_cache_is_fully_cached_and_one_let_go_of_is_not(tmp_path):
    """prefetch_head skips its readahead hints for a part that is all cached already."""
    from cloudbench.data.pagecache import fully_cached

    _needs_cachestat(tmp_path)
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(2**20 + 7))
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        assert fully_cached(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert not fully_cached(fd)
    finally:
        os.close(fd)


@pytest.mark.unit
@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.parametrize("synced", [True, False])
def test_reassembly_releases_only_parts_already_on_disk(tmp_path, synced, hashed):
    """Without a digest the copying thread lets go of each part; with one (reassembly's
    case) the thread that reads the new file back does, once it has hashed past it."""
    _needs_cachestat(tmp_path)
    data = os.urandom(3 * 2**20 + 5)
    src = tmp_path / "f.bin"
    src.write_bytes(data)
    split_file(src, tmp_path / "chunks", 2**20, 4)
    parts = chunks_of(tmp_path / "chunks", "f.bin")
    if synced:
        os.sync()
    before = [_cached_pages(p).cached for p in parts]
    assert all(before)
    seen = bytearray()
    concatenate(parts, tmp_path / "out.bin", on_data=seen.extend if hashed else None)
    assert (tmp_path / "out.bin").read_bytes() == data
    assert seen == (data if hashed else b"")
    after = [_cached_pages(p).cached for p in parts]
    assert after == ([0] * len(parts) if synced else before)
