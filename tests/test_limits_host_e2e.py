"""Each bottleneck on the client's host or at the store built on purpose, a real rclone copy
through it, and the verdict read from the evidence sampled beside the copy
(cloudbench.measure.evidence, cloudbench.report.limits); the copies are made by
tests/infra/limits.py as a measurement makes them, against a real S3 server on this machine:

* a client held to a fraction of a core: a cgroup v1 ``cpu.cfs_quota_us`` its rclone is put
  in (a wrapper named as rclone's override, CLOUDBENCH_RCLONE, that joins it first);
* a store that answers 503 SlowDown to a share of requests (tests/infra/throttle.py);
* a slow scratch: the files on ext4 over a loop device whose reads a cgroup v1 blkio throttle
  holds down for the rclone put in it, dropped from the page cache before each copy;
* nothing: unshaped loopback, where the verdict must be one the evidence shows.

Each asserts the verdict for at least 9 of 10 copies, and the route's verdict from them. The
limits on the network are tests/test_limits_e2e.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.measure import evidence
from cloudbench.measure.rclone import find_rclone
from cloudbench.report import limits
from tests.infra.limits import (
    ENOUGH,
    REPEATS,
    dataset,
    named,
    needs_root,
    route,
    said,
    store_fixture,  # noqa: F401 - the fixture `store`
    upload,
)

pytestmark = needs_root
needs_blkio = pytest.mark.skipif(
    not Path("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device").exists()
    or not all(shutil.which(c) for c in ("losetup", "mkfs.ext4", "mount")),
    reason="no cgroup v1 blkio throttle, or no losetup/mkfs.ext4: a slow scratch cannot be built",
)
needs_cpu_quota = pytest.mark.skipif(
    not Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists(),
    reason="no cgroup v1 cpu controller here: a client's CPU quota cannot be set",
)


# --- a client held to a fraction of a core --------------------------------------------------


@contextlib.contextmanager
def in_cgroup(controller: str, settings: dict[str, str], tmp: Path) -> Iterator[Path]:
    """A cgroup v1 of ``controller`` with ``settings`` (file: value), and an rclone wrapper
    that joins it before it becomes rclone (exec: the same process, so the copy's pid is
    rclone's)."""
    root = Path("/sys/fs/cgroup") / controller
    group = root / f"cloudbench-limits-{os.getpid()}"
    group.mkdir()
    try:
        for name, value in settings.items():
            (group / name).write_text(value)
        wrapper = tmp / f"bin-{controller}" / "rclone"
        wrapper.parent.mkdir()
        wrapper.write_text(f'#!/bin/sh\necho $$ > {group}/tasks\nexec {find_rclone()} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
        yield wrapper
    finally:
        for pid in (group / "tasks").read_text().split():  # none left, but never strand one
            with contextlib.suppress(OSError):
                (root / "tasks").write_text(pid)
        group.rmdir()


def cpu_quota(cores: float, tmp: Path) -> contextlib.AbstractContextManager[Path]:
    """A CPU quota of ``cores`` for the rclone of the wrapper it yields."""
    return in_cgroup("cpu", {"cpu.cfs_quota_us": str(int(cores * 100_000))}, tmp)


@pytest.mark.full
@pytest.mark.slow
@needs_cpu_quota
def test_a_client_held_to_a_fraction_of_a_core_is_named_cpu(store, tmp_path, monkeypatch):
    """rclone in a cgroup allowed 5% of a core: each copy is named client CPU with the
    quota as its cores, and so is the route."""
    src = tmp_path / "src"
    names = dataset(src, 4)
    quota = 0.05
    with cpu_quota(quota, tmp_path) as wrapper:
        monkeypatch.setenv("CLOUDBENCH_RCLONE", str(wrapper))
        rows = [upload(tmp_path, src, names, 4, f"cpu{k}") for k in range(REPEATS)]
    assert named(rows, limits.CPU) >= ENOUGH, said(rows)
    assert all(
        f"of {quota:g} core" in r["limit_evidence"] for r in rows if r["limit"] == limits.CPU
    )
    assert route(rows).limit == limits.CPU


# --- a slow scratch ---------------------------------------------------------------------------


@contextlib.contextmanager
def slow_scratch(tmp: Path, bytes_per_s: int) -> Iterator[tuple[Path, Path]]:
    """A scratch filesystem (ext4 on a loop device) whose reads a cgroup v1 blkio throttle
    holds to ``bytes_per_s`` for the rclone of the wrapper: (its mount point, the wrapper)."""
    image, mount = tmp / "scratch.img", tmp / "scratch"
    mount.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(64 * 2**20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    mounted = False
    try:
        subprocess.run(["mount", device, str(mount)], check=True, capture_output=True)
        mounted = True
        major_minor = Path(f"/sys/class/block/{Path(device).name}/dev").read_text().strip()
        throttle = {"blkio.throttle.read_bps_device": f"{major_minor} {bytes_per_s}"}
        with in_cgroup("blkio", throttle, tmp) as wrapper:
            yield mount, wrapper
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], capture_output=True)
        subprocess.run(["losetup", "-d", device], capture_output=True)


def out_of_page_cache(folder: Path) -> None:
    """Each file's pages dropped (clean, so the kernel may): its next read is the disk's."""
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@pytest.mark.full
@pytest.mark.slow
@needs_blkio
def test_a_copy_read_from_a_slow_scratch_is_named_disk(store, tmp_path, monkeypatch):
    """Its files on a scratch whose reads are held to 4 MB/s, out of the page cache before
    each upload: each copy is named disk, with the storage it read, and so is the route."""
    with slow_scratch(tmp_path, 4_000_000) as (scratch, wrapper):
        src = scratch / "src"
        names = dataset(src, 4)
        os.sync()
        monkeypatch.setenv("CLOUDBENCH_RCLONE", str(wrapper))
        rows = []
        for k in range(REPEATS):
            out_of_page_cache(src)
            rows.append(upload(tmp_path, src, names, 4, f"disk{k}"))
    assert named(rows, limits.DISK) >= ENOUGH, said(rows)
    assert all(
        "read from storage" in r["limit_evidence"] for r in rows if r["limit"] == limits.DISK
    )
    assert route(rows).limit == limits.DISK


# --- a store that throttles -------------------------------------------------------------------


@pytest.mark.full
@pytest.mark.slow
def test_a_store_answering_503_is_named_the_store(store, tmp_path, monkeypatch):
    """Every second PUT answered 503 SlowDown: each copy is named store, and the route.

    Each refusal comes FIRST_S late: 8 files of one PUT each at 4 at once, every second
    refused, keep the copy going at least 2 x FIRST_S, past the sampler's first look, at any
    machine speed (answered at once, a copy took 0.46 s on a fast day and was not sampled)."""
    from tests.infra.throttle import throttling_proxy

    src = tmp_path / "src"
    names = dataset(src, 8, 8 * 2**20)  # one PUT each: under rclone's multipart cutoff
    with throttling_proxy(
        store.port, every=2, limit=10**6, within="/bkt/", answer_after_s=evidence.FIRST_S
    ) as throttle:
        monkeypatch.setenv("RCLONE_CONFIG_S3T_ENDPOINT", f"http://127.0.0.1:{throttle.port}")
        rows = [upload(tmp_path, src, names, 4, f"th{k}") for k in range(REPEATS)]
    assert throttle.refused
    assert named(rows, limits.STORE) >= ENOUGH, said(rows)
    assert route(rows).limit == limits.STORE


# --- nothing in the way -----------------------------------------------------------------------


@pytest.mark.full
@pytest.mark.slow
def test_unshaped_loopback_names_only_what_its_evidence_shows(store, tmp_path):
    """No cap, no quota, no throttling: no copy is named for a limit that was not there
    (shared link, throttling, the sender's buffer); client CPU only where its own figure
    reached the threshold; and every verdict carries its figures."""
    src = tmp_path / "src"
    names = dataset(src, 4, 16 * 2**20)
    rows = [upload(tmp_path, src, names, 4, f"free{k}") for k in range(REPEATS)]
    for r in rows:
        assert r["limit"] not in (limits.SHARED, limits.STORE, limits.SENDER_BUFFER), said(rows)
        assert r["limit_evidence"], r
        if r["limit"] == limits.CPU:  # its own figure, read again from the file
            doc = evidence.read(r["evidence"])
            last = doc["samples"][-1]
            assert last["cpu_s"] / last["t"] / doc["cores"] >= limits.CPU_FULL
